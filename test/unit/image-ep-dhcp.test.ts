/**
 * The image's DHCP script (test/e2e/image/files/ep-dhcp, which busybox's udhcpc runs on each lease
 * event in the guest), run for real with `sh`, with a stand-in for busybox and for systemctl that
 * only record their arguments (EP_DHCP_BUSYBOX, EP_DHCP_SYSTEMCTL) and a scratch directory for
 * /run/ep (EP_DHCP_RUN). A lease sets the address and the default route and writes exactly the
 * lease's name servers (the file's appearance is what starts Squid); a later lease that changes
 * them has Squid reread them; one that changes nothing rewrites nothing and tells Squid nothing.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';

const pexec = promisify(execFile);
const SCRIPT = new URL('../e2e/image/files/ep-dhcp', import.meta.url).pathname;

describe('the image DHCP script (files/ep-dhcp)', () => {
  let dir = '';
  let calls = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-dhcp-'));
    calls = join(dir, 'calls');
    for (const name of ['busybox', 'systemctl']) {
      const stub = join(dir, name);
      await writeFile(stub, `#!/bin/sh\necho "${name} $*" >>"${calls}"\n[ "$1" = mv ] && exec mv "$2" "$3"\nexit 0\n`);
      await chmod(stub, 0o755);
    }
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    await rm(join(dir, 'run'), { recursive: true, force: true });
    await pexec('mkdir', ['-p', join(dir, 'run')]);
    await writeFile(calls, '');
  });

  async function event(name: string, lease: Record<string, string>): Promise<{ stdout: string; calls: string[] }> {
    const { stdout } = await pexec('sh', [SCRIPT, name], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        EP_DHCP_BUSYBOX: join(dir, 'busybox'),
        EP_DHCP_SYSTEMCTL: join(dir, 'systemctl'),
        EP_DHCP_RUN: join(dir, 'run'),
        interface: 'eth0',
        ...lease,
      },
      timeout: 10_000,
    });
    const text = await readFile(calls, 'utf8');
    await writeFile(calls, '');
    return { stdout, calls: text.split('\n').filter((l) => l !== '') };
  }
  const resolv = (): Promise<string> => readFile(join(dir, 'run', 'resolv.conf'), 'utf8');
  const LEASE = { ip: '192.168.101.23', mask: '24', router: '192.168.101.1', dns: '192.168.101.1' };

  it('a lease sets the address and route and writes only its name servers', async () => {
    const r = await event('bound', { ...LEASE, dns: '192.168.101.1 192.168.101.2' });
    assert.deepEqual(r.calls.slice(0, 2), [
      'busybox ip addr replace 192.168.101.23/24 dev eth0',
      'busybox ip route replace default via 192.168.101.1 dev eth0',
    ]);
    assert.equal(await resolv(), 'nameserver 192.168.101.1\nnameserver 192.168.101.2\n');
    assert.ok(!r.calls.some((c) => c.startsWith('systemctl')), 'the first lease starts Squid by the file alone');
    assert.match(r.stdout, /^ep-net: bound: 192\.168\.101\.23\/24 via 192\.168\.101\.1, names from 192\.168\.101\.1/);
  });

  it('the first of several routers is the default route', async () => {
    const r = await event('bound', { ...LEASE, router: '192.168.101.1 192.168.101.254' });
    assert.ok(r.calls.includes('busybox ip route replace default via 192.168.101.1 dev eth0'), r.calls.join('\n'));
  });

  it('a renewal with the same name servers rewrites nothing and tells Squid nothing', async () => {
    await event('bound', LEASE);
    const r = await event('renew', LEASE);
    assert.ok(!r.calls.some((c) => c.includes(' mv ') || c.startsWith('busybox mv')), r.calls.join('\n'));
    assert.ok(!r.calls.some((c) => c.startsWith('systemctl')), r.calls.join('\n'));
    assert.equal(await resolv(), 'nameserver 192.168.101.1\n');
  });

  it('a later lease that changes them has Squid reread them', async () => {
    await event('bound', LEASE);
    const r = await event('renew', { ...LEASE, dns: '192.168.101.9' });
    assert.equal(await resolv(), 'nameserver 192.168.101.9\n');
    assert.ok(r.calls.includes('systemctl --no-block try-reload-or-restart squid.service'), r.calls.join('\n'));
  });

  it('a lease without name servers leaves an empty list, never a fallback', async () => {
    await event('bound', { ip: LEASE.ip, mask: LEASE.mask, router: LEASE.router });
    assert.equal(await resolv(), '');
  });

  it('deconfig flushes the IPv4 addresses and writes nothing', async () => {
    const r = await event('deconfig', {});
    assert.deepEqual(r.calls, ['busybox ip -4 addr flush dev eth0']);
    await assert.rejects(resolv(), { code: 'ENOENT' });
  });
});
