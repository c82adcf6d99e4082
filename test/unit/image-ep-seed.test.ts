/**
 * The image's seed reader (test/e2e/image/files/ep-seed, the shell script the project image runs
 * before Squid instead of cloud-init), run for real with `sh` against a seed that
 * buildCloudInitSeed made, into a scratch root (EP_SEED_ROOT) with the seed's files in a directory
 * (EP_SEED_SOURCE) instead of the mounted cidata disk. It writes exactly user-data's files, with
 * their modes and owners, sets the hostname and marks the seed applied; anything it cannot apply
 * completely leaves nothing written and no mark, so cloud-init applies the seed instead.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildCloudInitSeed, buildSquidConf, EP_SEED_HEADER } from '../../lib/kvm2/seed/cloud-config.ts';
import type { CloudInitSpec } from '../../lib/kvm2/seed/cloud-config.ts';
import { SQUID_USERS_PATH } from '../../lib/kvm2/seed/squid-policy.ts';

const pexec = promisify(execFile);
const READER = new URL('../e2e/image/files/ep-seed', import.meta.url).pathname;
const HASH = `$6$abcdefgh$${'x'.repeat(86)}`;
const SPEC: CloudInitSpec = {
  instanceId: 'i-4dea22b3',
  hostname: 'ep-lab-a-p1',
  squidPort: 3128,
  allowedClientCidrs: ['10.0.0.0/8'],
  auth: { realm: 'egress-proxies', users: [{ user: 'alice', hash: HASH }] },
};
const isRoot = process.getuid?.() === 0;

describe('the image seed reader (files/ep-seed)', () => {
  let dir = '';
  let n = 0;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-seed-reader-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs the reader on `epSeed` (undefined: the seed has no ep-seed file); returns the scratch root. */
  async function apply(epSeed: string | undefined): Promise<{ root: string; stderr: string }> {
    n += 1;
    const root = join(dir, `root${n}`);
    const src = join(dir, `src${n}`);
    await mkdir(root);
    await mkdir(src);
    if (epSeed !== undefined) await writeFile(join(src, 'ep-seed'), epSeed);
    const { stderr } = await pexec('sh', [READER], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', EP_SEED_ROOT: root, EP_SEED_SOURCE: src },
      timeout: 20_000,
    });
    return { root, stderr };
  }

  async function tree(root: string): Promise<string[]> {
    return (await readdir(root, { recursive: true })).map(String).sort();
  }

  it("writes user-data's files with their modes and owners, the hostname, and the mark", async (t) => {
    const seed = buildCloudInitSeed(SPEC);
    const { root, stderr } = await apply(seed.epSeed);
    assert.match(stderr, /ep-seed: applied: hostname ep-lab-a-p1, 2 file\(s\)/);
    assert.equal(await readFile(join(root, 'etc/squid/squid.conf'), 'utf8'), buildSquidConf(SPEC));
    assert.equal(await readFile(join(root, SQUID_USERS_PATH), 'utf8'), `alice:${HASH}\n`);
    assert.equal((await stat(join(root, 'etc/squid/squid.conf'))).mode & 0o777, 0o644);
    assert.equal((await stat(join(root, SQUID_USERS_PATH))).mode & 0o777, 0o640);
    assert.equal(await readFile(join(root, 'etc/hostname'), 'utf8'), 'ep-lab-a-p1\n');
    assert.match(await readFile(join(root, 'etc/hosts'), 'utf8'), /^127\.0\.1\.1 ep-lab-a-p1$/m);
    assert.deepEqual(
      await tree(root),
      [
        'etc',
        'etc/hostname',
        'etc/hosts',
        'etc/squid',
        'etc/squid/squid.conf',
        SQUID_USERS_PATH.slice(1),
        'run',
        'run/ep-seed.applied',
      ].sort(),
    );
    if (!isRoot) return t.skip('owners: chown needs root (CI runs as root)');
    const { stdout } = await pexec('getent', ['group', 'proxy'], { timeout: 5_000 });
    const proxyGid = Number(stdout.split(':')[2]);
    const users = await stat(join(root, SQUID_USERS_PATH));
    assert.deepEqual([users.uid, users.gid], [0, proxyGid]);
  });

  it('rewrites a file already there (a reboot) and sets modes the umask cannot give', async () => {
    n += 1;
    const root = join(dir, `root${n}`);
    const src = join(dir, `src${n}`);
    await mkdir(join(root, 'etc/squid'), { recursive: true });
    await mkdir(src);
    await writeFile(join(root, 'etc/squid/squid.conf'), 'old junk, longer than the new file\n'.repeat(50), {
      mode: 0o600,
    });
    const b64 = (text: string): string => Buffer.from(text).toString('base64');
    await writeFile(
      join(src, 'ep-seed'),
      `${EP_SEED_HEADER}\nhostname p2\nfile /etc/squid/squid.conf 0644 root:root ${b64('http_port 3128\n')}\n` +
        `file /etc/squid/helper 0750 root:root ${b64('#!/bin/sh\n')}\nfile /etc/squid/empty 0600 root:root\n`,
    );
    const { stderr } = await pexec('sh', [READER], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', EP_SEED_ROOT: root, EP_SEED_SOURCE: src },
      timeout: 20_000,
    });
    assert.match(stderr, /applied: hostname p2, 3 file\(s\)/);
    assert.equal(await readFile(join(root, 'etc/squid/squid.conf'), 'utf8'), 'http_port 3128\n');
    assert.equal((await stat(join(root, 'etc/squid/squid.conf'))).mode & 0o777, 0o644);
    assert.equal((await stat(join(root, 'etc/squid/helper'))).mode & 0o777, 0o750);
    assert.equal(await readFile(join(root, 'etc/squid/empty'), 'utf8'), '');
    assert.equal((await stat(join(root, 'etc/squid/empty'))).mode & 0o777, 0o600);
  });

  const refused: [string, (good: string) => string | undefined, RegExp][] = [
    ['no ep-seed file (a seed from an older provider)', () => undefined, /has no ep-seed file/],
    ['another format version', (g) => g.replace(EP_SEED_HEADER, '# egress-proxies seed 2'), /unknown ep-seed format/],
    [
      'a file outside /etc/squid/ (after a valid one)',
      (g) => `${g}file /etc/passwd 0644 root:root cm9vdA==\n`,
      /line 5: \/etc\/passwd is not a file under \/etc\/squid\//,
    ],
    ['a path climbing out', (g) => `${g}file /etc/squid/../shadow 0644 root:root eA==\n`, /line 5: .* is not a file/],
    ['a mode that is not octal', (g) => g.replace(' 0644 ', ' 644 '), /line 3: mode 644 is not octal/],
    [
      'content that is not base64',
      (g) => g.replace(/^(file \S+ \S+ \S+ )\S+$/m, '$1not*base64'),
      /line 3: the content is not base64/,
    ],
    ['an unknown keyword', (g) => `${g}runcmd reboot\n`, /line 5: unknown keyword runcmd/],
    ['a bad hostname', (g) => g.replace('hostname ep-lab-a-p1', 'hostname -bad-'), /line 2: hostname needs/],
    ['no hostname line', (g) => g.replace('hostname ep-lab-a-p1\n', ''), /no hostname line/],
  ];
  for (const [what, mutate, message] of refused) {
    it(`leaves everything to cloud-init, writing nothing, for ${what}`, async () => {
      const good = buildCloudInitSeed(SPEC).epSeed!;
      const { root, stderr } = await apply(mutate(good));
      assert.match(stderr, message);
      assert.match(stderr, /cloud-init applies the seed/);
      assert.deepEqual(await tree(root), [], 'nothing written, no mark');
    });
  }
});
