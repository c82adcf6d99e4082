/**
 * The pure parts of a proxy's disk provenance (lib/kvm2/proxy/provenance.ts, object-names.ts,
 * console.ts): the qcow2 header reader on images made by the real qemu-img, the overlay rule,
 * the owner record, the per-proxy volume name pattern the GC uses, the disks a domain names, and
 * the log paths a delete removes.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { proxyLogPaths } from '../../lib/kvm2/proxy/console.ts';
import { parseProxyVolumeName, proxyObjectNames } from '../../lib/kvm2/proxy/object-names.ts';
import { diskFiles, overlayProblem, parseOwnerRecord, parseQcow2Header } from '../../lib/kvm2/proxy/provenance.ts';

const pexec = promisify(execFile);

describe('qcow2 headers of real qemu-img images', () => {
  let dir: string;
  const base = { path: '', format: 'qcow2' as const };
  const make = async (name: string, ...args: string[]): Promise<Buffer> => {
    const file = join(dir, name);
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', ...args, file, '16M'], { timeout: 20_000 });
    return (await readFile(file)).subarray(0, 64 * 1024);
  };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-qcow2-'));
    await make('base.qcow2');
    base.path = join(dir, 'base.qcow2');
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('an overlay on the base with its format passes', async () => {
    const h = parseQcow2Header(await make('ok.qcow2', '-b', base.path, '-F', 'qcow2'));
    assert.deepEqual(h, { version: 3, backingFile: base.path, backingFormat: 'qcow2', externalData: false });
    assert.equal(overlayProblem(h, base), undefined);
  });

  it('a standalone image, another backing file, another backing format are each refused, with why', async () => {
    assert.match(overlayProblem(parseQcow2Header(await make('alone.qcow2')), base)!, /no backing file/);
    await make('other.qcow2');
    const other = join(dir, 'other.qcow2');
    assert.match(
      overlayProblem(parseQcow2Header(await make('o.qcow2', '-b', other, '-F', 'qcow2')), base)!,
      new RegExp(`its backing file is ${other}, not the base`),
    );
    assert.match(
      overlayProblem(parseQcow2Header(await make('r.qcow2', '-u', '-b', base.path, '-F', 'raw')), base)!,
      /backing format is raw, not qcow2/,
    );
  });

  it('qcow2 v2 (compat 0.10) reads too; an external data file is refused', async () => {
    const v2 = parseQcow2Header(await make('v2.qcow2', '-o', 'compat=0.10', '-b', base.path, '-F', 'qcow2'));
    assert.equal(typeof v2 === 'object' && v2.version, 2);
    assert.equal(overlayProblem(v2, base), undefined);
    const ext = parseQcow2Header(
      await make('ext.qcow2', '-o', `data_file=${join(dir, 'data.raw')}`, '-b', base.path, '-F', 'qcow2'),
    );
    assert.match(overlayProblem(ext, base)!, /external file/);
  });

  it('garbage and truncations are reasons, never exceptions', async () => {
    const good = await make('t.qcow2', '-b', base.path, '-F', 'qcow2');
    assert.equal(parseQcow2Header(Buffer.alloc(16)), 'it is not a qcow2 image');
    assert.equal(parseQcow2Header(Buffer.from('#cloud-config\n'.repeat(10))), 'it is not a qcow2 image');
    for (const n of [0, 4, 71, 80, 110, 200])
      assert.equal(typeof parseQcow2Header(good.subarray(0, n)), 'string', `${n}`);
    const bad = Buffer.from(good);
    bad.writeUInt32BE(2000, 16); // backing name longer than qemu allows
    assert.match(parseQcow2Header(bad) as string, /backing file name is unreadable/);
    const odd = Buffer.from(good);
    odd.writeUInt32BE(9, 4);
    assert.match(parseQcow2Header(odd) as string, /unknown version 9/);
  });
});

describe('owner record', () => {
  const rec = { v: 1, ownerUid: 'u', entry: 'e', name: 'n', createdAt: '2026-01-01T00:00:00Z', basePath: '/p/b' };
  it('a v1 record parses, NUL padding ignored; anything else is a reason', () => {
    assert.deepEqual(parseOwnerRecord(JSON.stringify(rec) + '\0\0'), rec);
    assert.equal(parseOwnerRecord('nope'), 'the owner record is not JSON');
    assert.equal(parseOwnerRecord(JSON.stringify({ ...rec, v: 2 })), 'the owner record is not a valid v1 record');
    assert.equal(
      parseOwnerRecord(JSON.stringify({ ...rec, createdAt: 1 })),
      'the owner record is not a valid v1 record',
    );
    assert.equal(parseOwnerRecord('null'), 'the owner record is not a valid v1 record');
  });
});

describe('per-proxy volume names', () => {
  it('the overlay, seed and owner record of a proxy of the entry, and nothing else', () => {
    const n = proxyObjectNames({ ownerUid: 'u', entry: 'lab', name: 'web-1' });
    assert.deepEqual(parseProxyVolumeName('lab', n.overlayVolume), { name: 'web-1', kind: 'overlay' });
    assert.deepEqual(parseProxyVolumeName('lab', n.seedVolume), { name: 'web-1', kind: 'seed' });
    assert.deepEqual(parseProxyVolumeName('lab', n.ownerRecordVolume), { name: 'web-1', kind: 'ownerRecord' });
    for (const other of [
      'ep_lab-a_web-1.qcow2', // another entry
      'ep_lab_web-1.raw',
      'ep_lab_.qcow2',
      'ep_lab_Web.qcow2',
      'ep_lab_a_b.qcow2',
      'base-lab-debian.qcow2',
      'base-lab-debian.qcow2.marker',
      'ep_lab_x.qcow2.bak',
    ]) {
      assert.equal(parseProxyVolumeName('lab', other), undefined, other);
    }
  });

  it('the log files a delete removes are the proxy own, under the QEMU log directory', () => {
    const paths = proxyLogPaths({ ownerUid: 'u', entry: 'lab', name: 'web' });
    assert.equal(paths.length, 22);
    for (const p of paths) assert.match(p, /^\/var\/log\/libvirt\/qemu\/ep_lab_web\.(console\.)?log(\.\d)?$/);
    assert.ok(paths.includes('/var/log/libvirt/qemu/ep_lab_web.log'));
    assert.ok(paths.includes('/var/log/libvirt/qemu/ep_lab_web.console.log.0'));
  });
});

describe('disk files of a domain', () => {
  it('sources and backing stores of disks, not other sources', () => {
    const xml = `<domain><devices>
      <disk type='file' device='disk'><source file='/p/a&amp;b.qcow2'/>
        <backingStore type='file'><source file='/p/base.qcow2'/></backingStore></disk>
      <disk type='file' device='cdrom'><source file="/p/seed.iso"/></disk>
      <serial type='file'><source path='/var/log/x.log'/></serial>
      <interface type='network'><source network='default'/></interface>
    </devices></domain>`;
    assert.deepEqual(diskFiles(xml), ['/p/a&b.qcow2', '/p/base.qcow2', '/p/seed.iso']);
    assert.deepEqual(diskFiles('<domain/>'), []);
  });
});
