/**
 * A minimal ISO 9660 image writer with a Joliet tree: one root directory of small files, as a
 * cloud-init NoCloud seed needs. Pure and synchronous; the same input gives the same bytes.
 *
 * Layout (2048-byte sectors): 0-15 system area (zero), 16 primary volume descriptor, 17 Joliet
 * supplementary volume descriptor (UCS-2 level 3, escape `%/E`), 18 set terminator, 19-22 the
 * L and M path tables of each tree (one root entry each), then the primary root directory, the
 * Joliet root directory, and the file data, which both trees share. Primary names are ISO level 1
 * (`META_DAT.;1`); Joliet keeps the real names (`meta-data`), which is what Linux, blkid and
 * cloud-init read. References: ECMA-119 (ISO 9660) sections 8-9, and the Joliet specification.
 */
import { Kvm2BuildError } from '../build-errors.ts';

/** One file of the root directory. */
export interface IsoFile {
  /** 1-64 characters of `A-Z a-z 0-9 . _ -`, unique ignoring case. */
  name: string;
  data: Uint8Array;
}

/** What {@link buildIso9660} writes. */
export interface IsoOptions {
  /** 1-16 characters of `A-Z a-z 0-9 _` (stored as given in both descriptors; blkid's label). */
  volumeId: string;
  files: readonly IsoFile[];
  /** Recording time of every descriptor and record. Default: 1970-01-01T00:00:00Z (reproducible). */
  timestamp?: Date;
}

export const ISO_SECTOR_BYTES = 2048;
/** At most this many files (every record of a tree then fits in one sector or a few). */
export const ISO_MAX_FILES = 64;
/** Largest image this writer makes; a seed is a few KiB. */
export const ISO_MAX_BYTES = 64 * 1024 * 1024;

const FIRST_PATH_TABLE = 19;
const FIRST_DIR_SECTOR = 23;

interface DirRecord {
  id: Uint8Array;
  extent: number;
  size: number;
  dir: boolean;
}

/** Builds the image; throws {@link Kvm2BuildError} for a bad volume id, file name or size. */
export function buildIso9660(options: IsoOptions): Buffer {
  const { volumeId, files } = options;
  const time = options.timestamp ?? new Date(0);
  if (!/^[A-Za-z0-9_]{1,16}$/.test(volumeId)) {
    throw new Kvm2BuildError('volumeId', `must be 1-16 characters of A-Z a-z 0-9 _, got ${JSON.stringify(volumeId)}`);
  }
  if (files.length > ISO_MAX_FILES) throw new Kvm2BuildError('files', `must hold at most ${ISO_MAX_FILES} files`);
  const seen = new Set<string>();
  files.forEach((f, i) => {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(f.name) || f.name === '.' || f.name === '..') {
      throw new Kvm2BuildError(
        `files[${i}].name`,
        `must be 1-64 characters of A-Z a-z 0-9 . _ -, got ${JSON.stringify(f.name)}`,
      );
    }
    if (seen.has(f.name.toLowerCase())) throw new Kvm2BuildError(`files[${i}].name`, `duplicates "${f.name}"`);
    seen.add(f.name.toLowerCase());
  });
  const primaryIds = level1Names(files.map((f) => f.name));
  const jolietIds = files.map((f) => Buffer.from(f.name, 'utf16le').swap16());

  const dirSectors = (ids: Uint8Array[]) => sectorsFor([34, 34, ...ids.map((id) => recordLength(id.length))]);
  const primaryDir = FIRST_DIR_SECTOR;
  const primaryDirSectors = dirSectors(primaryIds);
  const jolietDir = primaryDir + primaryDirSectors;
  const jolietDirSectors = dirSectors(jolietIds);
  let next = jolietDir + jolietDirSectors;
  const extents = files.map((f) => {
    if (f.data.length === 0) return 0; // an empty file has no extent
    const at = next;
    next += Math.ceil(f.data.length / ISO_SECTOR_BYTES);
    return at;
  });
  const totalSectors = next;
  if (totalSectors * ISO_SECTOR_BYTES > ISO_MAX_BYTES) {
    throw new Kvm2BuildError('files', `would make an image over ${ISO_MAX_BYTES} bytes`);
  }

  const img = Buffer.alloc(totalSectors * ISO_SECTOR_BYTES);
  const trees = [
    { type: 1, ids: primaryIds, dir: primaryDir, dirSectors: primaryDirSectors, pathTable: FIRST_PATH_TABLE },
    { type: 2, ids: jolietIds, dir: jolietDir, dirSectors: jolietDirSectors, pathTable: FIRST_PATH_TABLE + 2 },
  ];
  trees.forEach((tree, t) => {
    const root: DirRecord = {
      id: Uint8Array.of(0),
      extent: tree.dir,
      size: tree.dirSectors * ISO_SECTOR_BYTES,
      dir: true,
    };
    writeVolumeDescriptor(img, 16 + t, tree.type, volumeId, totalSectors, tree.pathTable, root, time);
    writePathTable(img, tree.pathTable, tree.dir, 'LE');
    writePathTable(img, tree.pathTable + 1, tree.dir, 'BE');
    const records: DirRecord[] = files.map((f, i) => ({
      id: tree.ids[i]!,
      extent: extents[i]!,
      size: f.data.length,
      dir: false,
    }));
    records.sort((a, b) => Buffer.compare(a.id, b.id));
    const all = [root, { ...root, id: Uint8Array.of(1) }, ...records];
    let pos = tree.dir * ISO_SECTOR_BYTES;
    for (const rec of all) {
      const len = recordLength(rec.id.length);
      // A record never crosses a sector boundary: the rest of the sector stays zero.
      if ((pos % ISO_SECTOR_BYTES) + len > ISO_SECTOR_BYTES) pos += ISO_SECTOR_BYTES - (pos % ISO_SECTOR_BYTES);
      writeDirRecord(img, pos, rec, time);
      pos += len;
    }
  });
  img[18 * ISO_SECTOR_BYTES] = 255;
  img.write('CD001', 18 * ISO_SECTOR_BYTES + 1, 'latin1');
  img[18 * ISO_SECTOR_BYTES + 6] = 1;
  files.forEach((f, i) => img.set(f.data, extents[i]! * ISO_SECTOR_BYTES));
  return img;
}

/** Level 1 identifiers (`NAME8.EXT;1`, d-characters), unique: clashes end in a digit. */
function level1Names(names: string[]): Uint8Array[] {
  const used = new Set<string>();
  return names.map((name) => {
    const dot = name.lastIndexOf('.');
    const clean = (s: string) => s.toUpperCase().replace(/[^A-Z0-9_]/g, '_');
    const base = clean(dot > 0 ? name.slice(0, dot) : name).slice(0, 8) || '_';
    const ext = clean(dot > 0 ? name.slice(dot + 1) : '').slice(0, 3);
    let id = `${base}.${ext};1`;
    for (let n = 1; used.has(id); n++) id = `${base.slice(0, 8 - String(n).length)}${n}.${ext};1`;
    used.add(id);
    return Buffer.from(id, 'latin1');
  });
}

function recordLength(idLength: number): number {
  return 33 + idLength + (idLength % 2 === 0 ? 1 : 0);
}

function sectorsFor(recordLengths: number[]): number {
  let sectors = 1;
  let used = 0;
  for (const len of recordLengths) {
    if (used + len > ISO_SECTOR_BYTES) [sectors, used] = [sectors + 1, 0];
    used += len;
  }
  return sectors;
}

function both32(buf: Buffer, at: number, value: number): void {
  buf.writeUInt32LE(value, at);
  buf.writeUInt32BE(value, at + 4);
}

function both16(buf: Buffer, at: number, value: number): void {
  buf.writeUInt16LE(value, at);
  buf.writeUInt16BE(value, at + 2);
}

function writeDirRecord(buf: Buffer, at: number, rec: DirRecord, time: Date): void {
  buf[at] = recordLength(rec.id.length);
  both32(buf, at + 2, rec.extent);
  both32(buf, at + 10, rec.size);
  buf.set(
    [
      time.getUTCFullYear() - 1900,
      time.getUTCMonth() + 1,
      time.getUTCDate(),
      time.getUTCHours(),
      time.getUTCMinutes(),
      time.getUTCSeconds(),
      0,
    ],
    at + 18,
  );
  buf[at + 25] = rec.dir ? 2 : 0;
  both16(buf, at + 28, 1);
  buf[at + 32] = rec.id.length;
  buf.set(rec.id, at + 33);
}

function writePathTable(buf: Buffer, sector: number, rootExtent: number, order: 'LE' | 'BE'): void {
  const at = sector * ISO_SECTOR_BYTES;
  buf[at] = 1; // length of the root's identifier (0x00)
  if (order === 'LE') buf.writeUInt32LE(rootExtent, at + 2);
  else buf.writeUInt32BE(rootExtent, at + 2);
  if (order === 'LE') buf.writeUInt16LE(1, at + 6);
  else buf.writeUInt16BE(1, at + 6);
}

/** `YYYYMMDDHHMMSScc` and a zero UTC offset byte (ECMA-119 8.4.26.1). */
function decDateTime(time: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(time.getUTCFullYear(), 4)}${p(time.getUTCMonth() + 1)}${p(time.getUTCDate())}${p(time.getUTCHours())}${p(time.getUTCMinutes())}${p(time.getUTCSeconds())}00`;
}

function writeVolumeDescriptor(
  buf: Buffer,
  sector: number,
  type: number,
  volumeId: string,
  totalSectors: number,
  pathTable: number,
  root: DirRecord,
  time: Date,
): void {
  const at = sector * ISO_SECTOR_BYTES;
  const joliet = type === 2;
  // a-/d-character fields are space-padded; Joliet fields are UCS-2 big-endian, padded with U+0020.
  const text = (offset: number, width: number, value: string) => {
    if (joliet) {
      for (let i = 0; i < Math.floor(width / 2); i++)
        buf.writeUInt16BE(value.charCodeAt(i) || 0x20, at + offset + i * 2);
    } else {
      buf.write(value.padEnd(width, ' '), at + offset, width, 'latin1');
    }
  };
  buf[at] = type;
  buf.write('CD001', at + 1, 'latin1');
  buf[at + 6] = 1;
  text(8, 32, 'LINUX');
  text(40, 32, volumeId);
  both32(buf, at + 80, totalSectors);
  if (joliet) buf.write('%/E', at + 88, 'latin1');
  both16(buf, at + 120, 1);
  both16(buf, at + 124, 1);
  both16(buf, at + 128, ISO_SECTOR_BYTES);
  both32(buf, at + 132, 10); // path table: the root entry only (8 + 1 + 1 pad bytes)
  buf.writeUInt32LE(pathTable, at + 140);
  buf.writeUInt32BE(pathTable + 1, at + 148);
  writeDirRecord(buf, at + 156, root, time);
  text(190, 128, '');
  text(318, 128, '');
  text(446, 128, '');
  text(574, 128, 'EGRESS-PROXIES KVM2 SEED');
  text(702, 37, '');
  text(739, 37, '');
  text(776, 37, '');
  const stamp = decDateTime(time);
  buf.write(stamp, at + 813, 'latin1');
  buf.write(stamp, at + 830, 'latin1');
  buf.write('0'.repeat(16), at + 847, 'latin1');
  buf.write('0'.repeat(16), at + 864, 'latin1');
  buf[at + 881] = 1;
}
