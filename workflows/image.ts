// Ensure image: one workflow per (host, provider entry, image key), ID `image/<host>/<entry>/<key>`.
// Proxy workflows join it with signal-with-start (activity `joinImage`), so there is one download
// and one upload per base across every worker. When the base is ready (or failed) each waiter is
// told: the upload activity broadcasts the ready base to every waiter it knows of at once, and the
// workflow signals only those the activity did not reach; when every waiter has left (deleted,
// cancelled) the upload is aborted. Upload progress arrives as `imageProgress` signals and is
// shown in the current details.
import {
  CancellationScope,
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import { CODES } from '../contracts/errors.ts';
import type { EnsuredBaseTold, ImageProgressSignal, ImageResult, ImageWorkflowInput } from '../contracts/image.ts';
import {
  imageJoinSignal,
  imageLeaveSignal,
  imageProgressSignal,
  imageReadySignal,
  imageStatusQuery,
} from '../contracts/messages.ts';
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
  let progress: ImageProgressSignal | undefined;
  const details = (): void => setCurrentDetails(detailsLine(input, waiters.size, progress, result));
  setHandler(imageJoinSignal, ({ waiter }) => {
    waiters.add(waiter);
    joined = true;
    details();
  });
  setHandler(imageLeaveSignal, ({ waiter }) => {
    waiters.delete(waiter);
    details();
  });
  // From the uploading activity every few seconds: what the Web UI shows (current details) and
  // the status query say; no command, so no history beyond the signal itself.
  setHandler(imageProgressSignal, (p) => {
    progress = p;
    details();
  });
  setHandler(imageStatusQuery, () => ({ waiters: [...waiters], progress, result }));
  details();

  const scope = new CancellationScope();
  const work = scope
    .run(() => ensureBaseImage({ ...input, workflowId: workflowInfo().workflowId }))
    .then(
      ({ toldWaiters, ...base }: EnsuredBaseTold): ImageResult => {
        // The activity told these already (tellImageReady): the loop below skips them.
        for (const w of toldWaiters ?? []) notified.add(w);
        return { ok: true, base };
      },
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
  details();

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

/** The one line the Web UI shows for the run: waiters, upload progress (with its time) or outcome. */
function detailsLine(
  input: ImageWorkflowInput,
  waiters: number,
  p: ImageProgressSignal | undefined,
  r: ImageResult | undefined,
): string {
  const head = `base ${input.key} of ${input.entry} on ${input.host}, ${waiters} waiting`;
  if (r !== undefined)
    return r.ok ? `${head}: ready (${r.base.volumeName})` : `${head}: failed ${r.code}: ${r.message}`;
  if (p === undefined) return `${head}: fetching`;
  const pct = p.totalBytes > 0 ? ` (${Math.floor((100 * p.bytes) / p.totalBytes)} %)` : '';
  const mib = (b: number): string => (b / 1048576).toFixed(1);
  return `${head}: uploaded ${mib(p.bytes)} of ${mib(p.totalBytes)} MiB${pct} at ${mib(p.bytesPerSecond)} MiB/s, as of ${p.at ?? 'unknown'}`;
}

function failed(err: unknown): ImageResult {
  if (isCancellation(err))
    return { ok: false, kind: 'Transient', code: CODES.imageAbandoned, message: 'every waiter left' };
  return { ok: false, ...failureInfo(err) };
}
