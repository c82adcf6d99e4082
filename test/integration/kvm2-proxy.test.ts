/**
 * The kvm2 proxy operations against a real libvirtd over SSH (test host ep-h1): create converges,
 * the domain XML and seed read back as built, state and address reading (H3), listing by mark,
 * delete is idempotent and guarded (no adoption of unmarked or foreign domains), and a pool too
 * small yields InsufficientCapacity. The guest here has no OS (an empty qcow2 base), which is
 * what these operations need; the end-to-end boot with Squid is another test.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { errorKind } from '../../lib/errors.ts';
import { AddressSource } from '../../lib/libvirt/constants.ts';
import { readAddress } from '../../lib/kvm2/proxy/addresses.ts';
import { createProxy } from '../../lib/kvm2/proxy/create.ts';
import type { CreateProxyInput } from '../../lib/kvm2/proxy/create.ts';
import { deleteProxy } from '../../lib/kvm2/proxy/delete.ts';
import { parseOwnerMetadata } from '../../lib/kvm2/proxy/domain-xml.ts';
import {
  InsufficientCapacity,
  Kvm2AddressUnreadableError,
  Kvm2AdoptionRefusedError,
  Kvm2HostSetupError,
} from '../../lib/kvm2/errors.ts';
import { getProxy, listProxies } from '../../lib/kvm2/proxy/inspect.ts';
import { proxyObjectNames } from '../../lib/kvm2/proxy/object-names.ts';
import { CONSOLE_TAIL_MAX_BYTES, readConsoleTail } from '../../lib/kvm2/proxy/console.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { hostTarget, inHost, loadTestHosts } from '../support/testhosts.ts';
import { sleep, until, within } from '../support/bounded.ts';
import { plantVerifiedBase, removeVerifiedBase } from '../support/verified-base.ts';
import type { VerifiedBase } from '../support/verified-base.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const entry = `t${run}`;
const owner = `uid-${run}`;

describe('kvm2 proxy operations on a real host', { timeout: 300_000 }, () => {
  let host: TestHost;
  let links: HostLinks;
  let tmp: string;
  let basePath: string;
  let base: VerifiedBase | undefined;
  const baseName = `base-${entry}-empty.qcow2`;

  const input = (name: string, over: Partial<CreateProxyInput> = {}): CreateProxyInput => ({
    links,
    ownerUid: owner,
    entry,
    name,
    pool: host.pool,
    network: host.network,
    domainType: host.domainType,
    vcpus: 1,
    memoryMiB: 128,
    diskGiB: 1,
    base: { path: basePath, format: 'qcow2' },
    squid: { port: 3128, allowedClientCidrs: ['10.0.0.0/8'] },
    createdAt: '2026-11-29T12:00:00Z',
    reserveBytes: 16 * 1024 * 1024,
    rpcTimeoutMs: 20_000,
    ...over,
  });

  before(async () => {
    host = loadTestHosts()[0]!;
    links = new HostLinks(hostTarget(host));
    tmp = await mkdtemp(join(tmpdir(), 'ep-kvm2-'));
    base = await plantVerifiedBase(links, host.pool, entry);
    basePath = base.path;
  });

  after(async () => {
    for (const name of ['alpha', 'beta', 'gamma']) await deleteProxy({ ...input(name), links }).catch(() => {});
    await inHost(host, [
      'sh',
      '-c',
      `for d in $(virsh -q list --all --name | grep '^ep_${entry}_'); do virsh -q destroy $d; virsh -q undefine $d; done; true`,
    ]).catch(() => {});
    if (base) await removeVerifiedBase(links, host.pool, base);
    links.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('create twice converges to one running domain with one overlay and one seed', async () => {
    const first = await createProxy(input('alpha'));
    assert.equal(first.defined, true);
    assert.equal(first.started, true);
    const second = await createProxy(input('alpha'));
    assert.equal(second.defined, false);
    assert.equal(second.started, false);
    assert.equal(second.uuid, first.uuid);
    const names = proxyObjectNames({ ownerUid: owner, entry, name: 'alpha' });
    const out = await inHost(host, ['virsh', '-q', 'list', '--all', '--name']);
    assert.equal(out.split('\n').filter((l) => l.trim() === names.domain).length, 1);
    const vols = await links.call(async (c, call) =>
      (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, call), call)).map((v) => v.name),
    );
    assert.equal(vols.filter((v) => v === names.overlayVolume).length, 1);
    assert.equal(vols.filter((v) => v === names.seedVolume).length, 1);
    assert.equal(links.stats().inFlight, 0);
  });

  it('the defined XML and the uploaded seed read back as built', async () => {
    const names = proxyObjectNames({ ownerUid: owner, entry, name: 'alpha' });
    const xml = await inHost(host, ['virsh', 'dumpxml', names.domain]);
    const seedDisk =
      /<disk[^>]*>(?:(?!<\/disk>)[\s\S])*?\.seed\.iso(?:(?!<\/disk>)[\s\S])*?<\/disk>/.exec(xml)?.[0] ?? '';
    assert.match(seedDisk, /bus=['"]virtio['"]/, 'seed on a virtio disk');
    assert.match(seedDisk, /<readonly\/>/, 'seed read-only');
    assert.match(xml, new RegExp(`<mac address=['"]${names.mac}['"]`));
    assert.deepEqual(parseOwnerMetadata(xml), {
      ownerUid: owner,
      proxyName: 'alpha',
      providerEntry: entry,
      createdAt: '2026-11-29T12:00:00Z',
    });
    const iso = join(tmp, 'seed.iso');
    const bytes = await links.call(async (c, call) => {
      const pool = await c.storagePoolLookupByName(host.pool, call);
      return c.storageVolDownload(await c.storageVolLookupByName(pool, names.seedVolume, call), {
        maxBytes: 4 * 1024 * 1024,
      });
    });
    await writeFile(iso, bytes);
    const { stdout: userData } = await pexec('isoinfo', ['-J', '-x', '/user-data', '-i', iso], { timeout: 10_000 });
    assert.match(userData, /^#cloud-config/);
    assert.match(userData, /http_port 3128/);
    assert.match(userData, /10\.0\.0\.0\/8/);
    const { stdout: metaData } = await pexec('isoinfo', ['-J', '-x', '/meta-data', '-i', iso], { timeout: 10_000 });
    assert.match(metaData, /local-hostname: alpha/);
  });

  it('a running guest with no agent and no lease has "no address yet", not an error', async () => {
    const status = await getProxy({ links, ownerUid: owner, entry, name: 'alpha', network: host.network });
    assert.equal(status.state, 'Running');
    assert.equal(status.address?.ip, undefined);
    assert.ok(
      status.address!.failures.some((f) => f.source === 'agent'),
      JSON.stringify(status.address),
    );
  });

  it('every address source failing is a Transient error (H3)', async () => {
    const names = proxyObjectNames({ ownerUid: owner, entry, name: 'alpha' });
    await links.call(async (c, call) => {
      const dom = await c.domainLookupByName(names.domain, call);
      await c.domainDestroy(dom, 0, call); // a stopped domain answers no interface query
      // Sanity: the sources do fail on their own.
      await assert.rejects(c.domainInterfaceAddresses(dom, AddressSource.LEASE, call));
      await assert.rejects(
        readAddress({ client: c, domain: dom, network: `missing-${run}`, call }),
        (err: unknown) => err instanceof Kvm2AddressUnreadableError && errorKind(err) === 'Transient',
      );
      await c.domainCreate(dom, 0, call);
    });
  });

  it('a missing proxy is Missing', async () => {
    assert.deepEqual(await getProxy({ links, ownerUid: owner, entry, name: 'nobody', network: host.network }), {
      state: 'Missing',
    });
  });

  it('listing by mark finds our proxies of the entry and nothing else', async () => {
    await createProxy(input('beta'));
    const unmarked = proxyObjectNames({ ownerUid: owner, entry, name: 'gamma' }).domain;
    await defineBare(unmarked);
    const listed = await listProxies(links, { entry, ownerUid: owner });
    assert.deepEqual(listed.map((p) => p.proxyName).sort(), ['alpha', 'beta']);
    assert.ok(listed.every((p) => p.ownerUid === owner && p.createdAt === '2026-11-29T12:00:00Z'));
    assert.deepEqual(await listProxies(links, { entry: `other${run}` }), []);
  });

  it('delete and create refuse an unmarked domain, and leave it', async () => {
    const bare = proxyObjectNames({ ownerUid: owner, entry, name: 'gamma' }).domain;
    await assert.rejects(deleteProxy({ ...input('gamma'), links }), Kvm2AdoptionRefusedError);
    await assert.rejects(createProxy(input('gamma')), Kvm2AdoptionRefusedError);
    assert.match(await inHost(host, ['virsh', '-q', 'list', '--all', '--name']), new RegExp(bare));
  });

  it('delete refuses a proxy of another owner UID, and leaves it', async () => {
    await assert.rejects(deleteProxy({ ...input('beta'), ownerUid: 'someone-else' }), (err: unknown) => {
      assert.ok(err instanceof Kvm2AdoptionRefusedError);
      assert.equal(errorKind(err), 'Permanent');
      assert.match(err.message, new RegExp(owner));
      return true;
    });
    assert.equal(
      (await getProxy({ links, ownerUid: owner, entry, name: 'beta', network: host.network })).state,
      'Running',
    );
  });

  it('delete twice is fine, and the base survives', async () => {
    const first = await deleteProxy({ ...input('beta'), shutdownGraceMs: 1000 });
    assert.deepEqual(
      { ...first, logs: undefined },
      {
        domain: 'deleted',
        overlay: 'deleted',
        seed: 'deleted',
        ownerRecord: 'deleted',
        logs: undefined,
      },
    );
    assert.deepEqual(await deleteProxy(input('beta')), {
      domain: 'absent',
      overlay: 'absent',
      seed: 'absent',
      ownerRecord: 'absent',
      logs: 'absent',
    });
    const vols = await links.call(async (c, call) =>
      (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, call), call)).map((v) => v.name),
    );
    assert.ok(vols.includes(baseName));
  });

  it("a create's domain start waits for one of the host's start slots (maxConcurrentStarts)", async () => {
    const gated = new HostLinks(hostTarget(host), { maxConcurrentStarts: 1 });
    let release!: () => void;
    const held = gated.start(() => new Promise<void>((r) => (release = r)));
    try {
      let settled = false;
      const creating = createProxy({ ...input('beta'), links: gated }).finally(() => (settled = true));
      const names = proxyObjectNames({ ownerUid: owner, entry, name: 'beta' });
      // Defined, not started, while the only start slot is taken.
      await until(() => gated.stats().starts.queued === 1, 20_000, 'the create queued for a start slot');
      assert.equal((await inHost(host, ['virsh', 'domstate', names.domain])).trim(), 'shut off');
      await sleep(500);
      assert.equal(settled, false, 'the create waits for the slot');
      release();
      const created = await within(creating, 20_000, 'the create after the slot was given back');
      assert.equal(created.started, true);
      assert.equal((await inHost(host, ['virsh', 'domstate', names.domain])).trim(), 'running');
      assert.equal(gated.stats().starts.maxInFlight, 1);
    } finally {
      release();
      await held;
      await deleteProxy({ ...input('beta'), links: gated }).catch(() => {});
      gated.close();
    }
  });

  it("without maxConcurrentStarts, the host's start slots are its CPUs (read before the first start)", async () => {
    // `links` (no maxConcurrentStarts) has started alpha and beta above.
    const cpus = Number(/CPU\(s\):\s+(\d+)/.exec(await inHost(host, ['virsh', 'nodeinfo']))?.[1]);
    assert.ok(cpus >= 1, 'virsh nodeinfo gives the CPUs');
    assert.equal(links.stats().starts.slots, cpus);
    assert.equal(links.stats().starts.inFlight, 0);
  });

  it('a pool without room yields InsufficientCapacity with needed and available bytes', async () => {
    const dir = `/var/lib/libvirt/ep-tiny-${run}`;
    const poolName = `ep-tiny-${run}`;
    await inHost(host, ['sh', '-c', `mkdir -p ${dir} && mount -t tmpfs -o size=2m tmpfs ${dir}`]);
    await inHost(host, ['virsh', '-q', 'pool-create-as', poolName, 'dir', '--target', dir]);
    try {
      // Overlays are backed by a verified base of their own pool.
      const tinyBase = await plantVerifiedBase(links, poolName, entry);
      const over = {
        pool: poolName,
        reserveBytes: 64 * 1024 * 1024,
        base: { path: tinyBase.path, format: 'qcow2' as const },
      };
      await assert.rejects(createProxy(input('delta', over)), (err: unknown) => {
        assert.ok(err instanceof InsufficientCapacity, String(err));
        assert.ok(err.neededBytes > err.availableBytes && err.availableBytes >= 0);
        return true;
      });
    } finally {
      await inHost(host, ['virsh', '-q', 'pool-destroy', poolName]).catch(() => {});
      await inHost(host, ['sh', '-c', `umount ${dir}; rmdir ${dir}`]).catch(() => {});
    }
  });

  it('a network or pool the host lacks is a Permanent KVM2_HOST_SETUP naming the field', async () => {
    await assert.rejects(createProxy(input('echo', { network: `nonet-${run}` })), (err: unknown) => {
      assert.ok(err instanceof Kvm2HostSetupError, String(err));
      assert.equal(err.kind, 'Permanent');
      assert.match(err.message, /network "nonet-[a-z0-9]+" \(providers\[\]\.network\)/);
      return true;
    });
    await deleteProxy({ links, ownerUid: owner, entry, name: 'echo', pool: host.pool });
    await assert.rejects(createProxy(input('foxtrot', { pool: `nopool-${run}` })), (err: unknown) => {
      assert.ok(err instanceof Kvm2HostSetupError, String(err));
      assert.match(err.message, /storage pool "nopool-[a-z0-9]+" \(providers\[\]\.storagePool\)/);
      return true;
    });
  });

  it("the console log's tail is read over SSH: last lines, control characters dropped, bounded", async () => {
    const id = { ownerUid: owner, entry, name: 'golf' };
    const path = proxyObjectNames(id).consoleLogPath;
    const filler = 'x'.repeat(100) + '\n';
    const script = `mkdir -p "$(dirname ${path})" && { for i in $(seq 1 10000); do printf '${filler.replace('\n', '\\n')}'; done; printf 'SeaBIOS\\033[2J\\r\\nBooting from Hard Disk...\\nNo bootable device.\\n'; } > ${path}`;
    await inHost(host, ['sh', '-c', script]);
    const session = (await links.dedicated('health')).session;
    try {
      const lines = await readConsoleTail(session, id, { lines: 3, timeoutMs: 10_000 });
      assert.deepEqual(lines, ['SeaBIOS[2J', 'Booting from Hard Disk...', 'No bootable device.']);
      const all = await readConsoleTail(session, id, { lines: 100_000 });
      assert.ok(all.join('\n').length <= CONSOLE_TAIL_MAX_BYTES, 'at most the bounded tail is read');
      assert.ok(all.length > 50 && all.length < 100, `${all.length} lines from the last 8 KiB`);
      assert.deepEqual(await readConsoleTail(session, { ...id, name: 'nolog' }), [], 'no log yet: no lines');
    } finally {
      session.kill(new Error('test done'));
      await inHost(host, ['rm', '-f', path]);
    }
  });

  async function defineBare(name: string): Promise<void> {
    const xml = `<domain type='${host.domainType}'><name>${name}</name><memory unit='MiB'>32</memory><os><type arch='x86_64'>hvm</type></os></domain>`;
    await links.call((c, call) => c.domainDefineXml(xml, 0, call));
  }
});
