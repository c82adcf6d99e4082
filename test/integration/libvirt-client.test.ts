/**
 * The libvirt client against a real libvirtd (a test host's socket, reached locally through the
 * host's mount namespace): every procedure of the typed API, a 400 MiB upload verified by sha256 of
 * the volume's file, failures mid-upload, and concurrency on one connection.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { LibvirtClient } from '../../lib/libvirt/client.ts';
import {
  AddressSource,
  DomainAffect,
  DomainState,
  ErrorNumber,
  MetadataType,
  UndefineFlags,
} from '../../lib/libvirt/constants.ts';
import { LibvirtError, LibvirtUploadSourceError } from '../../lib/libvirt/errors.ts';
import type { StoragePool } from '../../lib/libvirt/protocol.ts';
import { connectLocalSocket, hostPath, inHost, loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const MiB = 1024 * 1024;
const run = `${process.pid}-${Date.now().toString(36)}`;

async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 4 * MiB })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Writes `bytes` random bytes to a temp file and returns its path and sha256. */
async function randomFile(bytes: number, label: string): Promise<{ path: string; sha256: string }> {
  const path = join(tmpdir(), `ep-it-${label}-${run}.bin`);
  const h = createHash('sha256');
  const out = createWriteStream(path);
  for (let done = 0; done < bytes;) {
    const chunk = randomBytes(Math.min(4 * MiB, bytes - done));
    h.update(chunk);
    if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
    done += chunk.length;
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return { path, sha256: h.digest('hex') };
}

function rawVolXml(name: string, capacityBytes: number): string {
  return `<volume><name>${name}</name><capacity unit='bytes'>${capacityBytes}</capacity><allocation>0</allocation><target><format type='raw'/></target></volume>`;
}

describe('libvirt client against a real libvirtd', { timeout: 600_000 }, () => {
  let host: TestHost;
  let client: LibvirtClient;
  let pool: StoragePool;
  const files: string[] = [];

  before(async () => {
    host = loadTestHosts()[0]!;
    client = await LibvirtClient.connect(await connectLocalSocket(host), { label: host.name });
    pool = await client.storagePoolLookupByName(host.pool, { timeoutMs: 5000 });
  });
  after(async () => {
    await client?.close();
    for (const f of files) rmSync(f, { force: true });
  });

  async function freshVolume(label: string, capacity: number) {
    return client.storageVolCreateXml(pool, rawVolXml(`ep-it-${label}-${run}.raw`, capacity));
  }

  it('reports library and hypervisor versions', async () => {
    const lib = await client.getLibVersion();
    const hv = await client.getVersion();
    assert.ok(lib >= 9_000_000n, `libvirt version ${lib}`);
    assert.ok(hv > 1_000_000n, `hypervisor version ${hv}`);
  });

  it('pools: list all, lookup, info, refresh', async () => {
    const pools = await client.listAllStoragePools();
    assert.ok(pools.some((p) => p.name === host.pool));
    const info = await client.storagePoolGetInfo(pool);
    assert.equal(info.state, 2, 'pool is running');
    assert.ok(info.capacity > 0n && info.available <= info.capacity);
    await client.storagePoolRefresh(pool);
  });

  it('volumes: create, lookup, info, path, list, delete, then NotFound', async () => {
    const vol = await freshVolume('life', 3 * MiB);
    const again = await client.storageVolLookupByName(pool, vol.name);
    assert.equal(again.key, vol.key);
    const info = await client.storageVolGetInfo(vol);
    assert.equal(info.capacity, BigInt(3 * MiB));
    const path = await client.storageVolGetPath(vol);
    assert.ok(path.endsWith(vol.name));
    assert.ok((await client.storagePoolListAllVolumes(pool)).some((v) => v.name === vol.name));
    await client.storageVolDelete(vol);
    await assert.rejects(client.storageVolLookupByName(pool, vol.name), (err: unknown) => {
      assert.ok(err instanceof LibvirtError);
      assert.equal(err.libvirtCode, ErrorNumber.NO_STORAGE_VOL);
      assert.equal(err.kind, 'NotFound');
      return true;
    });
  });

  it('networks: lookup and DHCP leases', async () => {
    const net = await client.networkLookupByName(host.network);
    assert.equal(net.name, host.network);
    const leases = await client.networkGetDhcpLeases(net);
    assert.ok(Array.isArray(leases));
    await assert.rejects(
      client.networkLookupByName(`missing-${run}`),
      (err: unknown) => err instanceof LibvirtError && err.kind === 'NotFound',
    );
  });

  it('domains: define, lookups, XML, metadata, state, start, addresses, list, destroy, undefine', async () => {
    const name = `ep-it-dom-${run}`;
    const xml = `<domain type='${host.domainType}'><name>${name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices><interface type='network'><source network='${host.network}'/><model type='virtio'/></interface></devices></domain>`;
    const dom = await client.domainDefineXml(xml);
    try {
      assert.equal(dom.name, name);
      assert.equal((await client.domainLookupByUuid(dom.uuid)).name, name);
      const byName = await client.domainLookupByName(name);
      assert.deepEqual(Buffer.from(byName.uuid), Buffer.from(dom.uuid));
      assert.match(await client.domainGetXmlDesc(dom), new RegExp(`<name>${name}</name>`));
      const uri = 'https://egress-proxies.invalid/xmlns/test/1';
      await client.domainSetMetadata(dom, {
        type: MetadataType.ELEMENT,
        metadata: `<mark owner="u-${run}"/>`,
        key: 'ept',
        uri,
        flags: DomainAffect.CONFIG,
      });
      assert.match(
        await client.domainGetMetadata(dom, { type: MetadataType.ELEMENT, uri, flags: DomainAffect.CONFIG }),
        new RegExp(`owner="u-${run}"`),
      );
      await assert.rejects(
        client.domainGetMetadata(dom, {
          type: MetadataType.ELEMENT,
          uri: 'https://egress-proxies.invalid/other',
          flags: DomainAffect.CONFIG,
        }),
        (err: unknown) =>
          err instanceof LibvirtError && err.libvirtCode === ErrorNumber.NO_DOMAIN_METADATA && err.kind === 'NotFound',
      );
      assert.equal((await client.domainGetState(dom)).state, DomainState.SHUTOFF);
      await client.domainCreate(dom);
      assert.equal((await client.domainGetState(dom)).state, DomainState.RUNNING);
      const viaLease = await client.domainInterfaceAddresses(dom, AddressSource.LEASE);
      assert.ok(Array.isArray(viaLease));
      await assert.rejects(client.domainInterfaceAddresses(dom, AddressSource.AGENT), LibvirtError);
      assert.ok((await client.listAllDomains()).some((d) => d.name === name));
      await client.domainDestroy(dom);
      assert.equal((await client.domainGetState(dom)).state, DomainState.SHUTOFF);
    } finally {
      await client.domainDestroy(dom).catch(() => {});
      await client.domainUndefine(dom, UndefineFlags.NVRAM).catch(() => client.domainUndefine(dom));
    }
    await assert.rejects(
      client.domainLookupByName(name),
      (err: unknown) => err instanceof LibvirtError && err.kind === 'NotFound',
    );
  });

  it('downloads a small volume whole, and refuses more than maxBytes', async () => {
    const vol = await freshVolume('dl', 3000);
    try {
      const content = randomBytes(3000);
      await client.storageVolUpload(vol, Readable.from([content]));
      const back = await client.storageVolDownload(vol, { maxBytes: 4096 });
      assert.deepEqual(back, content);
      assert.equal(client.connection.openStreams, 0);
      assert.ok((await client.getLibVersion()) > 0n, 'the connection still answers after a download');
      const other = await LibvirtClient.connect(await connectLocalSocket(host), { label: 'dl-bound' });
      const otherVol = await other.storageVolLookupByName(pool, vol.name);
      await assert.rejects(other.storageVolDownload(otherVol, { maxBytes: 1000 }), /more than 1000 bytes/);
      assert.equal(other.connection.isDead, true);
    } finally {
      await client.storageVolDelete(vol);
    }
  });

  it('uploads 400 MiB and the volume file has the same sha256', async () => {
    const src = await randomFile(400 * MiB, 'u400');
    files.push(src.path);
    const vol = await freshVolume('u400', 400 * MiB);
    try {
      let progressCalls = 0;
      const res = await client.storageVolUpload(vol, createReadStream(src.path, { highWaterMark: MiB }), {
        onProgress: () => progressCalls++,
      });
      assert.equal(res.bytes, 400 * MiB);
      assert.ok(progressCalls >= 400, `progress reported ${progressCalls} times`);
      const onHost = hostPath(host, await client.storageVolGetPath(vol));
      assert.equal(await sha256File(onHost), src.sha256);
      assert.equal(client.connection.openStreams, 0);
      assert.equal(client.connection.pendingCalls, 0);
    } finally {
      await client.storageVolDelete(vol);
    }
  });

  it('a source error mid-upload aborts the stream and leaves the connection usable', async () => {
    const vol = await freshVolume('srcerr', 64 * MiB);
    try {
      let sent = 0;
      const source = new Readable({
        read() {
          if (sent >= 8 * MiB) {
            this.destroy(new Error('mirror went away'));
            return;
          }
          sent += MiB;
          this.push(randomBytes(MiB));
        },
      });
      await assert.rejects(client.storageVolUpload(vol, source, { abortTimeoutMs: 5000 }), (err: unknown) => {
        assert.ok(err instanceof LibvirtUploadSourceError, String(err));
        assert.match(err.message, /mirror went away/);
        return true;
      });
      assert.equal(client.connection.isDead, false);
      assert.equal(client.connection.openStreams, 0);
      assert.ok((await client.getLibVersion()) > 0n);
    } finally {
      await client.storageVolDelete(vol);
    }
  });

  it('a pool too small for the upload ends it with the daemon error', async () => {
    const dir = `/var/lib/libvirt/ep-small-${run}`;
    const poolName = `ep-small-${run}`;
    await inHost(host, ['sh', '-c', `mkdir -p ${dir} && mount -t tmpfs -o size=8m tmpfs ${dir}`]);
    await inHost(host, ['virsh', '-q', 'pool-create-as', poolName, 'dir', '--target', dir]);
    try {
      const small = await client.storagePoolLookupByName(poolName);
      const vol = await client.storageVolCreateXml(small, rawVolXml(`full-${run}.raw`, 64 * MiB));
      const started = Date.now();
      const source = Readable.from(
        (function* () {
          for (let i = 0; i < 64; i++) yield randomBytes(MiB);
        })(),
      );
      await assert.rejects(client.storageVolUpload(vol, source), (err: unknown) => {
        assert.ok(err instanceof LibvirtError, String(err));
        assert.match(err.message, /space|ENOSPC|write/i);
        return true;
      });
      assert.ok(Date.now() - started < 30_000);
      assert.equal(client.connection.isDead, false);
      assert.equal(client.connection.openStreams, 0);
      assert.ok((await client.getLibVersion()) > 0n, 'the connection still answers');
      await client.storageVolDelete(vol);
    } finally {
      await inHost(host, ['virsh', '-q', 'pool-destroy', poolName]).catch(() => {});
      await inHost(host, ['sh', '-c', `umount ${dir}; rmdir ${dir}`]).catch(() => {});
    }
  });

  // libvirt 9.0 lets STORAGE_VOL_DELETE unlink a volume under a running upload: the daemon keeps
  // writing into the unlinked file and confirms the finish. The client cannot see that on the
  // stream; what it must do is settle promptly, leak nothing, and leave the connection usable. The
  // provider's post-upload verification (lookup + size + digest before writing the marker) is what
  // catches the loss, so this test also proves that a lookup after such an upload says NotFound.
  it('a volume deleted mid-upload: the upload settles promptly, nothing leaks, the loss is visible to a lookup', async () => {
    const vol = await freshVolume('delmid', 256 * MiB);
    let produced = 0;
    const source = new Readable({
      read() {
        if (produced >= 256 * MiB) return void this.push(null);
        produced += MiB;
        setTimeout(() => this.push(randomBytes(MiB)), 5); // slow enough for the delete to land mid-upload
      },
    });
    const upload = client.storageVolUpload(vol, source);
    const outcome = upload.then(
      () => 'finished' as const,
      (err: unknown) => err,
    );
    const other = await LibvirtClient.connect(await connectLocalSocket(host), { label: 'deleter' });
    try {
      const waitStart = Date.now();
      while (produced < 32 * MiB && Date.now() - waitStart < 30_000) await new Promise((r) => setTimeout(r, 20));
      const deleted = await other.storageVolDelete(vol).then(
        () => 'deleted' as const,
        (err: unknown) => err,
      );
      const started = Date.now();
      const result = await outcome;
      assert.ok(Date.now() - started < 60_000, 'the upload settled within its bound');
      if (deleted === 'deleted') {
        if (result !== 'finished') assert.ok(result instanceof LibvirtError, String(result));
        await assert.rejects(
          other.storageVolLookupByName(pool, vol.name),
          (err: unknown) => err instanceof LibvirtError && err.kind === 'NotFound',
        );
      } else {
        assert.ok(deleted instanceof LibvirtError, String(deleted));
        assert.equal(result, 'finished');
      }
      assert.equal(client.connection.openStreams, 0);
      assert.equal(client.connection.pendingCalls, 0);
      assert.ok((await client.getLibVersion()) > 0n, 'the connection still answers');
    } finally {
      await other.close();
      source.destroy();
      await client.storageVolDelete(vol).catch(() => {});
    }
  });

  it('two uploads and 50 short calls run concurrently on one connection', async () => {
    const a = await randomFile(64 * MiB, 'ca');
    const b = await randomFile(64 * MiB, 'cb');
    files.push(a.path, b.path);
    const va = await freshVolume('ca', 64 * MiB);
    const vb = await freshVolume('cb', 64 * MiB);
    try {
      const shortCalls = Array.from({ length: 50 }, (_, i) =>
        i % 2 === 0 ? client.getLibVersion().then(() => 1) : client.storagePoolGetInfo(pool).then(() => 1),
      );
      const results = await Promise.all([
        client.storageVolUpload(va, createReadStream(a.path)),
        client.storageVolUpload(vb, createReadStream(b.path)),
        ...shortCalls,
      ]);
      assert.equal(results.length, 52);
      assert.equal(await sha256File(hostPath(host, await client.storageVolGetPath(va))), a.sha256);
      assert.equal(await sha256File(hostPath(host, await client.storageVolGetPath(vb))), b.sha256);
    } finally {
      await client.storageVolDelete(va);
      await client.storageVolDelete(vb);
    }
  });
});
