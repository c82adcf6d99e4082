/**
 * Volume and marker operations of the base-image cache: deletes, pool refresh, raw volume
 * creation, and reading, parsing and checking marker records.
 * Every call is bounded by the ensure's budget (Ctx.rpc) or, for cleanup, by the budget alone.
 */
import { ErrorNumber } from '../../libvirt/constants.ts';
import { isNotFound, LibvirtError, unlessNotFound } from '../../libvirt/errors.ts';
import type { StoragePool, StorageVol } from '../../libvirt/protocol.ts';
import { ImageConflictError, ImageCorruptError, ImageVerifyError } from '../errors.ts';
import type { Rpc } from '../rpc.ts';
import { buildVolumeXml } from '../volume-xml.ts';
import type { Ctx, ImageMarker, Plan } from './types.ts';
import type { ImageFormat } from './base-names.ts';

/** Largest marker read, in bytes; a bigger marker volume is debris. */
export const MARKER_MAX_BYTES = 64 * 1024;
/** A sha256 in lowercase hex. */
export const SHA256_RE = /^[0-9a-f]{64}$/;

/** Refuses a configured image that differs from the marker's record (nothing is deleted). */
export function checkAgainstMarker(plan: Plan, m: ImageMarker): void {
  if (m.entry !== plan.entry || m.key !== plan.key) {
    throw new ImageConflictError(plan.volumeName, 'entry/key', `${plan.entry}/${plan.key}`, `${m.entry}/${m.key}`);
  }
  if (m.url !== plan.url) throw new ImageConflictError(plan.volumeName, 'url', plan.url, m.url);
  if (plan.sha256 !== undefined && m.sha256 !== plan.sha256) {
    throw new ImageConflictError(plan.volumeName, 'sha256', plan.sha256, m.sha256);
  }
}

/** The marker's record, or a string saying why it is unusable (debris); undefined if it vanished. */
export async function readMarker(ctx: Ctx, marker: StorageVol): Promise<ImageMarker | string | undefined> {
  try {
    const info = await ctx.rpc((c, o) => c.storageVolGetInfo(marker, o));
    if (info.capacity > BigInt(MARKER_MAX_BYTES)) return `the marker volume is ${info.capacity} bytes`;
    const bytes = await ctx.rpc((c, o) =>
      c.storageVolDownload(marker, { ...o, maxBytes: MARKER_MAX_BYTES, length: info.capacity }),
    );
    return parseMarker(bytes.toString('utf8'), ctx.plan.format, ctx.plan.volumeName);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * Parses marker content; returns the reason as a string when it is not a valid v1 marker (debris).
 * A marker of a newer version throws ImageCorruptError (Permanent): it is not ours to delete.
 */
export function parseMarker(text: string, format: ImageFormat, volumeName = 'this base'): ImageMarker | string {
  let m: unknown;
  try {
    m = JSON.parse(withoutTrailingPadding(text));
  } catch {
    return 'the marker is not JSON';
  }
  const r = m as Partial<Record<keyof ImageMarker, unknown>> | null;
  if (typeof r === 'object' && r !== null && typeof r.v === 'number' && r.v > 1) {
    // Written by a newer provider, whose overlays may use the base: never treat it as debris.
    throw new ImageCorruptError(
      `the marker of ${volumeName} has version ${r.v}, newer than this provider understands (1); nothing was deleted: upgrade the provider, or use a new image key`,
    );
  }
  const ok =
    typeof r === 'object' &&
    r !== null &&
    r.v === 1 &&
    typeof r.entry === 'string' &&
    typeof r.key === 'string' &&
    typeof r.url === 'string' &&
    typeof r.sha256 === 'string' &&
    SHA256_RE.test(r.sha256) &&
    Number.isSafeInteger(r.sizeBytes) &&
    (r.sizeBytes as number) > 0 &&
    Number.isSafeInteger(r.capacityBytes) &&
    (r.capacityBytes as number) > 0 &&
    r.format === format &&
    typeof r.verifiedAt === 'string';
  return ok ? (r as ImageMarker) : 'the marker is not a valid v1 marker';
}

/**
 * `text` without the NULs and white space that pad the end of a marker volume. A loop, not
 * `/[\0\s]+$/`: that regex is quadratic on a run of spaces followed by another character (64 KiB
 * of them took over a second), and the volume's content is the host's to write.
 */
export function withoutTrailingPadding(text: string): string {
  let end = text.length;
  while (end > 0 && TRAILING_PADDING_RE.test(text[end - 1]!)) end--;
  return text.slice(0, end);
}
const TRAILING_PADDING_RE = /[\0\s]/;

/** Deletes `vol` through `rpc`; a volume already gone counts as deleted. */
export async function deleteVol(vol: StorageVol, rpc: Rpc): Promise<void> {
  await rpc((c, o) => unlessNotFound(c.storageVolDelete(vol, 0, o)));
}

/** Deletes during cleanup: failures are logged, never thrown (the next ensure sees debris). */
export async function deleteQuietly(ctx: Ctx, vol: StorageVol): Promise<void> {
  try {
    await deleteVol(vol, ctx.cleanupRpc);
  } catch (err) {
    ctx.plan.logger?.warn(
      { volume: vol.name, err: (err as Error).message },
      'could not delete a volume of a failed image fetch; the next ensure deletes it',
    );
  }
}

/** Pool refresh that only warns: libvirt refuses it while the pool has asynchronous jobs. */
export async function refreshQuietly(ctx: Ctx, pool: StoragePool): Promise<void> {
  try {
    await ctx.rpc((c, o) => c.storagePoolRefresh(pool, o));
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    ctx.plan.logger?.warn({ pool: pool.name, err: (err as Error).message }, 'storage pool refresh failed');
  }
}

/**
 * Creates the raw volume `name`. An existing one is ImageVerifyError (Transient): the lookups
 * before found none, so another fetch created it meanwhile.
 */
export async function createVol(ctx: Ctx, pool: StoragePool, name: string, capacityBytes: number): Promise<StorageVol> {
  try {
    return await ctx.rpc((c, o) =>
      c.storageVolCreateXml(pool, buildVolumeXml({ name, capacityBytes, format: 'raw' }), 0, o),
    );
  } catch (err) {
    if (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.STORAGE_VOL_EXIST) {
      throw new ImageVerifyError(
        `${ctx.what}: volume ${name} appeared while this fetch was creating it (another fetch of the same image?)`,
        { cause: err },
      );
    }
    throw err;
  }
}
