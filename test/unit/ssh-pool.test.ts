/**
 * The per-host link pool (lib/hostlink/pool.ts): its call-slot semaphore (limit, FIFO order, queue
 * wait bounded by the budget, abort while queued, close() failing waiters), the shared dial and
 * its bounds, and the replacement of a dead pooled link. HostLinks dials for real (it takes no
 * injected transport), so the links run over a throwaway loopback OpenSSH sshd to a scripted
 * libvirt peer on a unix socket, which answers the handshake itself and holds every
 * CONNECT_GET_LIB_VERSION call until the test releases it. Loopback only; every wait is bounded.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { errorKind } from '../../lib/errors.ts';
import { LibvirtConnectionError } from '../../lib/libvirt/errors.ts';
import { SshAbortedError, SshTimeoutError } from '../../lib/ssh/errors.ts';
import { SshPoolClosedError, SshPoolQueueTimeoutError } from '../../lib/hostlink/errors.ts';
import type { HostTarget } from '../../lib/hostlink/link.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import type { HostLinksOptions, LinkDeathEvent, LinkDialEvent, LinkRedialEvent } from '../../lib/hostlink/pool.ts';
import { rejectionOf, ScriptedPeer, sleep, within, xdr } from '../support/fake-daemon.ts';
import type { WirePacket } from '../support/fake-daemon.ts';
import { startSshd, startTarpit } from '../support/sshd.ts';
import type { TestServer, ThrowawaySshd } from '../support/sshd.ts';
import { until } from '../support/bounded.ts';

const T = { timeout: 20_000 };

// Procedure numbers (remote_protocol.x), as literals: not imported from the code under test.
const PROC = { CONNECT_OPEN: 1, SUPPORTS_FEATURE: 60, AUTH_LIST: 66, GET_LIB_VERSION: 157 } as const;
const LIB_VERSION = 9_000_000n;

interface Held {
  peer: ScriptedPeer;
  call: WirePacket;
}

/**
 * A scripted libvirtd on a unix socket: answers AUTH_LIST (none), CONNECT_OPEN and
 * SUPPORTS_FEATURE (no keepalive) at once, optionally after `handshakeDelayMs`; holds every
 * GET_LIB_VERSION call for the test (or answers at once with `autoAnswer`).
 */
class FakeLibvirtd {
  readonly path: string;
  readonly held: Held[] = [];
  readonly peers: ScriptedPeer[] = [];
  autoAnswer = false;
  handshakeDelayMs = 0;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();

  constructor(path: string) {
    this.path = path;
  }

  async start(): Promise<void> {
    const server = createServer((socket) => this.#serve(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.path, () => resolve());
    });
    this.#server = server;
  }

  /** Connections accepted so far (one per link). */
  get connections(): number {
    return this.peers.length;
  }

  #serve(socket: Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    const peer = new ScriptedPeer(socket, { answerPings: true });
    this.peers.push(peer);
    void peer.closed.then(() => peer.dispose());
    void (async () => {
      for (let i = 0; i < 10_000 && !peer.isClosed; i++) {
        let call: WirePacket;
        try {
          call = await peer.nextCall(60_000);
        } catch {
          return; // disposed or closed
        }
        if (call.proc === PROC.GET_LIB_VERSION) {
          if (this.autoAnswer) peer.reply(call, xdr.u64(LIB_VERSION));
          else this.held.push({ peer, call });
          continue;
        }
        if (this.handshakeDelayMs > 0) await sleep(this.handshakeDelayMs);
        if (call.proc === PROC.AUTH_LIST) peer.reply(call, xdr.cat(xdr.u32(1), xdr.i32(0)));
        else if (call.proc === PROC.CONNECT_OPEN) peer.reply(call);
        else if (call.proc === PROC.SUPPORTS_FEATURE) peer.reply(call, xdr.i32(0));
        else peer.replyError(call, { code: 3, domain: 0, message: `fake: procedure ${call.proc} unsupported` });
      }
    })();
  }

  /** Waits (bounded) until `n` calls are held. */
  async waitHeld(n: number, ms = 3_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.held.length < n) {
      if (Date.now() > deadline)
        throw new Error(`only ${this.held.length} of ${n} calls reached the daemon in ${ms} ms`);
      await sleep(5);
    }
  }

  /** Answers the held calls (all, or the first `n`), oldest first. */
  release(n = this.held.length): void {
    for (const { peer, call } of this.held.splice(0, n)) peer.reply(call, xdr.u64(LIB_VERSION));
  }

  async close(): Promise<void> {
    for (const p of this.peers) p.dispose();
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }
}

describe('HostLinks (pooled link and call slots) over a throwaway sshd to a scripted libvirtd', () => {
  let sshd: ThrowawaySshd;
  let daemon: FakeLibvirtd;
  let tarpit: TestServer;
  const pools: HostLinks[] = [];

  const target = (over: Partial<HostTarget> = {}): HostTarget => ({
    name: 'fake-host',
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    keyPath: sshd.clientKey.privatePath,
    knownHostsPath: sshd.knownHostsPath,
    socketPath: daemon.path,
    ...over,
  });
  const links = (options: HostLinksOptions = {}, over: Partial<HostTarget> = {}): HostLinks => {
    const h = new HostLinks(target(over), {
      dial: { connectTimeoutMs: 2_000, readyTimeoutMs: 5_000, keepaliveIntervalMs: 0 },
      ...options,
    });
    pools.push(h);
    return h;
  };
  /** A call that records when its function started, then asks the daemon (which holds it). */
  const tracked = (h: HostLinks, label: string, started: string[], timeoutMs = 10_000, signal?: AbortSignal) =>
    h.call(
      async (c, o) => {
        started.push(label);
        return c.getLibVersion(o);
      },
      { timeoutMs, signal },
    );

  before(async () => {
    sshd = await startSshd();
    daemon = new FakeLibvirtd(join(sshd.dir, 'libvirt-sock'));
    await daemon.start();
    tarpit = await startTarpit();
  });
  beforeEach(() => {
    // Calls held for an earlier test (its link is gone) must not count for this one.
    daemon.held.splice(0);
  });
  after(async () => {
    for (const h of pools) h.close();
    await daemon.close();
    await tarpit.close();
    await sshd.stop();
  });

  it('refuses a maxConcurrentCalls that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => new HostLinks(target(), { maxConcurrentCalls: bad }), RangeError);
    }
  });

  it('answers a call, then reuses the pooled link (one dial, one daemon connection)', T, async () => {
    daemon.autoAnswer = true;
    try {
      const h = links();
      const before = daemon.connections;
      assert.equal(await h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }), LIB_VERSION);
      assert.equal(await h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }), LIB_VERSION);
      assert.equal(h.stats().dials, 1);
      assert.equal(daemon.connections - before, 1);
      assert.deepEqual(
        { ...h.stats(), maxInFlight: 0 },
        {
          inFlight: 0,
          queued: 0,
          maxInFlight: 0,
          dials: 1,
          starts: { slots: 1, inFlight: 0, queued: 0, maxInFlight: 0 },
        },
      );
    } finally {
      daemon.autoAnswer = false;
    }
  });

  it('concurrent first calls share one dial', T, async () => {
    daemon.autoAnswer = true;
    try {
      const h = links();
      const results = await Promise.all(
        Array.from({ length: 4 }, () => h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 })),
      );
      assert.deepEqual(results, Array(4).fill(LIB_VERSION));
      assert.equal(h.stats().dials, 1);
    } finally {
      daemon.autoAnswer = false;
    }
  });

  it('never runs more than maxConcurrentCalls at once, and grants slots in FIFO order', T, async () => {
    const h = links({ maxConcurrentCalls: 2 });
    const started: string[] = [];
    const calls = ['a', 'b', 'c', 'd', 'e'].map((l) => tracked(h, l, started));
    await daemon.waitHeld(2);
    await sleep(50); // nothing else may start while both slots are busy
    assert.deepEqual(started, ['a', 'b']);
    assert.deepEqual({ inFlight: h.stats().inFlight, queued: h.stats().queued }, { inFlight: 2, queued: 3 });
    daemon.release(1); // a done: c starts
    await daemon.waitHeld(2);
    assert.deepEqual(started, ['a', 'b', 'c']);
    daemon.release(1); // b done: d starts
    await daemon.waitHeld(2);
    daemon.release(1); // c done: e starts
    await daemon.waitHeld(2);
    assert.deepEqual(started, ['a', 'b', 'c', 'd', 'e']);
    daemon.release();
    assert.deepEqual(await within(Promise.all(calls), 3_000, 'calls'), Array(5).fill(LIB_VERSION));
    assert.equal(h.stats().maxInFlight, 2);
    assert.deepEqual({ inFlight: h.stats().inFlight, queued: h.stats().queued }, { inFlight: 0, queued: 0 });
  });

  it('bounds the queue wait by the call budget: SshPoolQueueTimeoutError, Transient; fn never runs', T, async () => {
    const h = links({ maxConcurrentCalls: 1 });
    const started: string[] = [];
    const busy = tracked(h, 'busy', started);
    await daemon.waitHeld(1);
    const t0 = performance.now();
    const err = await rejectionOf(tracked(h, 'late', started, 300));
    const waited = performance.now() - t0;
    assert.ok(err instanceof SshPoolQueueTimeoutError, String(err));
    assert.equal(err.code, 'SSH_POOL_QUEUE_TIMEOUT');
    assert.equal(errorKind(err), 'Transient');
    assert.ok(waited >= 280 && waited < 1_500, `waited ${waited} ms`);
    assert.deepEqual(started, ['busy']);
    assert.equal(h.stats().queued, 0);
    daemon.release();
    assert.equal(await busy, LIB_VERSION);
    // The slot is free again and the link alive: the next call runs at once.
    const next = tracked(h, 'next', started);
    await daemon.waitHeld(1);
    daemon.release();
    assert.equal(await next, LIB_VERSION);
    assert.equal(h.stats().dials, 1);
  });

  it('the budget covers the queue wait: fn receives what is left of it', T, async () => {
    const h = links({ maxConcurrentCalls: 1 });
    const busy = tracked(h, 'busy', []);
    await daemon.waitHeld(1);
    let given: number | undefined;
    const queued = h.call(
      async (c, o) => {
        given = o.timeoutMs;
        return c.getLibVersion(o);
      },
      { timeoutMs: 2_000 },
    );
    await sleep(500);
    daemon.release();
    await busy;
    await daemon.waitHeld(1);
    daemon.release();
    await queued;
    assert.ok(given !== undefined && given <= 1_550 && given > 500, `fn got ${given} ms`);
  });

  it('a queued call whose signal fires leaves the queue at once; others keep their place', T, async () => {
    const h = links({ maxConcurrentCalls: 1 });
    const started: string[] = [];
    const busy = tracked(h, 'busy', started);
    await daemon.waitHeld(1);
    const controller = new AbortController();
    const aborted = tracked(h, 'aborted', started, 10_000, controller.signal);
    const later = tracked(h, 'later', started);
    await until(() => h.stats().queued === 2, 1_000, 'two queued');
    const t0 = performance.now();
    controller.abort(new Error('caller gave up'));
    const err = await rejectionOf(aborted, 500);
    assert.ok(performance.now() - t0 < 100, 'rejected at once');
    // Aborted is not timed out: the caller's own abort, with its reason as the cause.
    assert.ok(err instanceof SshAbortedError, String(err));
    assert.equal((err.cause as Error).message, 'caller gave up');
    assert.equal(errorKind(err), 'Transient');
    assert.equal(h.stats().queued, 1);
    daemon.release();
    await busy;
    await daemon.waitHeld(1);
    daemon.release();
    assert.equal(await later, LIB_VERSION);
    assert.deepEqual(started, ['busy', 'later']);
    assert.ok(h.pooledLink !== undefined, 'an abort while queued does not touch the link');
    assert.equal(h.stats().dials, 1);
  });

  it('a call whose signal is already aborted fails at once instead of waiting in the queue', T, async () => {
    const h = links({ maxConcurrentCalls: 1 });
    const busy = tracked(h, 'busy', []);
    await daemon.waitHeld(1);
    const t0 = performance.now();
    const err = await rejectionOf(
      tracked(h, 'pre-aborted', [], 5_000, AbortSignal.abort(new Error('too late'))),
      1_000,
    );
    assert.ok(performance.now() - t0 < 100, `took ${performance.now() - t0} ms`);
    assert.ok(err instanceof SshAbortedError, String(err));
    assert.equal(errorKind(err), 'Transient');
    assert.equal(h.stats().queued, 0);
    daemon.release();
    await busy;
  });

  it('a slot is released when fn throws, and the next queued call runs', T, async () => {
    const h = links({ maxConcurrentCalls: 1 });
    const boom = h.call(async () => {
      await sleep(50);
      throw new Error('fn failed');
    });
    const next = tracked(h, 'next', []);
    await assert.rejects(boom, /fn failed/);
    await daemon.waitHeld(1);
    daemon.release();
    assert.equal(await next, LIB_VERSION);
    assert.equal(h.stats().inFlight, 0);
  });

  it(
    'close() fails queued callers with SshPoolClosedError, kills the running call, refuses new ones without dialing',
    T,
    async () => {
      const h = links({ maxConcurrentCalls: 1 });
      const started: string[] = [];
      const running = tracked(h, 'running', started);
      await daemon.waitHeld(1);
      const queued = [tracked(h, 'q1', started), tracked(h, 'q2', started)];
      await until(() => h.stats().queued === 2, 1_000, 'two queued');
      const t0 = performance.now();
      h.close(new Error('host removed from config'));
      assert.ok(performance.now() - t0 < 20, 'close() returns at once');
      for (const q of queued) {
        const err = await rejectionOf(q, 500);
        assert.ok(err instanceof SshPoolClosedError, String(err));
        assert.equal(errorKind(err), 'Transient');
      }
      const err = await rejectionOf(running, 500);
      assert.ok(err instanceof LibvirtConnectionError, String(err));
      assert.equal(errorKind(err), 'Transient');
      const dials = h.stats().dials;
      const refused = await rejectionOf(tracked(h, 'after', started), 500);
      assert.ok(refused instanceof SshPoolClosedError, String(refused));
      assert.equal(h.stats().dials, dials);
      assert.deepEqual(started, ['running']);
      daemon.held.splice(0);
    },
  );

  it('a dead pooled link is replaced on next use; its running calls are rejected at once', T, async () => {
    const h = links();
    const first = tracked(h, 'first', []);
    await daemon.waitHeld(1);
    const link = h.pooledLink;
    assert.ok(link !== undefined);
    const reason = new Error('operator killed the link');
    link.markDead(reason);
    link.markDead(new Error('second reason'));
    assert.equal(link.deadReason, reason, 'the first reason wins');
    assert.equal(h.pooledLink, undefined);
    const err = await rejectionOf(first, 200);
    assert.equal(errorKind(err), 'Transient');
    daemon.held.splice(0);
    const second = tracked(h, 'second', []);
    await daemon.waitHeld(1);
    daemon.release();
    assert.equal(await second, LIB_VERSION);
    assert.equal(h.stats().dials, 2);
    assert.ok(h.pooledLink !== undefined && h.pooledLink !== link);
  });

  it('reports dials, a death with its reason, and the redial that replaces the pooled link, as events', T, async () => {
    daemon.autoAnswer = true;
    try {
      const h = links();
      const seen: string[] = [];
      const deaths: LinkDeathEvent[] = [];
      const dials: LinkDialEvent[] = [];
      let redial: LinkRedialEvent | undefined;
      h.on('dial', (e) => {
        seen.push(`dial ${e.purpose}${e.error ? ' failed' : ''}`);
        dials.push(e);
      });
      h.on('death', (e) => {
        seen.push(`death ${e.purpose}`);
        deaths.push(e);
      });
      h.on('redial', (e) => {
        seen.push('redial');
        redial = e;
      });
      assert.equal(await h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }), LIB_VERSION);
      const reason = new Error('keepalive timeout (test)');
      h.pooledLink!.markDead(reason);
      await until(() => deaths.length === 1, 1_000, 'death event');
      assert.equal(deaths[0]!.reason, reason);
      assert.ok(deaths[0]!.ageMs >= 0);
      assert.equal(await h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }), LIB_VERSION);
      assert.equal(redial?.previousReason, reason);
      const bulk = await h.dedicated('bulk');
      const closing = new Error('bulk done');
      bulk.markDead(closing);
      await until(() => deaths.length === 2, 1_000, 'second death event');
      assert.equal(deaths[1]!.reason, closing);
      assert.deepEqual(seen, ['dial rpc', 'death rpc', 'redial', 'dial rpc', 'dial bulk', 'death bulk']);
      assert.ok(dials.every((d) => d.durationMs >= 0 && d.error === undefined));
      assert.equal(h.stats().dials, 3, 'stats() counts the same dials');
    } finally {
      daemon.autoAnswer = false;
    }
  });

  it('a failed dial is reported with its error; a throwing listener becomes a warning, not a failure', T, async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const h = links({}, { socketPath: join(sshd.dir, 'no-such-socket') });
      const failed: LinkDialEvent[] = [];
      h.on('dial', (e) => {
        failed.push(e);
        throw new Error('metrics exporter broke');
      });
      const err = await rejectionOf(
        h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }),
        6_000,
      );
      assert.equal(failed.length, 1);
      assert.equal(failed[0]!.error, err, 'the event carries the error the caller got');
      await sleep(10);
      assert.ok(warnings.some((w) => w.message === 'metrics exporter broke'));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a dial is bounded by the call budget, not only by the dial timeouts', T, async () => {
    const h = links(
      { dial: { readyTimeoutMs: 5_000, connectTimeoutMs: 2_000, keepaliveIntervalMs: 0 } },
      {
        port: tarpit.port,
      },
    );
    const t0 = performance.now();
    const err = await rejectionOf(
      h.call((c, o) => c.getLibVersion(o), { timeoutMs: 300 }),
      3_000,
    );
    const took = performance.now() - t0;
    assert.ok(took >= 280 && took < 1_500, `took ${took} ms (the ready timeout is 5000 ms)`);
    assert.equal(errorKind(err), 'Transient');
    assert.ok(err instanceof SshPoolQueueTimeoutError, String(err));
    h.close();
  });

  it('a caller that aborts during the shared dial fails alone; the others get the link', T, async () => {
    daemon.handshakeDelayMs = 150; // the handshake takes ~450 ms
    daemon.autoAnswer = true;
    try {
      const h = links();
      const controller = new AbortController();
      const quitter = h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000, signal: controller.signal });
      const stayer = h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
      await sleep(100);
      controller.abort(new Error('caller cancelled'));
      const err = await rejectionOf(quitter, 500);
      assert.ok(err instanceof SshAbortedError, String(err));
      assert.equal(await within(stayer, 3_000, 'the other caller'), LIB_VERSION);
      assert.equal(h.stats().dials, 1);
    } finally {
      daemon.handshakeDelayMs = 0;
      daemon.autoAnswer = false;
    }
  });

  it('close() aborts a dial in progress and fails its waiters with SshPoolClosedError', T, async () => {
    const h = links({}, { port: tarpit.port });
    const pending = h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
    await sleep(100);
    h.close(new Error('shutting down'));
    const err = await rejectionOf(pending, 500);
    assert.ok(err instanceof SshPoolClosedError, String(err));
  });

  it('through a tarpit, a call fails at the ready timeout as a Transient SSH_READY_TIMEOUT', T, async () => {
    const h = links(
      { dial: { readyTimeoutMs: 400, connectTimeoutMs: 2_000, keepaliveIntervalMs: 0 } },
      {
        port: tarpit.port,
      },
    );
    const before = tarpit.connections();
    const t0 = performance.now();
    const err = await rejectionOf(
      h.call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 }),
      3_000,
    );
    const took = performance.now() - t0;
    assert.ok(err instanceof SshTimeoutError, String(err));
    assert.equal(err.code, 'SSH_READY_TIMEOUT');
    assert.equal(errorKind(err), 'Transient');
    assert.ok(took >= 380 && took < 1_500, `took ${took} ms`);
    assert.equal(tarpit.connections() - before, 1);
  });
});
