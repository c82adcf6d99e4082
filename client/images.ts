// The ensure-image workflow's client calls: proxies and warms join it (signal-with-start), and its
// waiters hear of upload progress. Typed by the workflow function and the define* objects of
// contracts/messages.ts.
import type { Client } from '@temporalio/client';
import { IMAGE_WORKFLOW_TYPE } from '../contracts/image.ts';
import type { ImageJoin, ImageProgressSignal, ImageWorkflowInput } from '../contracts/image.ts';
import { imageJoinSignal, imageProgressSignal, imageStatusQuery } from '../contracts/messages.ts';
import type { ensureImageWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';

export interface JoinImageOptions {
  workflowId: string;
  image: ImageWorkflowInput;
  /** The joining workflow's ID: it is told when the base is ready. */
  waiter: string;
  taskQueue: string;
  callTimeoutMs?: number;
}

/**
 * Starts the ensure-image workflow with a fixed ID, or joins the one running (signal-with-start),
 * registering `waiter` to be told when the base is ready.
 */
export async function joinImage(client: Client, o: JoinImageOptions): Promise<void> {
  const join: ImageJoin = { waiter: o.waiter };
  await withDeadline(client, 'the image join', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
    client.workflow.signalWithStart<typeof ensureImageWorkflow, [ImageJoin]>(IMAGE_WORKFLOW_TYPE, {
      workflowId: o.workflowId,
      taskQueue: o.taskQueue,
      args: [o.image],
      signal: imageJoinSignal,
      signalArgs: [join],
      staticSummary: `base image ${o.image.key} of ${o.image.entry} on ${o.image.host}`,
    }),
  );
}

/**
 * Tells every waiter of the ensure-image workflow `imageWorkflowId` of upload progress. A waiter
 * that cannot be signalled (it ended meanwhile) is skipped; the waiters' query must answer.
 */
export async function tellImageWaiters(
  client: Client,
  imageWorkflowId: string,
  progress: ImageProgressSignal,
  callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<void> {
  const status = await withDeadline(client, 'the image status query', callTimeoutMs, () =>
    client.workflow.getHandle(imageWorkflowId).query(imageStatusQuery),
  );
  await Promise.all(
    status.waiters.map((w) =>
      withDeadline(client, 'the progress signal', callTimeoutMs, () =>
        client.workflow.getHandle(w).signal(imageProgressSignal, progress),
      ).catch(() => undefined),
    ),
  );
}
