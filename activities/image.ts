// Activities of the ensure-image workflow: joining it (start or signal, across workers), and the
// fetch and upload itself, which heartbeats bytes and rate so a dead worker is noticed and the
// retry (on any worker) starts over, replacing the half-written base as debris.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ensureImage, findImage } from '../lib/kvm2/index.ts';
import type { EnsuredImage, ImageProgress } from '../lib/kvm2/index.ts';
import type { EnsuredBase, ImageProgressSignal, ImageWorkflowInput } from '../contracts/image.ts';
import { imageAttemptTimeoutMs } from '../contracts/limits.ts';
import { joinImage, tellImageWaiters } from '../client/images.ts';
import { imageOf } from '../lib/config/index.ts';
import { mapped } from './errors.ts';
import type { HostRegistry } from './hosts.ts';
import type { WorkerMetrics } from './metrics.ts';

/** How often waiters are told of upload progress, in ms. */
export const PROGRESS_SIGNAL_INTERVAL_MS = 5_000;
/** Heartbeats also go out on this beat when no progress arrives (lookups, verification). */
const HEARTBEAT_BEAT_MS = 2_000;

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
     * registering `waiter` to be told when the base is ready.
     */
    async joinImage(input: { workflowId: string; image: ImageWorkflowInput; waiter: string }): Promise<void> {
      return mapped(async () => {
        await joinImage(client, { ...input, taskQueue });
      });
    },

    /**
     * The base when the host's pool already holds it verified, else null (absent, debris, or being
     * fetched): a few short calls, no download. Proxies ask this first and join the ensure-image
     * workflow only on a miss, so a warm base costs no workflow round trips.
     */
    async findBaseImage(input: ImageWorkflowInput): Promise<EnsuredBase | null> {
      const ctx = Context.current();
      return mapped(async () => {
        const found = await findImage({
          ...imageSpec(registry, input),
          signal: ctx.cancellationSignal,
          logger: activityLogger(ctx),
        });
        return found === undefined ? null : baseOf(found);
      });
    },

    /** Ensures the base on the host: cached, or fetched, verified and published. Heartbeats progress. */
    async ensureBaseImage(input: ImageWorkflowInput & { workflowId: string }): Promise<EnsuredBase> {
      const ctx = Context.current();
      let last: ImageProgress | undefined;
      let lastSignalled = 0;
      const beat = setInterval(() => ctx.heartbeat(last), HEARTBEAT_BEAT_MS);
      const tellWaiters = async (p: ImageProgress): Promise<void> => {
        const signal: ImageProgressSignal = {
          workflowId: input.workflowId,
          bytes: p.bytes,
          totalBytes: p.totalBytes,
          bytesPerSecond: Math.round(p.bytesPerSecond),
        };
        await tellImageWaiters(client, input.workflowId, signal);
      };
      try {
        return await mapped(async () => {
          const ensured = await ensureImage({
            ...imageSpec(registry, input),
            onProgress: (p) => {
              metrics?.uploadBytes.inc(
                { host: `${input.entry}/${input.host}` },
                Math.max(0, p.bytes - (last?.bytes ?? 0)),
              );
              last = p;
              ctx.heartbeat(p);
              const now = Date.now();
              if (now - lastSignalled >= PROGRESS_SIGNAL_INTERVAL_MS || p.bytes === p.totalBytes) {
                lastSignalled = now;
                tellWaiters(p).catch((err: unknown) => {
                  ctx.log.debug('progress signal failed', { err: String(err) });
                });
              }
            },
            signal: ctx.cancellationSignal,
            logger: activityLogger(ctx),
          });
          return baseOf(ensured);
        });
      } finally {
        clearInterval(beat);
      }
    },
  };
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
