/**
 * The base-image cache of the kvm2 provider (lib/kvm2/images/ensure.ts) against a real test host (ep-h1:
 * sshd and libvirtd in their own namespaces) and a real HTTP mirror on 127.0.0.1
 * (test/support/mirror.ts). Volumes are checked with a libvirt client of the test's own (the
 * host's socket, reached locally), and the uploaded file's sha256 is computed from the host's
 * file system. Every entry name is unique to the run; every volume the run made is deleted in
 * `after`. Each test names the behaviour it proves.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { errorKind } from '../../lib/errors.ts';
import { LibvirtClient } from '../../lib/libvirt/client.ts';
import { LibvirtError } from '../../lib/libvirt/errors.ts';
import type { StoragePool, StorageVol } from '../../lib/libvirt/protocol.ts';
import {
  ImageAbortedError,
  ImageConflictError,
  ImageDigestMismatchError,
  ImageDownloadError,
  ImageFormatError,
  InsufficientCapacity,
} from '../../lib/kvm2/errors.ts';
import { ensureImage } from '../../lib/kvm2/images/ensure.ts';
import type { EnsureImageInput, ImageProgress, ImageSpec, ImageTimeouts } from '../../lib/kvm2/images/ensure.ts';
import { baseVolumeName, markerVolumeName } from '../../lib/kvm2/images/base-names.ts';
import type { Link } from '../../lib/hostlink/link.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { ImageMirror, sha256Hex } from '../support/mirror.ts';
import { connectLocalSocket, hostPath, inHost, loadTestHosts, hostTarget } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';
import { within } from '../support/bounded.ts';

const MiB = 1024 * 1024;
/** Unique per run, and an identifier (entry names are built from it). */
const RUN = `t${process.pid.toString(36)}${Date.now().toString(36)}`;

const logger = process.env.EP_TEST_LOG
  ? {
      info: (o: object, m: string) => console.log('info', m, JSON.stringify(o)),
      warn: (o: object, m: string) => console.log('warn', m, JSON.stringify(o)),
    }
  : undefined;

const TIMEOUTS: ImageTimeouts = {
  rpcMs: 15_000,
  downloadHeadersMs: 5_000,
  downloadBodyIdleMs: 1_500,
  downloadTotalMs: 60_000,
};

/** HostLinks that remember their dedicated links, so a test can prove none is left open. */
class TrackingLinks extends HostLinks {
  readonly opened: Link[] = [];
  override async dedicated(purpose: 'bulk' | 'health', signal?: AbortSignal): Promise<Link> {
    const link = await super.dedicated(purpose, signal);
    this.opened.push(link);
    return link;
  }
  openDedicated(): Link[] {
    return this.opened.filter((l) => !l.isDead);
  }
}

describe('kvm2 image cache against a real libvirtd and a real HTTP mirror', { timeout: 300_000 }, () => {
  let host: TestHost;
  let links: TrackingLinks;
  let mirror: ImageMirror;
  let checker: LibvirtClient;
  let pool: StoragePool;
  let entryCount = 0;
  const madeByRun: string[] = [];

  /** A fresh entry name for one test. */
  function entry(): string {
    return `${RUN}-${++entryCount}`;
  }

  function input(e: string, image: ImageSpec, extra: Partial<EnsureImageInput> = {}): EnsureImageInput {
    madeByRun.push(baseVolumeName(e, image.key, image.format), markerVolumeName(e, image.key, image.format));
    return { entry: e, pool: host.pool, image, links, timeouts: TIMEOUTS, logger, ...extra };
  }

  async function lookup(name: string, p: StoragePool = pool): Promise<StorageVol | undefined> {
    try {
      return await checker.storageVolLookupByName(p, name, { timeoutMs: 10_000 });
    } catch (err) {
      if (err instanceof LibvirtError && err.kind === 'NotFound') return undefined;
      throw err;
    }
  }

  async function contentOf(name: string): Promise<Buffer> {
    const vol = await lookup(name);
    assert.ok(vol, `volume ${name} exists`);
    return checker.storageVolDownload(vol, { timeoutMs: 30_000, maxBytes: 64 * MiB });
  }

  /** sha256 of the volume's file, read from the host's file system. */
  async function fileSha256(name: string): Promise<string> {
    const vol = await lookup(name);
    assert.ok(vol, `volume ${name} exists`);
    const path = await checker.storageVolGetPath(vol);
    return createHash('sha256')
      .update(readFileSync(hostPath(host, path)))
      .digest('hex');
  }

  async function createWithContent(name: string, bytes: Buffer): Promise<StorageVol> {
    madeByRun.push(name);
    const vol = await checker.storageVolCreateXml(
      pool,
      `<volume><name>${name}</name><capacity unit='bytes'>${bytes.length}</capacity><target><format type='raw'/></target></volume>`,
    );
    await checker.storageVolUpload(vol, Readable.from([bytes]), { timeoutMs: 30_000 });
    return vol;
  }

  /**
   * The last upload link was closed politely after the failure: the daemon confirmed the stream
   * abort (a link killed for an unconfirmed abort or a timeout would carry that reason instead).
   */
  function assertUploadAbortedPolitely(): void {
    const link = links.opened.at(-1);
    assert.ok(link, 'an upload link was opened');
    assert.ok(link.isDead);
    assert.match(String(link.deadReason?.message), /closed by the client|bulk link closed/);
  }

  /** Nothing of `e`/`key` is left in the pool, and nothing of the link pool is left busy or open. */
  async function assertNothingLeft(e: string, key: string, format: 'raw' | 'qcow2' = 'raw'): Promise<void> {
    assert.equal(await lookup(baseVolumeName(e, key, format)), undefined, 'no base left');
    assert.equal(await lookup(markerVolumeName(e, key, format)), undefined, 'no marker left');
    const stats = links.stats();
    assert.equal(stats.inFlight, 0, 'no call in flight');
    assert.equal(stats.queued, 0, 'no call queued');
    assert.deepEqual(links.openDedicated(), [], 'no dedicated link left open');
  }

  before(async () => {
    host = loadTestHosts().find((h) => h.name === 'ep-h1') ?? loadTestHosts()[0]!;
    links = new TrackingLinks(hostTarget(host), {
      dial: { connectTimeoutMs: 5_000, readyTimeoutMs: 10_000 },
    });
    mirror = await ImageMirror.start();
    checker = await LibvirtClient.connect(await connectLocalSocket(host), { label: `${host.name}/checker` });
    pool = await checker.storagePoolLookupByName(host.pool, { timeoutMs: 10_000 });
  });

  after(async () => {
    if (checker) {
      for (const name of new Set(madeByRun)) {
        const vol = await lookup(name).catch(() => undefined);
        if (vol) await checker.storageVolDelete(vol, 0, { timeoutMs: 10_000 }).catch(() => {});
      }
      await checker.close();
    }
    links?.close();
    await mirror?.close();
  });

  // --- a shared image for the hit and edit tests -------------------------------------------
  const shared = { entry: '', key: 'img', bytes: Buffer.alloc(0), url: '', path: '' };

  it('a cold ensure downloads once, verifies the digest and uploads exactly the source bytes', async () => {
    shared.entry = entry();
    shared.bytes = randomBytes(3 * MiB + 123);
    shared.path = `/${shared.entry}/img.raw`;
    shared.url = mirror.serve(shared.path, shared.bytes);
    const sha256 = sha256Hex(shared.bytes);
    const progress: ImageProgress[] = [];
    const got = await ensureImage(
      input(
        shared.entry,
        { key: shared.key, url: shared.url, sha256, format: 'raw' },
        { onProgress: (p) => progress.push(p) },
      ),
    );
    assert.equal(got.cached, false);
    assert.equal(got.sha256, sha256);
    assert.equal(got.sizeBytes, shared.bytes.length);
    assert.equal(got.volumeName, `base-${shared.entry}-img.raw`);
    assert.equal(got.format, 'raw');
    assert.equal(got.url, shared.url);
    assert.equal(mirror.requests(shared.path), 1);
    assert.equal(await fileSha256(got.volumeName), sha256, 'the volume file on the host is the source');
    assert.ok(got.path.endsWith(`/${got.volumeName}`), got.path);

    const marker = JSON.parse(
      (await contentOf(markerVolumeName(shared.entry, 'img', 'raw'))).toString('utf8'),
    ) as Record<string, unknown>;
    assert.equal(marker.v, 1);
    assert.equal(marker.sha256, sha256);
    assert.equal(marker.url, shared.url);
    assert.equal(marker.sizeBytes, shared.bytes.length);
    assert.equal(marker.format, 'raw');
    assert.equal(marker.entry, shared.entry);
    assert.equal(marker.key, 'img');
    assert.ok(!Number.isNaN(Date.parse(String(marker.verifiedAt))));

    assert.ok(progress.length >= 1);
    const last = progress.at(-1)!;
    assert.equal(last.bytes, shared.bytes.length);
    assert.equal(last.totalBytes, shared.bytes.length);
    assert.ok(last.bytesPerSecond > 0);
    assert.deepEqual(links.openDedicated(), []);
  });

  it('a second ensure is a cache hit: no request to the mirror', async () => {
    const got = await ensureImage(
      input(shared.entry, { key: 'img', url: shared.url, sha256: sha256Hex(shared.bytes), format: 'raw' }),
    );
    assert.equal(got.cached, true);
    assert.equal(got.sha256, sha256Hex(shared.bytes));
    assert.equal(got.sizeBytes, shared.bytes.length);
    assert.equal(mirror.requests(shared.path), 1);
    // Without a configured digest, the URL alone identifies the image.
    const again = await ensureImage(input(shared.entry, { key: 'img', url: shared.url, format: 'raw' }));
    assert.equal(again.cached, true);
    assert.equal(again.sha256, sha256Hex(shared.bytes));
    assert.equal(mirror.requests(shared.path), 1);
  });

  it('a changed sha256 is refused (Permanent, both values named) and the base and marker survive', async () => {
    const base = baseVolumeName(shared.entry, 'img', 'raw');
    const markerName = markerVolumeName(shared.entry, 'img', 'raw');
    const markerBefore = await contentOf(markerName);
    const other = 'ab'.repeat(32);
    await assert.rejects(
      ensureImage(input(shared.entry, { key: 'img', url: shared.url, sha256: other, format: 'raw' })),
      (err: unknown) => {
        assert.ok(err instanceof ImageConflictError, String(err));
        assert.equal(err.kind, 'Permanent');
        assert.equal(err.code, 'KVM2_IMAGE_CONFLICT');
        assert.equal(err.field, 'sha256');
        assert.ok(err.message.includes(other), err.message);
        assert.ok(err.message.includes(sha256Hex(shared.bytes)), err.message);
        assert.match(err.message, /new image key/);
        return true;
      },
    );
    assert.equal(mirror.requests(shared.path), 1);
    assert.equal(await fileSha256(base), sha256Hex(shared.bytes), 'the base is untouched');
    assert.deepEqual(await contentOf(markerName), markerBefore, 'the marker is unchanged');
  });

  it('a changed URL is refused (Permanent, both values named) and the base and marker survive', async () => {
    const base = baseVolumeName(shared.entry, 'img', 'raw');
    const markerName = markerVolumeName(shared.entry, 'img', 'raw');
    const markerBefore = await contentOf(markerName);
    const newPath = `/${shared.entry}/img-v2.raw`;
    const newUrl = mirror.serve(newPath, randomBytes(MiB));
    await assert.rejects(
      ensureImage(input(shared.entry, { key: 'img', url: newUrl, format: 'raw' })),
      (err: unknown) => {
        assert.ok(err instanceof ImageConflictError, String(err));
        assert.equal(errorKind(err), 'Permanent');
        assert.equal(err.field, 'url');
        assert.ok(err.message.includes(newUrl) && err.message.includes(shared.url), err.message);
        return true;
      },
    );
    assert.equal(mirror.requests(newPath), 0, 'nothing downloaded');
    assert.equal(await fileSha256(base), sha256Hex(shared.bytes), 'the base is untouched');
    assert.deepEqual(await contentOf(markerName), markerBefore, 'the marker is unchanged');
  });

  it('two concurrent cold ensures of one image share one download and one upload', async () => {
    const e = entry();
    const bytes = randomBytes(2 * MiB);
    const path = `/${e}/img.raw`;
    const url = mirror.serve(path, bytes);
    const spec: ImageSpec = { key: 'img', url, sha256: sha256Hex(bytes), format: 'raw' };
    const uploadsBefore = links.opened.length;
    const [a, b] = await Promise.all([ensureImage(input(e, spec)), ensureImage(input(e, spec))]);
    assert.equal(mirror.requests(path), 1);
    assert.equal(links.opened.length - uploadsBefore, 1, 'one upload link');
    assert.deepEqual(a, b);
    assert.equal(await fileSha256(a.volumeName), sha256Hex(bytes));
    const c = await ensureImage(input(e, spec));
    assert.equal(c.cached, true);
    assert.equal(mirror.requests(path), 1);
  });

  it('a foreign base-<key>.qcow2 volume is left untouched (H4: bases are per entry)', async () => {
    const e = entry();
    const key = `k${RUN}`;
    const foreignName = `base-${key}.qcow2`;
    const foreignBytes = randomBytes(64 * 1024);
    await createWithContent(foreignName, foreignBytes);
    const bytes = randomBytes(MiB);
    const url = mirror.serve(`/${e}/img.raw`, bytes);
    const got = await ensureImage(input(e, { key, url, format: 'raw' }));
    assert.equal(got.volumeName, `base-${e}-${key}.raw`);
    assert.equal(got.cached, false);
    assert.deepEqual(await contentOf(foreignName), foreignBytes, 'the foreign volume is untouched');
  });

  it('the mirror dying mid-body ends cleanly: Transient, no base, no marker, no link left; a re-run converges', async () => {
    const e = entry();
    const bytes = randomBytes(4 * MiB);
    const path = `/${e}/img.raw`;
    const url = mirror.serve(path, bytes, { kind: 'die', afterBytes: MiB + 7 });
    const spec: ImageSpec = { key: 'img', url, sha256: sha256Hex(bytes), format: 'raw' };
    await assert.rejects(within(ensureImage(input(e, spec)), 30_000, 'ensure'), (err: unknown) => {
      assert.ok(err instanceof ImageDownloadError, String(err));
      assert.equal(errorKind(err), 'Transient');
      return true;
    });
    await assertNothingLeft(e, 'img');
    assertUploadAbortedPolitely();
    mirror.setMode(path, { kind: 'normal' });
    const got = await ensureImage(input(e, spec));
    assert.equal(got.cached, false);
    assert.equal(await fileSha256(got.volumeName), sha256Hex(bytes));
    assert.equal(mirror.requests(path), 2);
  });

  it('the mirror stalling mid-body ends by the body idle bound: Transient, nothing left', async () => {
    const e = entry();
    const bytes = randomBytes(4 * MiB);
    const url = mirror.serve(`/${e}/img.raw`, bytes, { kind: 'stall', afterBytes: MiB });
    const started = Date.now();
    await assert.rejects(
      within(ensureImage(input(e, { key: 'img', url, format: 'raw' })), 30_000, 'ensure'),
      (err: unknown) => {
        assert.ok(err instanceof ImageDownloadError, String(err));
        assert.equal(errorKind(err), 'Transient');
        assert.match(err.message, /stalled/);
        return true;
      },
    );
    assert.ok(Date.now() - started >= TIMEOUTS.downloadBodyIdleMs, 'not before the idle bound');
    await assertNothingLeft(e, 'img');
    assertUploadAbortedPolitely();
  });

  it('a stalled download ends at the overall deadline (downloadTotalMs)', async () => {
    const e = entry();
    const url = mirror.serve(`/${e}/img.raw`, randomBytes(2 * MiB), { kind: 'stall', afterBytes: 256 * 1024 });
    await assert.rejects(
      within(
        ensureImage(
          input(
            e,
            { key: 'img', url, format: 'raw' },
            { timeouts: { ...TIMEOUTS, downloadBodyIdleMs: 60_000, downloadTotalMs: 2_000 } },
          ),
        ),
        30_000,
        'ensure',
      ),
      (err: unknown) => {
        assert.ok(err instanceof ImageDownloadError, String(err));
        assert.equal(errorKind(err), 'Transient');
        assert.match(err.message, /did not finish within 2000 ms/);
        return true;
      },
    );
    await assertNothingLeft(e, 'img');
  });

  it('a caller leaving a shared fetch does not end it for the others; the last one leaving does', async () => {
    const e = entry();
    const url = mirror.serve(`/${e}/img.raw`, randomBytes(2 * MiB), { kind: 'stall', afterBytes: 256 * 1024 });
    const spec: ImageSpec = { key: 'img', url, format: 'raw' };
    const a = new AbortController();
    const first = ensureImage(input(e, spec, { signal: a.signal }));
    const second = ensureImage(input(e, spec));
    setTimeout(() => a.abort(new Error('operator cancelled')), 300);
    await assert.rejects(within(first, 10_000, 'first'), (err: unknown) => err instanceof ImageAbortedError);
    // The second keeps waiting on the shared fetch, which ends by its own idle bound.
    await assert.rejects(within(second, 30_000, 'second'), (err: unknown) => {
      assert.ok(err instanceof ImageDownloadError, String(err));
      assert.match(err.message, /stalled/);
      return true;
    });
    await assertNothingLeft(e, 'img');

    const b = new AbortController();
    const only = ensureImage(
      input(e, spec, { timeouts: { ...TIMEOUTS, downloadBodyIdleMs: 60_000 }, signal: b.signal }),
    );
    setTimeout(() => b.abort(new Error('operator cancelled')), 500);
    const started = Date.now();
    await assert.rejects(within(only, 10_000, 'only'), (err: unknown) => err instanceof ImageAbortedError);
    assert.ok(Date.now() - started < 5_000);
    await assertNothingLeft(e, 'img');
  });

  it('a wrong digest is Permanent, and leaves no base and no marker', async () => {
    const e = entry();
    const bytes = randomBytes(2 * MiB);
    const url = mirror.serve(`/${e}/img.raw`, bytes, { kind: 'corrupt' });
    const expected = sha256Hex(bytes);
    await assert.rejects(
      ensureImage(input(e, { key: 'img', url, sha256: expected, format: 'raw' })),
      (err: unknown) => {
        assert.ok(err instanceof ImageDigestMismatchError, String(err));
        assert.equal(err.kind, 'Permanent');
        assert.equal(err.expectedSha256, expected);
        assert.notEqual(err.actualSha256, expected);
        assert.ok(err.message.includes(expected) && err.message.includes(err.actualSha256));
        return true;
      },
    );
    await assertNothingLeft(e, 'img');
  });

  it('a response without Content-Length is Permanent with a clear message', async () => {
    const e = entry();
    const url = mirror.serve(`/${e}/img.raw`, randomBytes(MiB), { kind: 'no-content-length' });
    await assert.rejects(ensureImage(input(e, { key: 'img', url, format: 'raw' })), (err: unknown) => {
      assert.ok(err instanceof ImageDownloadError, String(err));
      assert.equal(err.kind, 'Permanent');
      assert.match(err.message, /Content-Length/);
      return true;
    });
    await assertNothingLeft(e, 'img');
  });

  it('HTTP 404 is Permanent, HTTP 503 is Transient', async () => {
    const e = entry();
    const path = `/${e}/img.raw`;
    const url = mirror.serve(path, randomBytes(MiB), { kind: 'status', status: 404 });
    await assert.rejects(ensureImage(input(e, { key: 'img', url, format: 'raw' })), (err: unknown) => {
      assert.ok(err instanceof ImageDownloadError, String(err));
      assert.equal(err.kind, 'Permanent');
      assert.equal(err.statusCode, 404);
      assert.match(err.message, /404/);
      return true;
    });
    mirror.setMode(path, { kind: 'status', status: 503 });
    await assert.rejects(ensureImage(input(e, { key: 'img', url, format: 'raw' })), (err: unknown) => {
      assert.ok(err instanceof ImageDownloadError, String(err));
      assert.equal(err.kind, 'Transient');
      assert.equal(err.statusCode, 503);
      return true;
    });
    await assertNothingLeft(e, 'img');
  });

  it('a pool without room for the image is InsufficientCapacity (Transient), nothing created', async () => {
    const poolName = `ep-small-${RUN}`;
    const dir = `/tmp/ep-small-${RUN}`;
    await inHost(host, ['sh', '-c', `mkdir -p ${dir} && mount -t tmpfs -o size=4m tmpfs ${dir}`]);
    try {
      await inHost(host, ['virsh', '-q', 'pool-create-as', poolName, 'dir', '--target', dir]);
      try {
        const e = entry();
        const bytes = randomBytes(6 * MiB);
        const url = mirror.serve(`/${e}/img.raw`, bytes);
        await assert.rejects(
          ensureImage({ ...input(e, { key: 'img', url, format: 'raw' }), pool: poolName }),
          (err: unknown) => {
            assert.ok(err instanceof InsufficientCapacity, String(err));
            assert.equal(err.kind, 'Transient');
            assert.equal(err.code, 'KVM2_INSUFFICIENT_CAPACITY');
            assert.ok(err.neededBytes >= bytes.length, `needed ${err.neededBytes}`);
            assert.ok(err.availableBytes <= 4 * MiB, `available ${err.availableBytes}`);
            return true;
          },
        );
        const small = await checker.storagePoolLookupByName(poolName, { timeoutMs: 10_000 });
        assert.deepEqual(
          (await checker.storagePoolListAllVolumes(small)).map((v) => v.name),
          [],
          'nothing created in the small pool',
        );
        assert.deepEqual(links.openDedicated(), []);
      } finally {
        await inHost(host, ['virsh', '-q', 'pool-destroy', poolName]).catch(() => '');
      }
    } finally {
      await inHost(host, ['sh', '-c', `umount ${dir}; rmdir ${dir}`]).catch(() => '');
    }
  });

  it('a garbage marker makes the base debris: both are replaced by a verified fetch', async () => {
    const e = entry();
    const bytes = randomBytes(MiB + 5);
    const path = `/${e}/img.raw`;
    const url = mirror.serve(path, bytes);
    const baseName = baseVolumeName(e, 'img', 'raw');
    const markerName = markerVolumeName(e, 'img', 'raw');
    await createWithContent(baseName, randomBytes(300 * 1024));
    await createWithContent(markerName, Buffer.from('this is not json\n'));
    const got = await ensureImage(input(e, { key: 'img', url, sha256: sha256Hex(bytes), format: 'raw' }));
    assert.equal(got.cached, false);
    assert.equal(mirror.requests(path), 1);
    assert.equal(await fileSha256(baseName), sha256Hex(bytes));
    const marker = JSON.parse((await contentOf(markerName)).toString('utf8')) as { sha256: string };
    assert.equal(marker.sha256, sha256Hex(bytes));
    // A base without any marker is debris too.
    const markerVol = await lookup(markerName);
    await checker.storageVolDelete(markerVol!, 0);
    const again = await ensureImage(input(e, { key: 'img', url, format: 'raw' }));
    assert.equal(again.cached, false);
    assert.equal(mirror.requests(path), 2);
    assert.equal(await fileSha256(baseName), sha256Hex(bytes));
  });

  it('a qcow2 image is stored byte for byte and hits by the capacity libvirt reports for it', async () => {
    const tmp = `/tmp/ep-qcow2-${RUN}.qcow2`;
    await inHost(host, ['qemu-img', 'create', '-q', '-f', 'qcow2', tmp, '64M']);
    const bytes = readFileSync(hostPath(host, tmp));
    await inHost(host, ['rm', '-f', tmp]);
    const e = entry();
    const path = `/${e}/img.qcow2`;
    const url = mirror.serve(path, bytes);
    const spec: ImageSpec = { key: 'img', url, sha256: sha256Hex(bytes), format: 'qcow2' };
    const got = await ensureImage(input(e, spec));
    assert.equal(got.volumeName, `base-${e}-img.qcow2`);
    assert.equal(got.sizeBytes, bytes.length);
    assert.equal(await fileSha256(got.volumeName), sha256Hex(bytes));
    const marker = JSON.parse((await contentOf(markerVolumeName(e, 'img', 'qcow2'))).toString('utf8')) as {
      capacityBytes: number;
      sizeBytes: number;
    };
    assert.equal(marker.capacityBytes, 64 * MiB, 'the virtual size');
    assert.equal(marker.sizeBytes, bytes.length);
    const again = await ensureImage(input(e, spec));
    assert.equal(again.cached, true);
    assert.equal(mirror.requests(path), 1);
  });

  it('bytes that are not qcow2 under format qcow2 are Permanent, nothing left', async () => {
    const e = entry();
    const url = mirror.serve(`/${e}/img.qcow2`, randomBytes(MiB));
    await assert.rejects(ensureImage(input(e, { key: 'img', url, format: 'qcow2' })), (err: unknown) => {
      assert.ok(err instanceof ImageFormatError, String(err));
      assert.equal(err.kind, 'Permanent');
      return true;
    });
    await assertNothingLeft(e, 'img', 'qcow2');
  });
});
