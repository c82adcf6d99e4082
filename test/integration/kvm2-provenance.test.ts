/**
 * A proxy boots only a disk provably its own, against a real libvirtd over SSH (test host ep-h1):
 * volumes planted with virsh under a proxy's overlay or seed name (a standalone qcow2, an overlay
 * backed by another file, one left by another run of the proxy) are replaced as debris before the
 * domain is defined, or the create is refused when a domain uses them; a base without its marker
 * is refused; and a deleted proxy's console and QEMU logs are gone with it, other files kept.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { errorKind } from '../../lib/errors.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { createProxy } from '../../lib/kvm2/proxy/create.ts';
import type { CreateProxyInput } from '../../lib/kvm2/proxy/create.ts';
import { deleteProxy } from '../../lib/kvm2/proxy/delete.ts';
import { proxyObjectNames } from '../../lib/kvm2/proxy/object-names.ts';
import { hostTarget, inHost, loadTestHosts, virsh } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';
import { plantVerifiedBase, removeVerifiedBase } from '../support/verified-base.ts';
import type { VerifiedBase } from '../support/verified-base.ts';

const run = Date.now().toString(36);
const entry = `pv${run}`;
const owner = `uid-${run}`;
const CREATED_AT = '2026-11-29T12:00:00Z';

describe('a proxy boots only its own disk (real host)', { timeout: 300_000 }, () => {
  let host: TestHost;
  let links: HostLinks;
  let base: VerifiedBase;
  const names = (name: string) => proxyObjectNames({ ownerUid: owner, entry, name });

  const input = (name: string, over: Partial<CreateProxyInput> = {}): CreateProxyInput => ({
    links,
    ownerUid: owner,
    entry,
    name,
    pool: host.pool,
    network: host.network,
    domainType: host.domainType,
    vcpus: 1,
    memoryMiB: 64,
    diskGiB: 1,
    base: { path: base.path, format: 'qcow2' },
    squid: { port: 3128, allowedClientCidrs: ['10.0.0.0/8'] },
    createdAt: CREATED_AT,
    reserveBytes: 16 * 1024 * 1024,
    rpcTimeoutMs: 20_000,
    ...over,
  });

  /** `qemu-img info` of a volume, read inside the host. */
  const imageInfo = async (volume: string): Promise<{ format: string; 'backing-filename'?: string }> => {
    const path = (await virsh(host, 'vol-path', '--pool', host.pool, volume)).trim();
    return JSON.parse(await inHost(host, ['qemu-img', 'info', '-U', '--output=json', path])) as {
      format: string;
      'backing-filename'?: string;
    };
  };
  /** The file the domain boots from (its vda). */
  const bootDisk = async (domain: string): Promise<string> => {
    const xml = await virsh(host, 'dumpxml', domain);
    const disk = /<disk[^>]*device=['"]disk['"][^>]*>(?:(?!<\/disk>)[\s\S])*?<target dev=['"]vda['"]/.exec(xml)?.[0];
    return /<source file=['"]([^'"]+)['"]/.exec(disk ?? '')?.[1] ?? '';
  };
  const plantQcow2 = (volume: string, extra: string[] = []) =>
    virsh(host, 'vol-create-as', host.pool, volume, '16M', '--format', 'qcow2', ...extra);
  const volumes = async (): Promise<string[]> =>
    (await virsh(host, 'vol-list', host.pool))
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[0] ?? '')
      .filter((v) => v.startsWith(`ep_${entry}_`) || v.startsWith(`other-${run}`));

  before(async () => {
    host = loadTestHosts()[0]!;
    links = new HostLinks(hostTarget(host));
    base = await plantVerifiedBase(links, host.pool, entry);
  });

  after(async () => {
    for (const n of ['p1', 'p2', 'p3', 'p4', 'p5', 'p6']) {
      await deleteProxy({ ...input(n), logSession: false }).catch(() => {});
    }
    await virsh(host, 'destroy', `other-${run}`).catch(() => {});
    await virsh(host, 'undefine', `other-${run}`).catch(() => {});
    for (const v of await volumes().catch(() => []))
      await virsh(host, 'vol-delete', '--pool', host.pool, v).catch(() => {});
    await inHost(host, ['sh', '-c', `rm -f /var/log/libvirt/qemu/ep_${entry}_*`]).catch(() => {});
    await virsh(host, 'vol-delete', '--pool', host.pool, `base-${entry}-nomarker.qcow2`).catch(() => {});
    await removeVerifiedBase(links, host.pool, base);
    links.close();
  });

  it('a standalone qcow2 planted under the overlay name is replaced, never booted', async () => {
    const n = names('p1');
    await plantQcow2(n.overlayVolume);
    assert.equal((await imageInfo(n.overlayVolume))['backing-filename'], undefined, 'planted without a backing file');
    const created = await createProxy(input('p1'));
    assert.equal(await bootDisk(n.domain), created.overlayPath);
    const info = await imageInfo(n.overlayVolume);
    assert.equal(info.format, 'qcow2');
    assert.equal(info['backing-filename'], base.path, 'the booted overlay is backed by the verified base');
    assert.ok(
      created.replaced?.some((r) => r.startsWith(`${n.overlayVolume}: `) && /no owner record/.test(r)),
      JSON.stringify(created.replaced),
    );
  });

  it('a qcow2 planted under the seed name is replaced by a raw seed', async () => {
    const n = names('p2');
    await plantQcow2(n.seedVolume);
    const created = await createProxy(input('p2'));
    assert.equal((await imageInfo(n.seedVolume)).format, 'raw');
    assert.ok(
      created.replaced?.some((r) => r.startsWith(`${n.seedVolume}: `)),
      JSON.stringify(created.replaced),
    );
    assert.equal((await imageInfo(n.overlayVolume))['backing-filename'], base.path);
  });

  it('an overlay backed by another file is replaced, even with an owner record of this run', async () => {
    const n = names('p3');
    await plantQcow2(`other-${run}.qcow2`);
    const otherPath = (await virsh(host, 'vol-path', '--pool', host.pool, `other-${run}.qcow2`)).trim();
    await plantQcow2(n.overlayVolume, ['--backing-vol', otherPath, '--backing-vol-format', 'qcow2']);
    assert.equal((await imageInfo(n.overlayVolume))['backing-filename'], otherPath);
    const created = await createProxy(input('p3'));
    assert.equal((await imageInfo(n.overlayVolume))['backing-filename'], base.path);
    assert.equal(await bootDisk(n.domain), created.overlayPath);
    // Now the record of this run is in place: swap the overlay for one on the other file.
    await virsh(host, 'destroy', n.domain);
    await virsh(host, 'vol-delete', '--pool', host.pool, n.overlayVolume);
    await plantQcow2(n.overlayVolume, ['--backing-vol', otherPath, '--backing-vol-format', 'qcow2']);
    await assert.rejects(createProxy(input('p3')), (err: unknown) => {
      // The proxy's own domain uses the swapped overlay: refused, not booted.
      assert.equal((err as { code?: string }).code, 'KVM2_DISK_NOT_OWN', String(err));
      assert.match((err as Error).message, new RegExp(`its backing file is ${otherPath}, not the base`));
      return true;
    });
    assert.match(await virsh(host, 'domstate', n.domain), /shut off/);
  });

  it('a planted overlay that another domain uses is refused (Permanent, names volume and remedy), left, not booted', async () => {
    const n = names('p4');
    await plantQcow2(n.overlayVolume);
    const planted = (await virsh(host, 'vol-path', '--pool', host.pool, n.overlayVolume)).trim();
    const xml =
      `<domain type='${host.domainType}'><name>other-${run}</name><memory unit='MiB'>32</memory>` +
      `<os><type arch='x86_64'>hvm</type></os><devices><disk type='file' device='disk'>` +
      `<driver name='qemu' type='qcow2'/><source file='${planted}'/><target dev='vda' bus='virtio'/></disk></devices></domain>`;
    await links.call((c, call) => c.domainDefineXml(xml, 0, call));
    await assert.rejects(createProxy(input('p4')), (err: unknown) => {
      assert.equal((err as { code?: string }).code, 'KVM2_DISK_NOT_OWN', String(err));
      assert.equal(errorKind(err), 'Permanent');
      const message = (err as Error).message;
      assert.match(message, new RegExp(`volume ${n.overlayVolume} in pool ${host.pool}`));
      assert.match(message, new RegExp(`domain other-${run} uses it`));
      assert.match(message, /virsh vol-delete/);
      return true;
    });
    assert.ok((await volumes()).includes(n.overlayVolume), 'the planted volume is left');
    const defined = (await virsh(host, 'list', '--all', '--name')).split('\n').map((l) => l.trim());
    assert.ok(!defined.includes(n.domain), 'no proxy domain was defined');
  });

  it('a retry of the same run reuses its own disk; a new run of the proxy replaces the old one', async () => {
    const n = names('p5');
    const first = await createProxy(input('p5'));
    assert.equal(first.replaced, undefined);
    const again = await createProxy(input('p5'));
    assert.equal(again.replaced, undefined, 'the same run: nothing replaced');
    assert.equal(again.defined, false);
    // The run ended without deleting its volumes (the domain went by hand); a new run starts.
    await virsh(host, 'destroy', n.domain);
    await virsh(host, 'undefine', n.domain);
    const next = await createProxy(input('p5', { createdAt: '2026-11-30T08:00:00Z' }));
    assert.ok(
      next.replaced?.some((r) => r.startsWith(`${n.overlayVolume}: `) && /another run/.test(r)),
      JSON.stringify(next.replaced),
    );
    assert.equal((await imageInfo(n.overlayVolume))['backing-filename'], base.path);
  });

  it('a base without its marker is refused before any volume is made', async () => {
    const n = names('p6');
    // Named as a base of the entry, but no marker: not a verified base.
    await virsh(host, 'vol-create-as', host.pool, `base-${entry}-nomarker.qcow2`, '16M', '--format', 'qcow2');
    const path = (await virsh(host, 'vol-path', '--pool', host.pool, `base-${entry}-nomarker.qcow2`)).trim();
    await assert.rejects(createProxy(input('p6', { base: { path, format: 'qcow2' } })), (err: unknown) => {
      assert.equal((err as { code?: string }).code, 'KVM2_BASE_UNVERIFIED', String(err));
      assert.equal(errorKind(err), 'Permanent');
      assert.match((err as Error).message, /it has no marker/);
      return true;
    });
    assert.ok(!(await volumes()).includes(n.overlayVolume));
  });

  it("a deleted proxy's console and QEMU logs (and rotated copies) are removed; other files stay", async () => {
    const n = names('p6');
    await createProxy(input('p6'));
    const other = `/var/log/libvirt/qemu/ep_${entry}_p66.log`;
    await inHost(host, [
      'sh',
      '-c',
      `touch '${n.consoleLogPath}' '${n.qemuLogPath}.0' '${n.consoleLogPath}.1' '${other}' && ls '${n.qemuLogPath}'`,
    ]);
    const deleted = await deleteProxy(input('p6'));
    assert.equal(deleted.logs, 'deleted');
    // Only p6's files go; the other proxies' of this file and p66 stay.
    const left = await inHost(host, ['sh', '-c', `ls /var/log/libvirt/qemu/ | grep '^ep_${entry}_p6' || true`]);
    assert.deepEqual(
      left.split('\n').filter((l) => l.trim() !== ''),
      [`ep_${entry}_p66.log`],
    );
  });
});
