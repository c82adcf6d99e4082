/**
 * The ISO 9660 + Joliet writer and the NoCloud seed, read back by a reader written here from
 * ECMA-119 (not by the code under test): volume descriptors, both-endian fields, path tables,
 * directory records (never across a sector), names in both trees, and the file bytes.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ISO_SECTOR_BYTES, buildIso9660 } from '../../lib/kvm2/seed/iso9660.ts';
import { SEED_VOLUME_ID, buildSeedImage } from '../../lib/kvm2/seed/seed-image.ts';
import { Kvm2BuildError } from '../../lib/kvm2/build-errors.ts';

const S = ISO_SECTOR_BYTES;

interface Entry {
  name: string;
  extent: number;
  size: number;
  isDir: boolean;
  date: number[];
}

/** A both-endian 32-bit field: the two halves must agree. */
function both32(img: Buffer, at: number): number {
  const le = img.readUInt32LE(at);
  assert.equal(img.readUInt32BE(at + 4), le, `both-endian field at ${at} disagrees`);
  return le;
}

function both16(img: Buffer, at: number): number {
  const le = img.readUInt16LE(at);
  assert.equal(img.readUInt16BE(at + 2), le, `both-endian field at ${at} disagrees`);
  return le;
}

function readRecord(img: Buffer, at: number, joliet: boolean): Entry {
  const len = img[at]!;
  const idLen = img[at + 32]!;
  assert.equal(len, 33 + idLen + (idLen % 2 === 0 ? 1 : 0), 'record length');
  const id = img.subarray(at + 33, at + 33 + idLen);
  const special = idLen === 1 && id[0]! <= 1;
  const name = special
    ? id[0] === 0
      ? '.'
      : '..'
    : joliet
      ? Buffer.from(id).swap16().toString('utf16le')
      : id.toString('latin1');
  assert.equal(both16(img, at + 28), 1, 'volume sequence number');
  return {
    name,
    extent: both32(img, at + 2),
    size: both32(img, at + 10),
    isDir: (img[at + 25]! & 2) !== 0,
    date: [...img.subarray(at + 18, at + 25)],
  };
}

/** The root directory entries of the tree whose volume descriptor is in `sector`. */
function readTree(img: Buffer, sector: number) {
  const vd = sector * S;
  const joliet = img[vd] === 2;
  const root = readRecord(img, vd + 156, joliet);
  assert.ok(root.isDir);
  const entries: Entry[] = [];
  for (let pos = root.extent * S; pos < root.extent * S + root.size;) {
    if (img[pos] === 0) {
      pos = (Math.floor(pos / S) + 1) * S; // the rest of the sector is padding
      continue;
    }
    const rec = readRecord(img, pos, joliet);
    assert.equal(Math.floor(pos / S), Math.floor((pos + img[pos]! - 1) / S), `record ${rec.name} crosses a sector`);
    entries.push(rec);
    pos += img[pos]!;
  }
  return { vd, joliet, root, entries };
}

function descriptorText(img: Buffer, at: number, width: number, joliet: boolean): string {
  const raw = img.subarray(at, at + width);
  return (joliet ? Buffer.from(raw).swap16().toString('utf16le') : raw.toString('latin1')).trimEnd();
}

function fileBytes(img: Buffer, e: Entry): Buffer {
  return img.subarray(e.extent * S, e.extent * S + e.size);
}

const enc = (s: string) => Buffer.from(s, 'utf8');

describe('buildIso9660', () => {
  const files = [
    { name: 'user-data', data: enc('#cloud-config\nhostname: p1\n') },
    { name: 'meta-data', data: enc('instance-id: i-1\n') },
    { name: 'network-config', data: enc('version: 2\n') },
    { name: 'empty', data: new Uint8Array() },
    { name: 'big.bin', data: Buffer.alloc(2 * S + 5, 0xa5) },
    { name: 'exact', data: Buffer.alloc(S, 0x11) },
  ];
  const img = buildIso9660({ volumeId: 'cidata', files, timestamp: new Date('2026-03-04T05:06:07Z') });

  it('writes a primary and a Joliet volume descriptor and the set terminator', () => {
    assert.equal(img.length % S, 0);
    assert.ok(
      img.subarray(0, 16 * S).every((b) => b === 0),
      'system area is zero',
    );
    const types = [16, 17, 18].map((s) => [
      img[s * S],
      img.subarray(s * S + 1, s * S + 6).toString('latin1'),
      img[s * S + 6],
    ]);
    assert.deepEqual(types, [
      [1, 'CD001', 1],
      [2, 'CD001', 1],
      [255, 'CD001', 1],
    ]);
    for (const sector of [16, 17]) {
      const vd = sector * S;
      const joliet = sector === 17;
      assert.equal(descriptorText(img, vd + 40, 32, joliet), 'cidata');
      assert.equal(both32(img, vd + 80), img.length / S, 'volume space size');
      assert.equal(both16(img, vd + 120), 1);
      assert.equal(both16(img, vd + 124), 1);
      assert.equal(both16(img, vd + 128), S);
      assert.equal(img[vd + 881], 1, 'file structure version');
      assert.equal(img.subarray(vd + 813, vd + 829).toString('latin1'), '2026030405060700');
    }
    assert.equal(img.subarray(17 * S + 88, 17 * S + 91).toString('latin1'), '%/E', 'Joliet UCS-2 level 3');
    assert.ok(
      img.subarray(16 * S + 88, 16 * S + 120).every((b) => b === 0),
      'no escape sequence in the PVD',
    );
  });

  it('writes L and M path tables with the root entry', () => {
    for (const sector of [16, 17]) {
      const vd = sector * S;
      const size = both32(img, vd + 132);
      assert.equal(size, 10);
      const rootExtent = readRecord(img, vd + 156, sector === 17).extent;
      const l = img.readUInt32LE(vd + 140) * S;
      const m = img.readUInt32BE(vd + 148) * S;
      assert.deepEqual([img[l], img.readUInt32LE(l + 2), img.readUInt16LE(l + 6), img[l + 8]], [1, rootExtent, 1, 0]);
      assert.deepEqual([img[m], img.readUInt32BE(m + 2), img.readUInt16BE(m + 6), img[m + 8]], [1, rootExtent, 1, 0]);
    }
  });

  it('lists every file in both trees, sorted, with level 1 and Joliet names', () => {
    const primary = readTree(img, 16);
    const joliet = readTree(img, 17);
    assert.deepEqual(
      primary.entries.map((e) => e.name),
      ['.', '..', 'BIG.BIN;1', 'EMPTY.;1', 'EXACT.;1', 'META_DAT.;1', 'NETWORK_.;1', 'USER_DAT.;1'],
    );
    assert.deepEqual(
      joliet.entries.map((e) => e.name),
      ['.', '..', 'big.bin', 'empty', 'exact', 'meta-data', 'network-config', 'user-data'],
    );
    for (const tree of [primary, joliet]) {
      const [dot, dotdot] = tree.entries;
      assert.equal(dot!.extent, tree.root.extent);
      assert.equal(dotdot!.extent, tree.root.extent);
      assert.ok(dot!.isDir && dotdot!.isDir);
      for (const e of tree.entries) assert.deepEqual(e.date, [126, 3, 4, 5, 6, 7, 0]);
    }
  });

  it('stores each file once, shared by both trees, byte for byte', () => {
    const primary = readTree(img, 16).entries.slice(2);
    const joliet = readTree(img, 17).entries.slice(2);
    for (const f of files) {
      const j = joliet.find((e) => e.name === f.name)!;
      assert.ok(!j.isDir);
      assert.equal(j.size, f.data.length);
      assert.deepEqual(fileBytes(img, j), Buffer.from(f.data), f.name);
      const p = primary.find((e) => e.size === f.data.length && e.extent === j.extent);
      assert.ok(p, `the primary tree points at the same data as ${f.name}`);
    }
    const ends = joliet.filter((e) => e.size > 0).map((e) => e.extent + Math.ceil(e.size / S));
    assert.equal(Math.max(...ends), img.length / S, 'the image ends after the last file');
  });

  it('is deterministic, and spreads a large directory over several sectors', () => {
    assert.deepEqual(buildIso9660({ volumeId: 'cidata', files, timestamp: new Date('2026-03-04T05:06:07Z') }), img);
    const many = Array.from({ length: 64 }, (_, i) => ({
      name: `file-with-a-long-name-${String(i).padStart(2, '0')}`,
      data: enc(String(i)),
    }));
    const big = buildIso9660({ volumeId: 'x', files: many });
    const joliet = readTree(big, 17);
    assert.ok(joliet.root.size > S, 'the Joliet root spans several sectors');
    assert.equal(joliet.entries.length, 66);
    for (const [i, f] of many.entries()) {
      const e = joliet.entries.find((x) => x.name === f.name)!;
      assert.equal(fileBytes(big, e).toString(), String(i));
    }
    const primaryNames = readTree(big, 16).entries.map((e) => e.name);
    assert.equal(new Set(primaryNames).size, 66, 'level 1 names are made unique');
  });

  it('refuses bad volume ids, names, duplicates and too many files', () => {
    const bad = (opts: Parameters<typeof buildIso9660>[0], field: string) =>
      assert.throws(
        () => buildIso9660(opts),
        (err: unknown) => err instanceof Kvm2BuildError && err.field === field && err.kind === 'Permanent',
      );
    bad({ volumeId: '', files: [] }, 'volumeId');
    bad({ volumeId: 'ci data', files: [] }, 'volumeId');
    bad({ volumeId: 'a'.repeat(17), files: [] }, 'volumeId');
    bad({ volumeId: 'cidata', files: [{ name: 'a/b', data: enc('') }] }, 'files[0].name');
    bad({ volumeId: 'cidata', files: [{ name: '..', data: enc('') }] }, 'files[0].name');
    bad({ volumeId: 'cidata', files: [{ name: 'x'.repeat(65), data: enc('') }] }, 'files[0].name');
    bad({ volumeId: 'cidata', files: [{ name: 'é', data: enc('') }] }, 'files[0].name');
    bad(
      {
        volumeId: 'cidata',
        files: [
          { name: 'a', data: enc('') },
          { name: 'A', data: enc('') },
        ],
      },
      'files[1].name',
    );
    bad(
      { volumeId: 'cidata', files: Array.from({ length: 65 }, (_, i) => ({ name: `f${i}`, data: enc('') })) },
      'files',
    );
  });
});

describe('buildSeedImage', () => {
  it('holds meta-data, user-data and network-config under the cidata label', () => {
    const seed = {
      metaData: 'instance-id: i-1\n',
      userData: '#cloud-config\nhostname: ü\n',
      networkConfig: 'version: 2\n',
    };
    const img = buildSeedImage(seed);
    assert.equal(SEED_VOLUME_ID, 'cidata');
    assert.equal(descriptorText(img, 16 * S + 40, 32, false), 'cidata');
    assert.equal(descriptorText(img, 17 * S + 40, 32, true), 'cidata');
    const entries = readTree(img, 17).entries;
    const text = (name: string) =>
      fileBytes(
        img,
        entries.find((e) => e.name === name)!,
      ).toString('utf8');
    assert.equal(text('meta-data'), seed.metaData);
    assert.equal(text('user-data'), seed.userData);
    assert.equal(text('network-config'), seed.networkConfig);
    assert.ok(img.length <= 32 * S, `a seed is small (${img.length} bytes)`);
  });

  it('leaves network-config out when not given', () => {
    const img = buildSeedImage({ metaData: 'a', userData: 'b' });
    assert.deepEqual(
      readTree(img, 17).entries.map((e) => e.name),
      ['.', '..', 'meta-data', 'user-data'],
    );
  });
});
