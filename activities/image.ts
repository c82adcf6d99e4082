// Activities of the ensure-image workflow: joining it (start or signal, across workers), and the
// fetch and upload itself, which heartbeats bytes and rate so a dead worker is noticed and the
// retry (on any worker) starts over, replacing the half-written base as debris; it tells the
// workflow and its waiters of progress, and every waiter of the ready base at once.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ensureImage, findImage } from '../lib/kvm2/index.ts';
import type { EnsuredImage, ImageProgress } from '../lib/kvm2/index.ts';
import type { EnsuredBase, EnsuredBaseTold, ImageProgressSignal, ImageWorkflowInput } from '../contracts/image.ts';
import { imageAttemptTimeoutMs } from '../contracts/limits.ts';
import { joinImage, tellImageProgress, tellImageReady } from '../client/images.ts';
import { imageOf } from '../lib/config/index.ts';
import { mapped } from './errors.ts';
import type { HostRegistry } from './hosts.ts';
import type { WorkerMetrics } from './metrics.ts';

/**
 * How often the ensure-image workflow and its waiters are told of upload progress, in ms: under
 * the 5 s their current details may lag, with a second left for the signal's delivery.
 */
export const PROGRESS_SIGNAL_INTERVAL_MS = 4_000;
/** Heartbeats (and the progress cadence's clock) beat this often, progress or not. */
const HEARTBEAT_BEAT_MS = 1_000;

/**
 * When upload progress is worth a signal: the newest sample, sent at most every
 * {@link PROGRESS_SIGNAL_INTERVAL_MS} and at least that often while samples arrive (a clock tick
 * sends what a quiet spell held back), one send at a time, and the last byte at once.
 */
export class ProgressCadence {
  last: ImageProgress | undefined;
  #lastAt = 0;
  #sentAt = Number.NEGATIVE_INFINITY;
  #sentBytes = -1;
  #inFlight = false;
  readonly #workflowId: string;
  readonly #send: (p: ImageProgressSignal) => Promise<void>;

  constructor(workflowId: string, send: (p: ImageProgressSignal) => Promise<void>) {
    this.#workflowId = workflowId;
    this.#send = send;
  }

  /** A progress sample taken at `nowMs`. */
  sample(p: ImageProgress, nowMs: number): void {
    this.last = p;
    this.#lastAt = nowMs;
    if (p.bytes === p.totalBytes) this.#flush(nowMs);
    else this.tick(nowMs);
  }

  /** The clock: sends the newest sample when the interval has passed since the last send. */
  tick(nowMs: number): void {
    if (nowMs - this.#sentAt >= PROGRESS_SIGNAL_INTERVAL_MS) this.#flush(nowMs);
  }

  #flush(nowMs: number): void {
    const p = this.last;
    if (p === undefined || this.#inFlight || p.bytes === this.#sentBytes) return;
    this.#inFlight = true;
    this.#sentAt = nowMs;
    this.#sentBytes = p.bytes;
    void this.#send({
      workflowId: this.#workflowId,
      bytes: p.bytes,
      totalBytes: p.totalBytes,
      bytesPerSecond: Math.round(p.bytesPerSecond),
      at: new Date(this.#lastAt).toISOString(),
    }).finally(() => {
      this.#inFlight = false;
    });
  }
}

export function createImageActivities(
  registry: HostRegistry,
  client: Client,
  taskQueue: string,
  metrics?: WorkerMetrics,
) {
  return {
    /**
     * The hosts of `entry` a warm covers, and the bound of one fetch-and-upload attempt there;
     * `PROXY_SPEC_INVALID` naming the field for an unknown entry or image key.
     */
    async imageHosts(input: { entry: string; key: string }): Promise<{ hosts: string[]; attemptTimeoutMs: number }> {
      return mapped(() => {
        const entry = registry.entry(input.entry);
        imageOf(entry, input.key, 'key');
        return {
          hosts: entry.hosts.map((h) => h.name),
          attemptTimeoutMs: imageAttemptTimeoutMs(entry.timeouts.downloadTotalMs),
        };
      });
    },

    /**
     * Starts the ensure-image workflow with a fixed ID, or joins the one running (signal-with-start),
     * registering `waiter` to be told when the base is ready; then looks in the host's pool and
     * returns the base when it is there verified (else null), so the waiter need not wait for a
     * signal. Why the look comes after the join: the base is published before its waiters are
     * read for the broadcast, so a join is either on the broadcast's list, or came after the base
     * was published and finds it here (also when it started a new run of a finished image
     * workflow), or came before, during one of the image workflow's tasks, and is told by the
     * workflow's own signal, which under load comes seconds after the upload.
     */
    async joinImage(input: {
      workflowId: string;
      image: ImageWorkflowInput;
      waiter: string;
    }): Promise<EnsuredBase | null> {
      const ctx = Context.current();
      return mapped(async () => {
        await joinImage(client, { ...input, taskQueue });
        return verifiedBaseIn(registry, input.image, ctx);
      });
    },

    /**
     * The base when the host's pool already holds it verified, else null (absent, debris, or being
     * fetched): a few short calls, no download. Proxies ask this first and join the ensure-image
     * workflow only on a miss, so a warm base costs no workflow round trips.
     */
    async findBaseImage(input: ImageWorkflowInput): Promise<EnsuredBase | null> {
      const ctx = Context.current();
      return mapped(() => verifiedBaseIn(registry, input, ctx));
    },

    /**
     * Ensures the base on the host: cached, or fetched, verified and published. Heartbeats every
     * {@link HEARTBEAT_BEAT_MS}; tells the ensure-image workflow and its waiters of progress every
     * {@link PROGRESS_SIGNAL_INTERVAL_MS} while bytes flow; once the base is published, tells every
     * waiter at once (see tellImageReady) and returns the ones it told.
     */
    async ensureBaseImage(input: ImageWorkflowInput & { workflowId: string }): Promise<EnsuredBaseTold> {
      const ctx = Context.current();
      const progress = new ProgressCadence(input.workflowId, (signal) =>
        tellImageProgress(client, input.workflowId, signal).catch((err: unknown) => {
          ctx.log.debug('progress signal failed', { err: String(err) });
        }),
      );
      const beat = setInterval(() => {
        ctx.heartbeat(progress.last);
        progress.tick(Date.now());
      }, HEARTBEAT_BEAT_MS);
      try {
        const base = await mapped(async () => {
          const ensured = await ensureImage({
            ...imageSpec(registry, input),
            onProgress: (p) => {
              metrics?.uploadBytes.inc(
                { host: `${input.entry}/${input.host}` },
                Math.max(0, p.bytes - (progress.last?.bytes ?? 0)),
              );
              progress.sample(p, Date.now());
              ctx.heartbeat(p);
            },
            signal: ctx.cancellationSignal,
            logger: activityLogger(ctx),
          });
          return baseOf(ensured);
        });
        const toldWaiters = await tellImageReady(client, input.workflowId, {
          ok: true,
          base,
          workflowId: input.workflowId,
        }).catch((err: unknown): string[] => {
          ctx.log.debug('ready broadcast failed; the workflow tells its waiters', { err: String(err) });
          return [];
        });
        return { ...base, toldWaiters };
      } finally {
        clearInterval(beat);
      }
    },
  };
}

/** The base of `input` when the host's pool holds it verified, else null: a few short calls, no download. */
async function verifiedBaseIn(
  registry: HostRegistry,
  input: ImageWorkflowInput,
  ctx: Context,
): Promise<EnsuredBase | null> {
  const found = await findImage({
    ...imageSpec(registry, input),
    signal: ctx.cancellationSignal,
    logger: activityLogger(ctx),
  });
  return found === undefined ? null : baseOf(found);
}

/** The ensure/find input of one (entry, host, key) from the providers file. */
function imageSpec(registry: HostRegistry, input: ImageWorkflowInput) {
  const { entry, links } = registry.host(input.entry, input.host);
  const image = imageOf(entry, input.key, 'key');
  const t = entry.timeouts;
  return {
    entry: entry.name,
    pool: entry.storagePool,
    image: { key: input.key, url: image.url, sha256: image.sha256, format: image.format },
    links,
    timeouts: {
      rpcMs: t.rpcMs,
      downloadHeadersMs: t.downloadHeadersMs,
      downloadBodyIdleMs: t.downloadBodyIdleMs,
      downloadTotalMs: t.downloadTotalMs,
    },
  };
}

/** The provider's logger hooks, into the activity's log (JSON lines with the activity's context). */
function activityLogger(ctx: Context): { info(o: object, m: string): void; warn(o: object, m: string): void } {
  return {
    info: (o, m) => {
      ctx.log.info(m, { ...o });
    },
    warn: (o, m) => {
      ctx.log.warn(m, { ...o });
    },
  };
}

function baseOf(e: EnsuredImage): EnsuredBase {
  return {
    volumeName: e.volumeName,
    path: e.path,
    format: e.format,
    sizeBytes: e.sizeBytes,
    sha256: e.sha256,
    cached: e.cached,
  };
}
