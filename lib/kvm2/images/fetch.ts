/**
 * One ensure of a base image, after deduplication: the hit check against the marker, the removal
 * of debris, and the fetch (HTTP source → capacity check → raw base volume → upload on a
 * dedicated link → digest, format and size checks → marker). On any failure of the fetch the
 * download is destroyed, the upload aborted, the link closed and the half-written base deleted.
 */
import { Readable } from 'node:stream';
import { ProjectError } from '../../errors.ts';
import { LibvirtUploadSourceError } from '../../libvirt/errors.ts';
import type { StoragePool, StorageVol } from '../../libvirt/protocol.ts';
import type { Link } from '../../hostlink/pool.ts';
import { openHttpDownload } from './http-download.ts';
import type { HttpDownload } from './http-download.ts';
import {
  ImageAbortedError,
  ImageCorruptError,
  ImageDigestMismatchError,
  ImageFormatError,
  ImageVerifyError,
  InsufficientCapacity,
} from '../errors.ts';
import { lookupVol, rpcOn } from '../rpc.ts';
import type { Ctx, EnsuredImage, ImageMarker, ImageProgress, Plan } from './types.ts';
import {
  checkAgainstMarker,
  createVol,
  deleteQuietly,
  deleteVol,
  MARKER_MAX_BYTES,
  readMarker,
  refreshQuietly,
} from './volumes.ts';

/** Interval between progress reports, in ms. */
export const PROGRESS_INTERVAL_MS = 500;
/** Extra source-idle bound of the upload over the HTTP body idle bound, in ms: undici's fires first. */
const SOURCE_IDLE_SLACK_MS = 5_000;
const QCOW2_MAGIC = Buffer.from([0x51, 0x46, 0x49, 0xfb]); // "QFI\xfb"

/**
 * Ensures one base image under `signal` (the shared fetch's): a hit when the marker matches and
 * the base has the recorded capacity; a refusal when the marker records another image; otherwise
 * debris removal and a fetch. `emit` receives progress; `what` labels errors.
 */
/** What the pool holds for a plan: the base, its marker and the marker's record. */
interface Found {
  pool: StoragePool;
  base: StorageVol | undefined;
  marker: StorageVol | undefined;
  record: ImageMarker | string | undefined;
}

async function look(ctx: Ctx): Promise<Found> {
  const { plan } = ctx;
  const pool = await ctx.rpc((c, o) => c.storagePoolLookupByName(plan.pool, o));
  const [base, marker] = await Promise.all([
    lookupVol(ctx.rpc, pool, plan.volumeName),
    lookupVol(ctx.rpc, pool, plan.markerName),
  ]);
  const record = marker === undefined ? undefined : await readMarker(ctx, marker);
  return { pool, base, marker, record };
}

/** The verified base when the pool has it (a hit), else undefined; checks the marker against the plan. */
async function verifiedHit(ctx: Ctx, found: Found): Promise<EnsuredImage | undefined> {
  const { base, record } = found;
  if (record === undefined || typeof record === 'string') return undefined;
  checkAgainstMarker(ctx.plan, record);
  return base === undefined ? undefined : hit(ctx, base, record);
}

function contextOf(plan: Plan, signal: AbortSignal, emit: (p: ImageProgress) => void, what: string): Ctx {
  const { links, timeouts } = plan;
  return {
    plan,
    signal,
    what,
    emit,
    rpc: rpcOn(links, { rpcTimeoutMs: timeouts.rpcMs, signal }),
    cleanupRpc: rpcOn(links, { rpcTimeoutMs: timeouts.rpcMs }),
  };
}

export async function runEnsure(
  plan: Plan,
  signal: AbortSignal,
  emit: (p: ImageProgress) => void,
  what: string,
): Promise<EnsuredImage> {
  const ctx = contextOf(plan, signal, emit, what);
  try {
    const found = await look(ctx);
    const cached = await verifiedHit(ctx, found);
    if (cached !== undefined) return cached;
    const { base, marker, record } = found;
    // Debris of an interrupted fetch: no marker, an unreadable one, or a marker without its base.
    if (marker !== undefined || base !== undefined) {
      plan.logger?.warn(
        {
          volume: plan.volumeName,
          base: base !== undefined,
          marker: marker !== undefined,
          why: debrisReason(record, base),
        },
        'replacing the debris of an interrupted image fetch',
      );
      if (marker !== undefined) await deleteVol(marker, ctx.rpc);
      if (base !== undefined) await deleteVol(base, ctx.rpc);
    }
    return await fetchBase(ctx, found.pool);
  } catch (err) {
    if (signal.aborted && !(err instanceof ProjectError && err.kind === 'Permanent')) {
      throw signal.reason instanceof Error ? signal.reason : new ImageAbortedError(`${what}: aborted`, { cause: err });
    }
    throw err;
  }
}

/**
 * The verified base when the pool already has it, else undefined (absent, or debris an ensure
 * would replace); never fetches, deletes or writes. A marker that names another URL or digest is
 * refused as `ensureImage` refuses it.
 */
export async function runLookup(
  plan: Plan,
  signal: AbortSignal | undefined,
  what: string,
): Promise<EnsuredImage | undefined> {
  const ctx = contextOf(plan, signal ?? new AbortController().signal, () => undefined, what);
  return verifiedHit(ctx, await look(ctx));
}

function debrisReason(record: ImageMarker | string | undefined, base: StorageVol | undefined): string {
  if (record === undefined) return 'no marker';
  if (typeof record === 'string') return record;
  return base === undefined ? 'the marker has no base' : 'unknown';
}

async function hit(ctx: Ctx, base: StorageVol, m: ImageMarker): Promise<EnsuredImage> {
  const { plan } = ctx;
  const info = await ctx.rpc((c, o) => c.storageVolGetInfo(base, o));
  if (info.capacity !== BigInt(m.capacityBytes)) {
    throw new ImageCorruptError(
      `base image ${plan.volumeName}: libvirt reports a capacity of ${info.capacity} bytes, its marker recorded ${m.capacityBytes}; ` +
        'the volume was changed outside the provider. Nothing was deleted: if no overlay uses it, delete ' +
        `${plan.volumeName} and ${plan.markerName} to fetch it again, or use a new image key`,
    );
  }
  const path = await ctx.rpc((c, o) => c.storageVolGetPath(base, o));
  plan.logger?.info({ volume: plan.volumeName, sha256: m.sha256 }, 'base image cached');
  return {
    volumeName: plan.volumeName,
    path,
    format: plan.format,
    sizeBytes: m.sizeBytes,
    sha256: m.sha256,
    url: m.url,
    cached: true,
  };
}

async function fetchBase(ctx: Ctx, pool: StoragePool): Promise<EnsuredImage> {
  const { plan } = ctx;
  const { timeouts } = plan;
  const dl = await openHttpDownload(plan.url, {
    connectTimeoutMs: timeouts.downloadHeadersMs,
    headersTimeoutMs: timeouts.downloadHeadersMs,
    bodyIdleTimeoutMs: timeouts.downloadBodyIdleMs,
    totalTimeoutMs: timeouts.downloadTotalMs,
    signal: ctx.signal,
  });
  let base: StorageVol | undefined;
  let marker: StorageVol | undefined;
  let link: Link | undefined;
  let done = false;
  try {
    await refreshQuietly(ctx, pool);
    const poolInfo = await ctx.rpc((c, o) => c.storagePoolGetInfo(pool, o));
    const needed = BigInt(dl.contentLengthBytes) + BigInt(MARKER_MAX_BYTES);
    if (poolInfo.available < needed) {
      throw new InsufficientCapacity(plan.pool, Number(needed), Number(poolInfo.available));
    }
    plan.logger?.info({ volume: plan.volumeName, url: plan.url, bytes: dl.contentLengthBytes }, 'fetching base image');
    // Raw with capacity = Content-Length: an exact container for the file's bytes, whatever their
    // format (a qcow2 file is stored as is; libvirt probes it as qcow2 afterwards).
    base = await createVol(ctx, pool, plan.volumeName, dl.contentLengthBytes);
    link = await plan.links.dedicated('bulk', dl.signal);
    await upload(ctx, link, base, dl);
    await refreshQuietly(ctx, pool);
    const sha256 = dl.sha256;
    if (plan.sha256 !== undefined && sha256 !== plan.sha256) {
      throw new ImageDigestMismatchError(plan.url, plan.sha256, sha256);
    }
    const capacityBytes = await verifyBase(ctx, base, dl);
    const record: ImageMarker = {
      v: 1,
      entry: plan.entry,
      key: plan.key,
      url: plan.url,
      sha256,
      sizeBytes: dl.contentLengthBytes,
      capacityBytes,
      format: plan.format,
      verifiedAt: new Date().toISOString(),
    };
    const json = Buffer.from(JSON.stringify(record), 'utf8');
    const markerVol = await createVol(ctx, pool, plan.markerName, json.length);
    marker = markerVol;
    await ctx.rpc((c, o) =>
      c.storageVolUpload(markerVol, Readable.from([json]), { ...o, length: BigInt(json.length) }),
    );
    const baseVol = base;
    const path = await ctx.rpc((c, o) => c.storageVolGetPath(baseVol, o));
    done = true;
    plan.logger?.info(
      { volume: plan.volumeName, sha256, bytes: dl.contentLengthBytes },
      'base image fetched and verified',
    );
    return {
      volumeName: plan.volumeName,
      path,
      format: plan.format,
      sizeBytes: dl.contentLengthBytes,
      sha256,
      url: plan.url,
      cached: false,
    };
  } finally {
    await dl.close();
    if (link !== undefined) await link.close();
    if (!done) {
      // Never leave a half-written base, or a marker for a base that is going away.
      if (marker !== undefined) await deleteQuietly(ctx, marker);
      if (base !== undefined) await deleteQuietly(ctx, base);
    }
  }
}

/** Streams the download into `base` on the dedicated link, reporting progress. */
async function upload(ctx: Ctx, link: Link, base: StorageVol, dl: HttpDownload): Promise<void> {
  const { timeouts } = ctx.plan;
  const total = dl.contentLengthBytes;
  const started = Date.now();
  let last = 0;
  const report = (bytes: number): void => {
    const elapsedMs = Math.max(1, Date.now() - started);
    ctx.emit({ phase: 'download', bytes, totalBytes: total, bytesPerSecond: Math.round((bytes * 1000) / elapsedMs) });
  };
  try {
    const result = await link.client.storageVolUpload(base, dl.body, {
      timeoutMs: timeouts.rpcMs,
      signal: dl.signal,
      length: BigInt(total),
      sourceIdleTimeoutMs: timeouts.downloadBodyIdleMs + SOURCE_IDLE_SLACK_MS,
      onProgress: ({ bytes }) => {
        const now = Date.now();
        if (now - last >= PROGRESS_INTERVAL_MS) {
          last = now;
          report(bytes);
        }
      },
    });
    report(result.bytes);
  } catch (err) {
    // The deadline or the caller's abort, whichever side noticed it first; else the source's own
    // error (HTTP failure, stall, truncation) rather than its libvirt wrapper.
    const aborted = dl.abortReason();
    if (aborted) throw aborted;
    if (err instanceof LibvirtUploadSourceError && err.cause instanceof ProjectError) throw err.cause;
    throw err;
  }
  if (!dl.complete) {
    throw new ImageVerifyError(`${ctx.what}: the upload ended before the download was complete`);
  }
}

/** Checks the uploaded base against its format; returns the capacity libvirt reports for it. */
async function verifyBase(ctx: Ctx, base: StorageVol, dl: HttpDownload): Promise<number> {
  const { plan } = ctx;
  const info = await ctx.rpc((c, o) => c.storageVolGetInfo(base, o));
  if (plan.format === 'qcow2' && !dl.head.subarray(0, 4).equals(QCOW2_MAGIC)) {
    throw new ImageFormatError(
      `${plan.url}: the image is configured as qcow2 but does not start with the qcow2 magic (got ${dl.head.subarray(0, 4).toString('hex')}); fix its format or URL`,
    );
  }
  if (plan.format === 'raw' && info.capacity !== BigInt(dl.contentLengthBytes)) {
    throw new ImageFormatError(
      `${plan.url}: the image is configured as raw (${dl.contentLengthBytes} bytes) but libvirt reads a capacity of ${info.capacity} bytes: the file is in another format; fix its format`,
    );
  }
  if (info.capacity <= 0n) {
    throw new ImageVerifyError(`${ctx.what}: libvirt reports no capacity for the uploaded base`);
  }
  return Number(info.capacity);
}
