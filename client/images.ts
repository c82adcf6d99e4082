// The ensure-image workflow's client calls: proxies and warms join it (signal-with-start), and its
// waiters hear of upload progress and of the ready base. Typed by the workflow function and the define* objects of
// contracts/messages.ts.
import type { Client } from '@temporalio/client';
import { IMAGE_JOIN_SIGNAL, IMAGE_LEAVE_SIGNAL, IMAGE_WORKFLOW_TYPE } from '../contracts/image.ts';
import type { ImageJoin, ImageProgressSignal, ImageResult, ImageWorkflowInput } from '../contracts/image.ts';
import { imageJoinSignal, imageProgressSignal, imageReadySignal, imageStatusQuery } from '../contracts/messages.ts';
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
 * Upload progress for the ensure-image workflow `imageWorkflowId` (its current details and status
 * query) and for each of its waiters (their `imageProgress` handler). A waiter that cannot be
 * signalled (it ended meanwhile) is skipped.
 */
export async function tellImageProgress(
  client: Client,
  imageWorkflowId: string,
  progress: ImageProgressSignal,
  callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<void> {
  await Promise.all([
    withDeadline(client, 'the progress signal', callTimeoutMs, () =>
      client.workflow.getHandle(imageWorkflowId).signal(imageProgressSignal, progress),
    ).catch(() => undefined), // the image workflow ended: its waiters may still be told
    signalWaiters(client, imageWorkflowId, callTimeoutMs, (w) =>
      client.workflow.getHandle(w).signal(imageProgressSignal, progress),
    ),
  ]);
}

/**
 * Tells every waiter of `imageWorkflowId` that the base is ready, all in parallel from this
 * process (one broadcast, rather than one signal command after another from the workflow, which
 * the server delivers about one a second under load). Returns the waiters that were told; the
 * workflow tells the rest (joined meanwhile, or not reached).
 */
export async function tellImageReady(
  client: Client,
  imageWorkflowId: string,
  result: ImageResult,
  callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<string[]> {
  return signalWaiters(client, imageWorkflowId, callTimeoutMs, (w) =>
    client.workflow.getHandle(w).signal(imageReadySignal, result),
  );
}

/**
 * The waiters of the running `imageWorkflowId`: its `join` signals less its `leave` signals, read
 * from its history, which the server answers without a worker (a saturated worker answers the
 * status query late: 10 s and more were seen with 100 proxies on 2 busy cores); the status query
 * when the history cannot be read. A signal that arrived during a workflow task shows once that task
 * completes: a waiter missed here is signalled by the workflow (not in `toldWaiters`), one that
 * just left may get a ready signal it no longer needs.
 */
export async function imageWaiters(client: Client, imageWorkflowId: string, callTimeoutMs: number): Promise<string[]> {
  const handle = client.workflow.getHandle(imageWorkflowId);
  try {
    const history = await withDeadline(client, 'the image history', callTimeoutMs, () => handle.fetchHistory());
    const waiters = new Set<string>();
    for (const e of history.events ?? []) {
      const a = e.workflowExecutionSignaledEventAttributes;
      if (a?.signalName !== IMAGE_JOIN_SIGNAL && a?.signalName !== IMAGE_LEAVE_SIGNAL) continue;
      const data = a.input?.payloads?.[0]?.data;
      const { waiter } = JSON.parse(Buffer.from(data ?? []).toString('utf8')) as Partial<ImageJoin>;
      if (typeof waiter !== 'string') throw new Error(`a ${a.signalName} signal without a waiter`);
      if (a.signalName === IMAGE_JOIN_SIGNAL) waiters.add(waiter);
      else waiters.delete(waiter);
    }
    return [...waiters];
  } catch {
    const status = await withDeadline(client, 'the image status query', callTimeoutMs, () =>
      handle.query(imageStatusQuery),
    );
    return status.waiters;
  }
}

/** The waiters of `imageWorkflowId`, each given `send` at once; those it reached. */
async function signalWaiters(
  client: Client,
  imageWorkflowId: string,
  callTimeoutMs: number,
  send: (waiter: string) => Promise<void>,
): Promise<string[]> {
  const waiters = await imageWaiters(client, imageWorkflowId, callTimeoutMs);
  const reached = await Promise.all(
    waiters.map((w) =>
      withDeadline(client, 'a signal to an image waiter', callTimeoutMs, () => send(w)).then(
        () => w,
        () => undefined, // ended meanwhile, or unreachable: the workflow's own signal covers it
      ),
    ),
  );
  return reached.filter((w): w is string => w !== undefined);
}
