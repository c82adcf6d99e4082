// Ensure image: one workflow per (host, provider entry, image key), ID `image/<host>/<entry>/<key>`.
// Proxy workflows join it with signal-with-start (activity `joinImage`), so there is one download
// and one upload per base across every worker. When the base is ready (or failed) each waiter is
// signalled; when every waiter has left (deleted, cancelled) the upload is aborted.
import {
  CancellationScope,
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import { CODES } from '../contracts/errors.ts';
import type { ImageResult, ImageWorkflowInput } from '../contracts/image.ts';
import { imageJoinSignal, imageLeaveSignal, imageReadySignal, imageStatusQuery } from '../contracts/messages.ts';
import { UPLOAD_ACTIVITY } from './activity-options.ts';
import { failureInfo } from './failures.ts';

/** Bound on one fetch-and-upload attempt when the input names none: 1 hour and 10 minutes. */
const DEFAULT_ATTEMPT_MS = 70 * 60_000;

export async function ensureImageWorkflow(input: ImageWorkflowInput): Promise<ImageResult> {
  const { ensureBaseImage } = proxyActivities<Activities>({
    ...UPLOAD_ACTIVITY,
    startToCloseTimeout: input.attemptTimeoutMs ?? DEFAULT_ATTEMPT_MS,
  });
  const waiters = new Set<string>();
  const notified = new Set<string>();
  let joined = false;
  let result: ImageResult | undefined;
  setHandler(imageJoinSignal, ({ waiter }) => {
    waiters.add(waiter);
    joined = true;
  });
  setHandler(imageLeaveSignal, ({ waiter }) => {
    waiters.delete(waiter);
  });
  setHandler(imageStatusQuery, () => ({ waiters: [...waiters], result }));

  const scope = new CancellationScope();
  const work = scope
    .run(() => ensureBaseImage({ ...input, workflowId: workflowInfo().workflowId }))
    .then(
      (base): ImageResult => ({ ok: true, base }),
      (err: unknown): ImageResult => failed(err),
    );
  const abandoned = condition(() => joined && waiters.size === 0);
  const first = await Promise.race([work, abandoned.then(() => undefined)]);
  if (first === undefined) {
    scope.cancel(); // every waiter left: abort the upload (the activity sees it on its next heartbeat)
    result = await work;
  } else {
    result = first;
  }

  // Tell every waiter, including those that joined while the last ones were being told.
  for (;;) {
    const pending = [...waiters].filter((w) => !notified.has(w));
    if (pending.length === 0) break;
    // All at once: one workflow task sends every signal (one at a time, a burst of N waiters
    // would wait N task round trips for the last one).
    for (const w of pending) notified.add(w);
    await Promise.all(
      pending.map(
        (w) =>
          getExternalWorkflowHandle(w)
            .signal(imageReadySignal, { ...result, workflowId: workflowInfo().workflowId })
            .catch(() => undefined), // the waiter is gone: nothing to tell
      ),
    );
  }
  await condition(allHandlersFinished);
  return result;
}

function failed(err: unknown): ImageResult {
  if (isCancellation(err))
    return { ok: false, kind: 'Transient', code: CODES.imageAbandoned, message: 'every waiter left' };
  return { ok: false, ...failureInfo(err) };
}
