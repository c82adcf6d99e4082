/**
 * Provenance of a proxy's disk: a proxy boots only an overlay and a seed that are provably the
 * ones its own workflow made (docs/disks.md). Two proofs, both required:
 *
 * - the content chain: the overlay's qcow2 header (read from the volume's bytes, what QEMU will
 *   read) names the entry's verified base as its backing file, with its format, and no external
 *   data file; the seed is raw (no qcow2 header). The base is verified when its marker (H4,
 *   lib/kvm2/images/) records this entry.
 * - the record: the owner record volume `ep_<entry>_<name>.owner`, JSON naming the owner UID,
 *   entry, proxy name and the workflow's `createdAt`, written by the create only after it made the
 *   overlay and seed. A volume under the proxy's name without the record of this run is debris
 *   (planted, left by an earlier proxy of the same name, half-made by a crash before the record).
 *
 * Debris is deleted when no domain on the host uses it, and otherwise refused (Kvm2DiskNotOwnError,
 * Permanent); it is never booted. The record is also the GC's owner evidence for volumes left
 * without a domain.
 */
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import { isNotFound } from '../../libvirt/errors.ts';
import type { StoragePool, StorageVol } from '../../libvirt/protocol.ts';
import { Kvm2BaseUnverifiedError, Kvm2DiskNotOwnError } from '../errors.ts';
import { MARKER_MAX_BYTES, parseMarker, withoutTrailingPadding } from '../images/volumes.ts';
import type { ImageFormat } from '../images/base-names.ts';
import { lookupVol } from '../rpc.ts';
import type { Rpc } from '../rpc.ts';
import { buildVolumeXml } from '../volume-xml.ts';
import { findElement, parseXml } from '../xml.ts';
import type { XmlElement } from '../xml.ts';
import type { ProxyObjectNames } from './object-names.ts';

/** Largest owner record read, in bytes; a bigger one is debris. */
export const OWNER_RECORD_MAX_BYTES = 4096;
/** Bytes of an overlay read for its header (qemu keeps header, extensions and backing name in the first cluster). */
export const QCOW2_HEADER_READ_BYTES = 64 * 1024;

const QCOW2_MAGIC = 0x514649fb;
const EXT_END = 0;
const EXT_BACKING_FORMAT = 0xe2792aca;
const EXT_DATA_FILE = 0x44415441;
/** Incompatible feature bit 2: the guest data lives in an external file. */
const INCOMPAT_DATA_FILE = 4n;

/** What {@link parseQcow2Header} reads from an image's first bytes. */
export interface Qcow2Header {
  version: number;
  backingFile?: string;
  backingFormat?: string;
  /** The image keeps its data in another file (external data file). */
  externalData: boolean;
}

/** The qcow2 header of `buf` (the start of an image file), or why it is not one. Pure. */
export function parseQcow2Header(buf: Buffer): Qcow2Header | string {
  if (buf.length < 72 || buf.readUInt32BE(0) !== QCOW2_MAGIC) return 'it is not a qcow2 image';
  const version = buf.readUInt32BE(4);
  if (version !== 2 && version !== 3) return `it is a qcow2 image of unknown version ${version}`;
  const backingOffset = buf.readBigUInt64BE(8);
  const backingSize = buf.readUInt32BE(16);
  let backingFile: string | undefined;
  if (backingOffset !== 0n) {
    const end = backingOffset + BigInt(backingSize);
    if (backingSize === 0 || backingSize > 1023 || end > BigInt(buf.length))
      return 'its backing file name is unreadable';
    backingFile = buf.subarray(Number(backingOffset), Number(end)).toString('utf8');
  }
  let externalData = false;
  let backingFormat: string | undefined;
  let offset = 72;
  if (version === 3) {
    if (buf.length < 104) return 'its header is truncated';
    externalData = (buf.readBigUInt64BE(72) & INCOMPAT_DATA_FILE) !== 0n;
    offset = buf.readUInt32BE(100);
  }
  // Header extensions: type, length, data padded to 8 bytes; a bounded walk inside the buffer.
  for (let i = 0; i < 64 && offset + 8 <= buf.length; i++) {
    const type = buf.readUInt32BE(offset);
    const length = buf.readUInt32BE(offset + 4);
    if (type === EXT_END) break;
    if (offset + 8 + length > buf.length) return 'its header extensions are unreadable';
    const data = buf.subarray(offset + 8, offset + 8 + length);
    if (type === EXT_BACKING_FORMAT) backingFormat = data.toString('utf8');
    if (type === EXT_DATA_FILE) externalData = true;
    offset += 8 + Math.ceil(length / 8) * 8;
  }
  return { version, backingFile, backingFormat, externalData };
}

/** Why an overlay with this header is not one on `base`, or undefined when it is. Pure. */
export function overlayProblem(
  header: Qcow2Header | string,
  base: { path: string; format: ImageFormat },
): string | undefined {
  if (typeof header === 'string') return header;
  if (header.backingFile === undefined) return 'it has no backing file (a standalone image)';
  if (header.backingFile !== base.path) return `its backing file is ${header.backingFile}, not the base ${base.path}`;
  if (header.backingFormat !== base.format) {
    return `its backing format is ${header.backingFormat ?? 'unset (probed)'}, not ${base.format}`;
  }
  if (header.externalData) return 'it keeps its data in an external file';
  return undefined;
}

/** What the owner record volume holds (JSON). */
export interface OwnerRecord {
  v: 1;
  ownerUid: string;
  entry: string;
  name: string;
  /** The workflow's creation time (its `createdAt`), fixed for every attempt of one run. */
  createdAt: string;
  /** The base the overlay was made on. */
  basePath: string;
}

/** The record's fields, or why the text is not a v1 owner record. Pure. */
export function parseOwnerRecord(text: string): OwnerRecord | string {
  let r: unknown;
  try {
    r = JSON.parse(withoutTrailingPadding(text));
  } catch {
    return 'the owner record is not JSON';
  }
  const o = r as Partial<Record<keyof OwnerRecord, unknown>> | null;
  const ok =
    typeof o === 'object' &&
    o !== null &&
    o.v === 1 &&
    typeof o.ownerUid === 'string' &&
    typeof o.entry === 'string' &&
    typeof o.name === 'string' &&
    typeof o.createdAt === 'string' &&
    typeof o.basePath === 'string';
  return ok ? (o as OwnerRecord) : 'the owner record is not a valid v1 record';
}

/** The owner record in `vol`, a string saying why it is unusable, or undefined when it vanished. */
export async function readOwnerRecord(rpc: Rpc, vol: StorageVol): Promise<OwnerRecord | string | undefined> {
  try {
    const info = await rpc((c, o) => c.storageVolGetInfo(vol, o));
    if (info.capacity > BigInt(OWNER_RECORD_MAX_BYTES) || info.capacity === 0n) {
      return `the owner record volume is ${info.capacity} bytes`;
    }
    const bytes = await rpc((c, o) =>
      c.storageVolDownload(vol, { ...o, maxBytes: OWNER_RECORD_MAX_BYTES, length: info.capacity }),
    );
    return parseOwnerRecord(bytes.toString('utf8'));
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Creates the owner record volume and writes `record` into it. */
export async function writeOwnerRecord(rpc: Rpc, pool: StoragePool, name: string, record: OwnerRecord): Promise<void> {
  const bytes = Buffer.from(JSON.stringify(record), 'utf8');
  const vol = await rpc((c, o) =>
    c.storageVolCreateXml(pool, buildVolumeXml({ name, capacityBytes: bytes.length, format: 'raw' }), 0, o),
  );
  await rpc((c, o) => c.storageVolUpload(vol, Readable.from([bytes]), { ...o, finishTimeoutMs: o.timeoutMs }));
}

/** The first bytes of a volume (at most `bytes`, fewer when it is smaller). */
async function head(rpc: Rpc, vol: StorageVol, bytes: number): Promise<Buffer> {
  const info = await rpc((c, o) => c.storageVolGetInfo(vol, o));
  const length = info.capacity < BigInt(bytes) ? info.capacity : BigInt(bytes);
  if (length === 0n) return Buffer.alloc(0);
  return rpc((c, o) => c.storageVolDownload(vol, { ...o, maxBytes: bytes, length }));
}

/** Why `vol` is not an overlay on `base`, or undefined when it is. */
export async function checkOverlay(
  rpc: Rpc,
  vol: StorageVol,
  base: { path: string; format: ImageFormat },
): Promise<string | undefined> {
  return overlayProblem(parseQcow2Header(await head(rpc, vol, QCOW2_HEADER_READ_BYTES)), base);
}

/** Why `vol` is not a raw seed, or undefined when it is. */
export async function checkSeed(rpc: Rpc, vol: StorageVol): Promise<string | undefined> {
  const bytes = await head(rpc, vol, 8);
  return bytes.length >= 4 && bytes.readUInt32BE(0) === QCOW2_MAGIC ? 'it is a qcow2 image, not a raw seed' : undefined;
}

/**
 * Throws Kvm2BaseUnverifiedError unless `base.path` is a volume of `pool` named as a base of
 * `entry` whose marker is valid and records `entry` (written only after the base was verified).
 */
export async function verifyBase(
  rpc: Rpc,
  pool: StoragePool,
  entry: string,
  base: { path: string; format: ImageFormat },
): Promise<void> {
  const name = posix.basename(base.path);
  const refuse = (why: string): never => {
    throw new Kvm2BaseUnverifiedError(
      `the base ${base.path} is not a verified base of provider entry ${entry}: ${why}; nothing was created: ensure the image again (a new proxy does) and retry`,
    );
  };
  if (!name.startsWith(`base-${entry}-`) || !name.endsWith(`.${base.format}`))
    refuse('its name is not one of its bases');
  const vol = await lookupVol(rpc, pool, name);
  if (!vol) return refuse(`the pool ${pool.name} has no volume ${name}`);
  const path = await rpc((c, o) => c.storageVolGetPath(vol, o));
  if (path !== base.path) refuse(`the volume ${name} is at ${path}`);
  const markerName = `${name}.marker`;
  const marker = await lookupVol(rpc, pool, markerName);
  if (!marker) return refuse(`it has no marker ${markerName}`);
  const info = await rpc((c, o) => c.storageVolGetInfo(marker, o));
  if (info.capacity > BigInt(MARKER_MAX_BYTES)) refuse(`its marker is ${info.capacity} bytes`);
  const bytes = await rpc((c, o) =>
    c.storageVolDownload(marker, { ...o, maxBytes: MARKER_MAX_BYTES, length: info.capacity }),
  );
  const m = parseMarker(bytes.toString('utf8'), base.format, name);
  if (typeof m === 'string') refuse(m);
  else if (m.entry !== entry) refuse(`its marker records provider entry ${m.entry}`);
}

/** Every file a domain's disks name (sources and, in a live definition, backing stores). Pure. */
export function diskFiles(domainXml: string): string[] {
  const out: string[] = [];
  const walk = (el: XmlElement, inDisk: boolean): void => {
    const disk = inDisk || el.localName === 'disk';
    if (disk && el.localName === 'source') {
      const file = el.attributes.get('file');
      if (file !== undefined) out.push(file);
    }
    for (const child of el.children) walk(child, disk);
  };
  const devices = findElement(parseXml(domainXml), (el) => el.localName === 'devices');
  if (devices) walk(devices, false);
  return out;
}

/** Names of the domains on the host whose disks name any of `paths` (running or not). */
export async function domainsUsing(rpc: Rpc, paths: readonly string[]): Promise<string[]> {
  const users: string[] = [];
  for (const dom of await rpc((c, o) => c.listAllDomains(0, o))) {
    let xml: string;
    try {
      xml = await rpc((c, o) => c.domainGetXmlDesc(dom, 0, o));
    } catch (err) {
      if (isNotFound(err)) continue; // undefined meanwhile
      throw err;
    }
    if (diskFiles(xml).some((f) => paths.includes(f))) users.push(dom.name);
  }
  return users;
}

/**
 * Deletes a debris volume when no domain uses it; otherwise throws Kvm2DiskNotOwnError (Permanent,
 * nothing deleted) naming the volume, why it is not ours, its users, and the remedy.
 */
export async function discardDebris(rpc: Rpc, pool: StoragePool, vol: StorageVol, why: string): Promise<void> {
  let path: string;
  try {
    path = await rpc((c, o) => c.storageVolGetPath(vol, o));
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
  const users = await domainsUsing(rpc, [path]);
  if (users.length > 0) {
    throw new Kvm2DiskNotOwnError(
      vol.name,
      `volume ${vol.name} in pool ${pool.name} is not provably this proxy's own disk (${why}) and domain ${users.join(', ')} uses it; ` +
        `it was neither booted nor deleted: if it is debris, remove the domain and the volume by hand ` +
        `(virsh undefine ${users[0]}; virsh vol-delete ${vol.name} --pool ${pool.name}) and retry, or give the proxy another name`,
    );
  }
  try {
    await rpc((c, o) => c.storageVolDelete(vol, 0, o));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** What {@link ownDisks} found: the volumes that passed (absent ones are to be made) and what it replaced. */
export interface OwnDisks {
  overlay?: StorageVol;
  seed?: StorageVol;
  /** The owner record of this run is in place. */
  recorded: boolean;
  /** Debris deleted, as `volume: why`. */
  replaced: string[];
}

/**
 * Looks at the overlay, seed and owner record under the proxy's names and keeps only what is
 * provably this run's (see the module comment); everything else is discarded as debris or
 * refused. `legacy`: the proxy's own domain of this run exists (its mark has this `createdAt`)
 * and was defined before owner records existed, so it vouches for the volumes instead.
 */
export async function ownDisks(
  rpc: Rpc,
  pool: StoragePool,
  names: ProxyObjectNames,
  expect: Omit<OwnerRecord, 'v'> & { baseFormat: ImageFormat },
  legacy: boolean,
): Promise<OwnDisks> {
  const replaced: string[] = [];
  const discard = async (vol: StorageVol, why: string): Promise<undefined> => {
    await discardDebris(rpc, pool, vol, why);
    replaced.push(`${vol.name}: ${why}`);
    return undefined;
  };
  const recordVol = await lookupVol(rpc, pool, names.ownerRecordVolume);
  const rec = recordVol ? await readOwnerRecord(rpc, recordVol) : undefined;
  const recordWhy =
    rec === undefined
      ? 'no owner record'
      : typeof rec === 'string'
        ? rec
        : rec.ownerUid !== expect.ownerUid || rec.entry !== expect.entry || rec.name !== expect.name
          ? `its owner record names ${rec.ownerUid}/${rec.entry}/${rec.name}`
          : rec.createdAt !== expect.createdAt
            ? `its owner record is of another run of the proxy (created ${rec.createdAt}, this one ${expect.createdAt})`
            : rec.basePath !== expect.basePath
              ? `its owner record names the base ${rec.basePath}`
              : undefined;
  const vouched = recordWhy === undefined || (legacy && rec === undefined);
  const base = { path: expect.basePath, format: expect.baseFormat };

  let overlay = await lookupVol(rpc, pool, names.overlayVolume);
  if (overlay) {
    const why = vouched ? await checkOverlay(rpc, overlay, base) : recordWhy;
    if (why !== undefined) overlay = await discard(overlay, why);
  }
  let seed = await lookupVol(rpc, pool, names.seedVolume);
  if (seed) {
    const why = vouched ? await checkSeed(rpc, seed) : recordWhy;
    if (why !== undefined) seed = await discard(seed, why);
  }
  const recorded = recordWhy === undefined && overlay !== undefined && seed !== undefined;
  if (recordVol && !recorded) await discard(recordVol, recordWhy ?? 'its volumes are being made again');
  return { overlay, seed, recorded, replaced };
}
