/**
 * The seed image read back by real tools: blkid (how cloud-init finds it: label and type),
 * isoinfo (genisoimage package: descriptors, Joliet, extraction), bsdtar (libarchive) and 7z,
 * compared with an image genisoimage makes from the same files, and mounted by the kernel's
 * isofs where this kernel has it. A missing tool skips its test locally and fails under CI=true
 * (install: genisoimage libarchive-tools p7zip-full).
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildSeedImage } from '../../lib/kvm2/seed/seed-image.ts';
import { buildCloudInitSeed } from '../../lib/kvm2/seed/cloud-config.ts';
import { needTool } from '../support/tools.ts';

const pexec = promisify(execFile);
const TOOL_TIMEOUT_MS = 20_000;

async function run(cmd: string, args: string[]): Promise<Buffer> {
  const { stdout } = await pexec(cmd, args, { timeout: TOOL_TIMEOUT_MS, encoding: 'buffer', maxBuffer: 16 << 20 });
  return stdout;
}

const seed = buildCloudInitSeed({
  instanceId: 'i-4dea22b3',
  hostname: 'ep-lab-a-p1',
  squidPort: 3128,
  allowedClientCidrs: ['10.0.0.0/8', '2001:db8::/32'],
  network: 'eth0',
});
const files: Record<string, string> = {
  'meta-data': seed.metaData,
  'user-data': seed.userData,
  'ep-seed': seed.epSeed!,
  'network-config': seed.networkConfig!,
};

describe('seed image read by real tools', () => {
  let dir = '';
  let ours = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-seed-'));
    ours = join(dir, 'ours.iso');
    await writeFile(ours, buildSeedImage(seed));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('blkid sees an iso9660 filesystem labelled cidata (what cloud-init looks for)', async (t) => {
    if (!(await needTool(t, 'blkid', 'util-linux'))) return;
    const out = (await run('blkid', ['-p', '-o', 'export', ours])).toString();
    assert.match(out, /^TYPE=iso9660$/m);
    assert.match(out, /^LABEL=cidata$/m);
  });

  it('isoinfo: volume id cidata, Joliet level 3, and every file byte for byte', async (t) => {
    if (!(await needTool(t, 'isoinfo', 'genisoimage'))) return;
    const info = (await run('isoinfo', ['-d', '-i', ours])).toString();
    assert.match(info, /^Volume id: cidata$/m);
    assert.match(info, /^Joliet with UCS level 3 found$/m);
    assert.match(info, /^Logical block size is: 2048$/m);
    for (const [name, text] of Object.entries(files)) {
      assert.equal((await run('isoinfo', ['-J', '-x', `/${name}`, '-i', ours])).toString('utf8'), text, name);
    }
  });

  it('matches the volume id and file lists of genisoimage -volid cidata -joliet -rock', async (t) => {
    if (!(await needTool(t, 'genisoimage', 'genisoimage'))) return;
    const src = join(dir, 'src');
    await mkdir(src);
    for (const [name, text] of Object.entries(files)) await writeFile(join(src, name), text);
    const theirs = join(dir, 'theirs.iso');
    await run('genisoimage', ['-quiet', '-o', theirs, '-volid', 'cidata', '-joliet', '-rock', src]);
    const volumeId = async (img: string) =>
      /^Volume id: (.*)$/m.exec((await run('isoinfo', ['-d', '-i', img])).toString())?.[1];
    assert.equal(await volumeId(ours), await volumeId(theirs));
    // `isoinfo -l` lines end in "[extent flags]  NAME": compare name and size, not extents or dates.
    const listing = async (img: string, joliet: boolean) =>
      (await run('isoinfo', [...(joliet ? ['-J'] : []), '-l', '-i', img]))
        .toString()
        .split('\n')
        .map((l) => /^-\S+\s+\d+\s+\d+\s+\d+\s+(\d+) .*\]\s+(\S+)\s*$/.exec(l))
        .filter((m) => m !== null)
        .map((m) => `${m[2]} ${m[1]}`)
        .sort();
    const jolietList = await listing(ours, true);
    assert.deepEqual(
      jolietList,
      Object.entries(files)
        .map(([n, t]) => `${n} ${Buffer.byteLength(t)}`)
        .sort(),
    );
    assert.deepEqual(jolietList, await listing(theirs, true));
    const primaryList = await listing(ours, false);
    assert.equal(primaryList.length, Object.keys(files).length);
    assert.deepEqual(primaryList, await listing(theirs, false), 'same level 1 names');
  });

  it('bsdtar (libarchive) lists and extracts the Joliet names', async (t) => {
    if (!(await needTool(t, 'bsdtar', 'libarchive-tools'))) return;
    const names = (await run('bsdtar', ['-tf', ours]))
      .toString()
      .split('\n')
      .filter((n) => n !== '' && n !== '.');
    assert.deepEqual(names.sort(), Object.keys(files).sort());
    for (const [name, text] of Object.entries(files)) {
      assert.equal((await run('bsdtar', ['-xOf', ours, name])).toString('utf8'), text, name);
    }
  });

  it('7z extracts every file byte for byte', async (t) => {
    if (!(await needTool(t, '7z', 'p7zip-full'))) return;
    const out = join(dir, '7z-out');
    await run('7z', ['x', '-y', `-o${out}`, ours]);
    assert.deepEqual((await readdir(out)).sort(), Object.keys(files).sort());
    for (const [name, text] of Object.entries(files)) assert.equal(await readFile(join(out, name), 'utf8'), text, name);
  });

  it('the kernel mounts it (iso9660 with Joliet) and reads the files', async (t) => {
    const kernelHasIsofs = /\biso9660$/m.test(readFileSync('/proc/filesystems', 'utf8'));
    if (!kernelHasIsofs || process.getuid?.() !== 0) {
      // Not a tool we can install: a kernel without isofs (some VM kernels) cannot mount it.
      t.skip(kernelHasIsofs ? 'mounting needs root' : 'this kernel has no iso9660 filesystem');
      return;
    }
    const mnt = join(dir, 'mnt');
    await mkdir(mnt);
    await run('mount', ['-t', 'iso9660', '-o', 'loop,ro', ours, mnt]);
    try {
      assert.deepEqual((await readdir(mnt)).sort(), Object.keys(files).sort());
      for (const [name, text] of Object.entries(files))
        assert.equal(await readFile(join(mnt, name), 'utf8'), text, name);
    } finally {
      await run('umount', [mnt]);
    }
  });
});
