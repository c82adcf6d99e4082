/**
 * The base-image cache of the kvm2 provider (H2, H4). A base is `base-<entry>-<key>.<format>` in
 * the host's storage pool; its marker `base-<entry>-<key>.<format>.marker` is a small raw volume
 * holding JSON that records entry, key, URL, sha256, sizes and format, written only after the
 * base was uploaded and verified. So a base without a valid marker is debris of an interrupted
 * fetch (never exposed to overlays) and is replaced, while a base with a marker is never deleted:
 * a changed URL or sha256 is refused (ImageConflictError), because overlays may use the old base.
 * Only the two volumes of this entry and key are ever looked up, deleted or written.
 *
 * Concurrent cold ensures of one (host, pool, volume) in this process share one fetch. Across
 * processes the workflow layer guarantees a single fetch: one ensure-image workflow per (host,
 * entry, key), started with a fixed workflow ID and a use-existing conflict policy.
 */
import { settled, waitBounded } from '../../wait.ts';
import { ImageAbortedError, ImageSpecError } from '../errors.ts';
import { runEnsure, runLookup } from './fetch.ts';
import type { EnsuredImage, EnsureImageInput, ImageProgress, Plan } from './types.ts';
import { SHA256_RE } from './volumes.ts';
import { checkDurationMs, isHttpUrl } from '../../rules.ts';
import { checkIdentifier } from '../identifier.ts';
import { baseVolumeName, markerVolumeName } from './base-names.ts';

export type { EnsuredImage, EnsureImageInput, ImageMarker, ImageProgress, ImageSpec, ImageTimeouts } from './types.ts';
export { PROGRESS_INTERVAL_MS } from './fetch.ts';
export { MARKER_MAX_BYTES, parseMarker } from './volumes.ts';

function planOf(input: EnsureImageInput): Plan {
  const { image } = input;
  checkIdentifier('entry', input.entry);
  if (!isHttpUrl(image.url)) {
    throw new ImageSpecError(
      `images.${image.key}.url`,
      `must be an http or https URL, got ${JSON.stringify(image.url)}`,
    );
  }
  let sha256: string | undefined;
  if (image.sha256 !== undefined) {
    sha256 = String(image.sha256).toLowerCase();
    if (!SHA256_RE.test(sha256)) {
      throw new ImageSpecError(
        `images.${image.key}.sha256`,
        `must be 64 hex digits, got ${JSON.stringify(image.sha256)}`,
      );
    }
  }
  for (const [field, ms] of Object.entries(input.timeouts)) checkDurationMs(`timeouts.${field}`, ms as number);
  return {
    entry: input.entry,
    key: image.key,
    url: image.url,
    sha256,
    format: image.format,
    volumeName: baseVolumeName(input.entry, image.key, image.format),
    markerName: markerVolumeName(input.entry, image.key, image.format),
    pool: input.pool,
    links: input.links,
    timeouts: input.timeouts,
    logger: input.logger,
  };
}

// --- in-process deduplication ---------------------------------------------------------------

/** A fetch (or hit check) in progress, shared by every caller that asks for the same image. */
interface Shared {
  plan: Plan;
  controller: AbortController;
  participants: number;
  progress: Set<(p: ImageProgress) => void>;
  promise: Promise<EnsuredImage>;
}

const inflight = new Map<string, Shared>();

function sameImage(a: Plan, b: Plan): boolean {
  return a.entry === b.entry && a.key === b.key && a.url === b.url && a.sha256 === b.sha256;
}

/**
 * Makes sure the base image `input.image` of `input.entry` is in the pool and verified, fetching
 * it when it is not; returns where it is. A hit makes no network request. See the module comment
 * for the rules; errors are project errors (see lib/kvm2/errors.ts for their kinds).
 */
export async function ensureImage(input: EnsureImageInput): Promise<EnsuredImage> {
  const plan = planOf(input);
  const id = `${input.links.target.name}\u0000${plan.pool}\u0000${plan.volumeName}`;
  const what = `${input.links.target.name}/${plan.pool}/${plan.volumeName}`;
  for (;;) {
    if (input.signal?.aborted === true) {
      throw new ImageAbortedError(`${what}: aborted by the caller`, { cause: input.signal.reason });
    }
    const existing = inflight.get(id);
    if (existing === undefined) break;
    // Same image: wait for the same result. Another image under the same name (a changed URL or
    // digest, or a colliding entry/key): let the running ensure finish, then check against it.
    if (sameImage(existing.plan, plan)) return join(existing, input, what);
    await waitBounded(settled(existing.promise), {
      signal: input.signal,
      onAbort: () => new ImageAbortedError(`${what}: aborted by the caller`, { cause: input.signal?.reason }),
    });
  }
  const shared: Shared = {
    plan,
    controller: new AbortController(),
    participants: 0,
    progress: new Set(),
    promise: undefined as unknown as Promise<EnsuredImage>,
  };
  const emit = (p: ImageProgress): void => {
    for (const fn of shared.progress) {
      try {
        fn(p);
      } catch {
        // a progress listener's failure is not the fetch's
      }
    }
  };
  shared.promise = runEnsure(plan, shared.controller.signal, emit, what);
  shared.promise.catch(() => {});
  inflight.set(id, shared);
  void shared.promise
    .finally(() => {
      if (inflight.get(id) === shared) inflight.delete(id);
    })
    .catch(() => {});
  return join(shared, input, what);
}

/**
 * The base image when the pool already has it verified (what `ensureImage` would return as a hit),
 * else undefined: absent, debris, or a fetch of it running in this process. Never fetches,
 * deletes or writes anything; a few short calls.
 */
export async function findImage(input: Omit<EnsureImageInput, 'onProgress'>): Promise<EnsuredImage | undefined> {
  const plan = planOf(input);
  const id = `${input.links.target.name}\u0000${plan.pool}\u0000${plan.volumeName}`;
  if (inflight.has(id)) return undefined;
  return runLookup(plan, input.signal, `${input.links.target.name}/${plan.pool}/${plan.volumeName}`);
}

/**
 * Waits for `shared` on behalf of one caller. A caller whose signal fires leaves at once while
 * others remain; the last one leaving aborts the fetch and returns after its cleanup.
 */
function join(shared: Shared, input: EnsureImageInput, what: string): Promise<EnsuredImage> {
  shared.participants++;
  const onProgress = input.onProgress;
  if (onProgress) shared.progress.add(onProgress);
  return new Promise<EnsuredImage>((resolve, reject) => {
    let left = false;
    const leave = (): void => {
      if (left) return;
      left = true;
      input.signal?.removeEventListener('abort', onAbort);
      if (onProgress) shared.progress.delete(onProgress);
      shared.participants--;
    };
    const onAbort = (): void => {
      leave();
      const err = new ImageAbortedError(`${what}: aborted by the caller`, { cause: input.signal?.reason });
      if (shared.participants > 0) return reject(err);
      // The last caller left: the fetch ends, and the caller hears of it once the cleanup (stream
      // abort, deletion of the half-written base) is done, which is bounded by the call budgets.
      shared.controller.abort(err);
      const fail = (): void => reject(err);
      shared.promise.then(fail, fail);
    };
    if (input.signal?.aborted === true) return onAbort();
    input.signal?.addEventListener('abort', onAbort, { once: true });
    shared.promise.then(
      (value) => {
        leave();
        resolve(value);
      },
      (err: unknown) => {
        leave();
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
