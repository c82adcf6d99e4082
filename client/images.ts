// The image workflows' client calls: the warm-image workflow the API starts and reads, and the
// ensure-image workflow that proxies and warms join (signal-with-start) and whose waiters hear of
// upload progress. Typed by the workflow functions and the define* objects of contracts/messages.ts.
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { IMAGE_WORKFLOW_TYPE } from '../contracts/image.ts';
import type { ImageJoin, ImageProgressSignal, ImageWorkflowInput } from '../contracts/image.ts';
import { imageJoinSignal, imageProgressSignal, imageStatusQuery } from '../contracts/messages.ts';
import { WARM_WORKFLOW_TYPE, warmWorkflowId } from '../contracts/warm.ts';
import type { WarmResult } from '../contracts/warm.ts';
import type { ensureImageWorkflow, warmImageWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';

/** What a warm looks like to a client. */
export type WarmView =
  | { workflowId: string; state: 'Running' }
  | { workflowId: string; state: 'Done'; result: WarmResult }
  | { workflowId: string; state: 'Failed'; error: string };

/** The API's view of warm-image workflows. */
export interface ImageWarmer {
  /** Starts the warm, or joins the one running for (entry, key). */
  start(entry: string, key: string, taskQueue: string): Promise<{ workflowId: string; runId: string }>;
  /** The warm's state, waiting up to `waitMs` for its end; undefined when there is none. */
  view(entry: string, key: string, waitMs: number): Promise<WarmView | undefined>;
}

export function temporalWarmer(client: Client, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS): ImageWarmer {
  return {
    async start(entry, key, taskQueue) {
      const workflowId = warmWorkflowId(entry, key);
      const h = await withDeadline(client, 'the warm start', callTimeoutMs, () =>
        client.workflow.start<typeof warmImageWorkflow>(WARM_WORKFLOW_TYPE, {
          workflowId,
          taskQueue,
          args: [{ entry, key }],
          workflowIdConflictPolicy: 'USE_EXISTING',
          workflowIdReusePolicy: 'ALLOW_DUPLICATE',
          staticSummary: `warm image ${key} on every host of ${entry}`,
        }),
      );
      return { workflowId, runId: h.firstExecutionRunId };
    },
    async view(entry, key, waitMs) {
      const workflowId = warmWorkflowId(entry, key);
      const h = client.workflow.getHandle<typeof warmImageWorkflow>(workflowId);
      const describe = () => withDeadline(client, 'describe', callTimeoutMs, () => h.describe());
      try {
        await describe();
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      }
      try {
        const result = await withDeadline(client, 'the warm result', Math.max(1, waitMs), () => h.result());
        return { workflowId, state: 'Done', result };
      } catch (err) {
        if (err instanceof WorkflowFailedError) {
          const inner = err.cause?.cause instanceof Error ? err.cause.cause.message : undefined;
          return { workflowId, state: 'Failed', error: inner ?? err.cause?.message ?? err.message };
        }
        if ((await describe()).status.name === 'RUNNING') return { workflowId, state: 'Running' };
        throw err;
      }
    },
  };
}

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
