/**
 * Links and the per-host links (lib/hostlink/link.ts, lib/hostlink/pool.ts) against the real test hosts
 * (sshd inside each host's network namespace, libvirtd behind it) and, where a server must be
 * reconfigured or counted, against a throwaway loopback sshd that forwards to a test host's real
 * libvirt socket: the call-slot limit seen from both sides, the queue bound, replacement of a
 * dead pooled link, markDead under a stalled write, host key refusals (Permanent, one dial per
 * call), a tarpit (ready timeout), and a key rotated on disk between dials. Traffic goes only to
 * loopback and 10.231.x; every wait is bounded.
 */
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Readable } from 'node:stream';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { errorKind } from '../../lib/errors.ts';
import { ErrorNumber } from '../../lib/libvirt/constants.ts';
import { LibvirtConnectionError, LibvirtError } from '../../lib/libvirt/errors.ts';
import { SshAuthError, SshHostKeyError, SshTimeoutError } from '../../lib/ssh/errors.ts';
import { SshPoolQueueTimeoutError } from '../../lib/hostlink/errors.ts';
import type { HostTarget, Link } from '../../lib/hostlink/link.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import type { HostLinksOptions } from '../../lib/hostlink/pool.ts';
import { processState, signalPids, sshdPidsFor, waitGone, withNewSshPort } from '../support/host-faults.ts';
import { generateKey, startSshd, startTarpit, startTcpRelay } from '../support/sshd.ts';
import type { TestServer, ThrowawaySshd } from '../support/sshd.ts';
import { hostTarget, loadTestHosts, localSocketPath, TESTHOST_STATE } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';
import { sleep, until, within } from '../support/bounded.ts';

const MiB = 1024 * 1024;
const run = `${process.pid}-${Date.now().toString(36)}`;
const T = { timeout: 30_000 };

const OPTIONS: HostLinksOptions = {
  dial: { connectTimeoutMs: 2_000, readyTimeoutMs: 5_000, keepaliveIntervalMs: 2_000, keepaliveCountMax: 3 },
  client: { keepalive: { intervalMs: 2_000, countMax: 3 } },
};

function targetOf(h: TestHost, over: Partial<HostTarget> = {}): HostTarget {
  return { ...hostTarget(h), ...over };
}

async function failure(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => (e instanceof Error ? e : assert.fail(`rejected with a non-Error: ${String(e)}`)),
  );
}

/** The pooled link, read through a call so that an earlier assertion does not narrow its type. */
function pooledOf(l: HostLinks): Link | undefined {
  return l.pooledLink;
}

function rawVolXml(name: string, capacityBytes: number): string {
  return `<volume><name>${name}</name><capacity unit='bytes'>${capacityBytes}</capacity><allocation>0</allocation><target><format type='raw'/></target></volume>`;
}

const hostsPresent = existsSync(join(TESTHOST_STATE, 'hosts.json'));

describe('link pool against the test hosts', { timeout: 180_000 }, () => {
  const hosts = hostsPresent ? loadTestHosts() : [];
  if (hosts.length === 0) {
    it('needs test hosts', { skip: `no ${TESTHOST_STATE}/hosts.json (test/hosts/testhost up)` }, () => {});
    return;
  }
  const h1 = hosts[0]!;
  const h2 = hosts[1] ?? h1;
  const owned: HostLinks[] = [];
  const stoppedPids = new Set<number>();
  const volumes: string[] = [];
  let dir: string;

  const links = (h: TestHost, options: HostLinksOptions = {}, over: Partial<HostTarget> = {}): HostLinks => {
    const l = new HostLinks(targetOf(h, over), { ...OPTIONS, ...options });
    owned.push(l);
    return l;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-links-'));
  });
  after(async () => {
    signalPids([...stoppedPids], 'SIGKILL');
    await waitGone([...stoppedPids]);
    for (const l of owned) l.close();
    if (volumes.length > 0) {
      const cleaner = links(h1);
      for (const name of volumes) {
        for (let attempt = 0; attempt < 40; attempt++) {
          try {
            await cleaner.call(async (c, o) => {
              const p = await c.storagePoolLookupByName(h1.pool, o);
              await c.storageVolDelete(await c.storageVolLookupByName(p, name, o), 0, o);
            });
            break;
          } catch (err) {
            if (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.NO_STORAGE_VOL) break;
            await sleep(250);
          }
        }
      }
      cleaner.close();
    }
    await rm(dir, { recursive: true, force: true });
  });

  for (const h of hosts) {
    it(`${h.name}: a pooled call and a dedicated link both reach libvirtd through sshd`, T, async () => {
      const l = links(h);
      const v = await l.call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 });
      assert.ok(v >= 9_000_000n, `libvirt ${v}`);
      const bulk = await l.dedicated('bulk');
      assert.equal(bulk.purpose, 'bulk');
      assert.equal(await bulk.client.getLibVersion({ timeoutMs: 5_000 }), v);
      assert.notEqual(bulk, l.pooledLink);
      await bulk.close();
      assert.ok(bulk.isDead && bulk.session.isDead);
      assert.equal(l.stats().dials, 2);
    });
  }

  it(
    '20 concurrent calls with maxConcurrentCalls 5: all succeed, never more than 5 in flight (pool stats and the daemon connection)',
    T,
    async () => {
      const l = links(h1, { maxConcurrentCalls: 5 });
      let maxPending = 0;
      let running = 0;
      let maxRunning = 0;
      const results = await within(
        Promise.all(
          Array.from({ length: 20 }, () =>
            l.call(
              async (c, o) => {
                running++;
                maxRunning = Math.max(maxRunning, running);
                try {
                  const reply = c.getLibVersion(o);
                  // Calls this connection has on the wire now, this one included.
                  maxPending = Math.max(maxPending, c.connection.pendingCalls);
                  return await reply;
                } finally {
                  running--;
                }
              },
              { timeoutMs: 10_000 },
            ),
          ),
        ),
        20_000,
        '20 calls',
      );
      assert.equal(results.length, 20);
      assert.ok(results.every((v) => v === results[0] && v > 0n));
      const stats = l.stats();
      assert.ok(stats.maxInFlight <= 5, `maxInFlight ${stats.maxInFlight}`);
      assert.equal(stats.maxInFlight, 5, 'the limit was reached');
      assert.ok(maxRunning <= 5, `${maxRunning} functions ran at once`);
      assert.ok(maxPending <= 5, `the connection had ${maxPending} calls pending`);
      assert.ok(maxPending >= 2, `calls never overlapped on the connection (max ${maxPending} pending)`);
      assert.equal(stats.dials, 1, 'one shared dial');
      assert.deepEqual({ inFlight: stats.inFlight, queued: stats.queued }, { inFlight: 0, queued: 0 });
    },
  );

  it('a call waiting for a slot beyond its budget fails with SshPoolQueueTimeoutError (Transient)', T, async () => {
    const l = links(h1, { maxConcurrentCalls: 5 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const busy = Array.from({ length: 5 }, () =>
      l.call(
        async (c, o) => {
          const v = await c.getLibVersion(o);
          await gate;
          return v;
        },
        { timeoutMs: 10_000 },
      ),
    );
    try {
      await until(() => l.stats().inFlight === 5, 5_000, 'five busy slots');
      const t0 = performance.now();
      const err = await failure(l.call((c, o) => c.getLibVersion(o), { timeoutMs: 300 }));
      const waited = performance.now() - t0;
      assert.ok(err instanceof SshPoolQueueTimeoutError, String(err));
      assert.equal(errorKind(err), 'Transient');
      assert.ok(waited >= 280 && waited < 2_000, `waited ${waited} ms`);
    } finally {
      release();
    }
    assert.equal((await within(Promise.all(busy), 5_000, 'busy calls')).length, 5);
    assert.ok(l.pooledLink !== undefined, 'a queue timeout does not touch the link');
  });

  it('a dead pooled link is replaced on next use; markDead is idempotent (first reason wins)', T, async () => {
    const l = links(h2);
    await l.call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 });
    const first = l.pooledLink;
    assert.ok(first !== undefined);
    assert.equal(l.stats().dials, 1);
    const reason = new Error('killed by the test');
    first.markDead(reason);
    first.markDead(new Error('second reason'));
    assert.equal(first.deadReason, reason);
    assert.equal(await within(first.dead, 100, 'dead promise'), reason);
    assert.ok(first.session.isDead && first.client.connection.isDead);
    assert.equal(l.pooledLink, undefined);
    await l.call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 });
    assert.equal(l.stats().dials, 2);
    const second = pooledOf(l);
    assert.ok(second !== undefined && second !== first && !second.isDead);
  });

  it(
    'markDead with an upload stalled on a peer that reads nothing (its sshd stopped; 32 MiB source chunks, 16 MiB packets) returns at once and rejects the upload within 100 ms',
    T,
    async (t) => {
      const l = links(h1);
      const name = `ep-it-links-stall-${run}.raw`;
      await l.call(async (c, o) => {
        const p = await c.storagePoolLookupByName(h1.pool, o);
        await c.storageVolCreateXml(p, rawVolXml(name, 256 * MiB), 0, o);
      });
      volumes.push(name);
      const { value: link, port } = await withNewSshPort(h1, () => l.dedicated('bulk'));
      const pids = await sshdPidsFor(h1, port);
      assert.ok(pids.length > 0, 'found the sshd of the bulk link');
      const pool = await link.client.storagePoolLookupByName(h1.pool, { timeoutMs: 5_000 });
      const vol = await link.client.storageVolLookupByName(pool, name, { timeoutMs: 5_000 });
      const chunk = Buffer.alloc(32 * MiB, 0x33);
      let progress = 0;
      const upload = link.client.storageVolUpload(vol, Readable.from(Array.from({ length: 8 }, () => chunk)), {
        chunkBytes: 16 * MiB - 64,
        timeoutMs: 10_000,
        onProgress: (p) => (progress = p.bytes),
      });
      const outcome = upload.then(
        () => undefined,
        (e: unknown) => e,
      );
      await until(() => progress > 0, 5_000, 'upload progress');
      for (const pid of pids) stoppedPids.add(pid);
      signalPids(pids, 'SIGSTOP');
      await until(() => pids.every((p) => processState(p) === 'T'), 2_000, 'sshd stopped');
      // Let the SSH window and the socket buffers fill: then the writer waits for a drain that never comes.
      let stalledSince = performance.now();
      let last = progress;
      await until(
        () => {
          if (progress !== last || !link.client.connection.writeBlocked) {
            last = progress;
            stalledSince = performance.now();
          }
          return performance.now() - stalledSince > 300;
        },
        10_000,
        'a stalled upload',
      );
      assert.ok(link.client.connection.writeBlocked, 'the transport is full');
      assert.ok(progress < 256 * MiB, 'the upload is not done');
      const reason = new Error('operator kill under backpressure');
      const t0 = performance.now();
      link.markDead(reason);
      const markMs = performance.now() - t0;
      const err = await within(outcome, 100, 'upload rejection');
      const rejectMs = performance.now() - t0;
      link.markDead(new Error('again'));
      assert.ok(markMs < 20, `markDead took ${markMs} ms`);
      assert.ok(err instanceof LibvirtConnectionError, String(err));
      assert.equal(err.cause, reason);
      assert.equal(errorKind(err), 'Transient');
      assert.equal(link.deadReason, reason);
      assert.ok(link.session.isDead);
      assert.equal(await within(link.dead, 100, 'dead promise'), reason);
      t.diagnostic(
        `markDead under backpressure: returned in ${markMs.toFixed(2)} ms, upload rejected after ${rejectMs.toFixed(1)} ms ` +
          `(${(progress / MiB).toFixed(0)} MiB handed to the channel before it stalled)`,
      );
      signalPids(pids, 'SIGKILL');
      assert.deepEqual(await waitGone(pids), []);
      for (const pid of pids) stoppedPids.delete(pid);
    },
  );

  it(
    'host key unknown, changed or revoked: every call fails Permanent with the SHA256 fingerprint, one dial per call',
    T,
    async () => {
      const other = await generateKey(join(dir, 'other-host-key'));
      const cases = {
        unknown: ['# no entry for this host'],
        mismatch: [`${h1.address} ${other.publicLine.split(' ').slice(0, 2).join(' ')}`],
        revoked: [`${h1.address} ${String(h1.hostKey)}`, `@revoked * ${String(h1.hostKey)}`],
      };
      const codes = { unknown: 'SSH_HOST_UNKNOWN', mismatch: 'SSH_HOST_KEY_MISMATCH', revoked: 'SSH_HOST_KEY_REVOKED' };
      for (const [what, lines] of Object.entries(cases) as [keyof typeof cases, string[]][]) {
        const path = join(dir, `known_hosts.${what}`);
        await writeFile(path, lines.map((line) => `${line}\n`).join(''));
        const l = links(h1, {}, { knownHostsPath: path });
        for (let i = 1; i <= 2; i++) {
          const err = await failure(l.call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 }));
          assert.ok(err instanceof SshHostKeyError, `${what}: ${String(err)}`);
          assert.equal(err.code, codes[what]);
          assert.equal(errorKind(err), 'Permanent');
          assert.match(err.message, /SHA256:/);
          assert.ok(err.message.includes(String(h1.hostKeyFingerprint)), err.message);
          assert.equal(l.stats().dials, i, `${what}: one dial per call`);
        }
        assert.equal(l.pooledLink, undefined);
      }
    },
  );
});

describe('link pool against a throwaway sshd forwarding to a test host libvirtd', { timeout: 120_000 }, () => {
  const hosts = hostsPresent ? loadTestHosts() : [];
  if (hosts.length === 0) {
    it('needs test hosts', { skip: `no ${TESTHOST_STATE}/hosts.json (test/hosts/testhost up)` }, () => {});
    return;
  }
  const h1 = hosts[0]!;
  let sshd: ThrowawaySshd;
  const servers: TestServer[] = [];
  const owned: HostLinks[] = [];
  /** The links of `t`, closed after the tests. */
  const hostLinks = (t: HostTarget): HostLinks => {
    const l = new HostLinks(t, { ...OPTIONS, dial: { ...OPTIONS.dial, readyTimeoutMs: 500 } });
    owned.push(l);
    return l;
  };

  const target = (over: Partial<HostTarget> = {}): HostTarget => ({
    name: 'loopback-sshd',
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    keyPath: sshd.clientKey.privatePath,
    knownHostsPath: sshd.knownHostsPath,
    socketPath: localSocketPath(h1),
    ...over,
  });

  before(async () => {
    sshd = await startSshd();
  });
  after(async () => {
    for (const l of owned) l.close();
    for (const s of servers) await s.close();
    await sshd.stop();
  });

  it('reaches the real libvirtd through the loopback sshd', T, async () => {
    const v = await hostLinks(target({ name: 'plain' })).call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
    assert.ok(v >= 9_000_000n);
  });

  it(
    'host key unknown, changed or revoked: Permanent, SHA256 fingerprint in the message, exactly one TCP connection per call',
    T,
    async () => {
      const relay = await startTcpRelay(sshd.port);
      servers.push(relay);
      const keyLine = sshd.hostKey.publicLine.split(' ').slice(0, 2).join(' ');
      const other = await generateKey(join(sshd.dir, 'other-host-key'));
      const cases: Record<string, string[]> = {
        unknown: ['# nothing yet'],
        mismatch: [`[127.0.0.1]:${relay.port} ${other.publicLine.split(' ').slice(0, 2).join(' ')}`],
        revoked: [`[127.0.0.1]:${relay.port} ${keyLine}`, `@revoked * ${keyLine}`],
      };
      for (const [what, lines] of Object.entries(cases)) {
        const path = join(sshd.dir, `kh-${what}`);
        await writeFile(path, lines.map((l) => `${l}\n`).join(''));
        const l = hostLinks(target({ name: `hk-${what}`, port: relay.port, knownHostsPath: path }));
        for (let i = 1; i <= 2; i++) {
          const before = relay.connections();
          const err = await failure(l.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }));
          await sleep(100); // a retry, if there were one, would have connected by now
          assert.ok(err instanceof SshHostKeyError, `${what}: ${String(err)}`);
          assert.equal(errorKind(err), 'Permanent');
          assert.match(err.message, /SHA256:[A-Za-z0-9+/]{43}/);
          assert.equal(relay.connections() - before, 1, `${what}: one TCP connection for call ${i}`);
          assert.equal(l.stats().dials, i);
        }
      }
    },
  );

  it('a tarpit behind the pool: the call fails at the ready timeout, Transient SSH_READY_TIMEOUT', T, async () => {
    const tarpit = await startTarpit();
    servers.push(tarpit);
    const l = hostLinks(target({ name: 'tarpit', port: tarpit.port }));
    for (let i = 1; i <= 2; i++) {
      const t0 = performance.now();
      const err = await failure(l.call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 }));
      const took = performance.now() - t0;
      assert.ok(err instanceof SshTimeoutError, String(err));
      assert.equal(err.code, 'SSH_READY_TIMEOUT');
      assert.equal(errorKind(err), 'Transient');
      assert.ok(took >= 480 && took < 2_000, `took ${took} ms (ready timeout 500 ms)`);
      assert.equal(tarpit.connections(), i);
    }
  });

  it('a key rotated on disk between two dials: the next dial after the link dies uses the new key', T, async () => {
    const keyPath = join(sshd.dir, 'rotating');
    const first = await generateKey(keyPath);
    await copyFile(keyPath, `${keyPath}.old`);
    await sshd.authorize([first.publicLine]);
    try {
      const l = hostLinks(target({ name: 'rotating', keyPath }));
      await l.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
      const before = l.pooledLink;
      const second = await generateKey(keyPath);
      await sshd.authorize([second.publicLine]);
      // The live link stays (it authenticated once); nothing is re-read until the next dial.
      await l.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
      assert.equal(l.pooledLink, before);
      assert.equal(l.stats().dials, 1);
      before?.markDead(new Error('link lost'));
      await l.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
      assert.equal(l.stats().dials, 2);
      assert.notEqual(l.pooledLink, before);
      // The old key is refused now, so the second dial could only have used the new one.
      const old = hostLinks(target({ name: 'old-key', keyPath: `${keyPath}.old` }));
      const err = await failure(old.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }));
      assert.ok(err instanceof SshAuthError, String(err));
      assert.equal(errorKind(err), 'Permanent');
    } finally {
      await sshd.authorize([sshd.clientKey.publicLine]);
    }
  });
});
