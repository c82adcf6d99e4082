/**
 * LibvirtConnection (and the LibvirtClient handshake on top of it) over `duplexPair()` with a
 * scripted peer: routing by serial, daemon errors, every framing or protocol violation killing the
 * connection with typed errors, budgets, AbortSignals, keepalive, and teardown that never waits on
 * a full write buffer (H1).
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import type { Duplex } from 'node:stream';
import { afterEach, describe, it } from 'node:test';
import { LibvirtClient } from '../../lib/libvirt/client.ts';
import { LibvirtConnection } from '../../lib/libvirt/connection.ts';
import type { ConnectionOptions } from '../../lib/libvirt/connection.ts';
import {
  LibvirtAbortedError,
  LibvirtAuthUnsupportedError,
  LibvirtConnectionError,
  LibvirtError,
  LibvirtKeepaliveError,
  LibvirtProtocolError,
  LibvirtTimeoutError,
} from '../../lib/libvirt/errors.ts';
import type { CallEnd, CallObserver, CallStart } from '../../lib/libvirt/observe.ts';
import { frame, pairWithPeer, rejectionOf, sleep, WIRE, within, xdr } from '../support/fake-daemon.ts';
import type { ScriptedPeer } from '../support/fake-daemon.ts';
import {
  AUTH_LIST_CALL,
  AUTH_LIST_REPLY,
  CONNECT_OPEN_CALL,
  CONNECT_OPEN_REPLY,
  GET_LIB_VERSION_REPLY,
  hex,
  KEEPALIVE_PING,
  KEEPALIVE_PONG,
  LOOKUP_BY_NAME_CALL,
  LOOKUP_BY_NAME_REPLY,
  LOOKUP_ERROR_REPLY,
  POOL_GET_INFO_REPLY,
  PROXY_UUID,
  SUPPORTS_FEATURE_CALL,
  SUPPORTS_FEATURE_REPLY,
} from './fixtures/libvirt-frames.ts';

// Procedure numbers as literals (remote_protocol.x).
const CONNECT_OPEN = 1;
const CONNECT_CLOSE = 2;
const DOMAIN_LOOKUP_BY_NAME = 23;
const AUTH_LIST = 66;
const AUTH_POLKIT = 70;
const STORAGE_POOL_GET_INFO = 87;
const CONNECT_GET_LIB_VERSION = 157;
const CONNECT_SUPPORTS_FEATURE = 60;

const EMPTY = new Uint8Array(0);

interface Rig {
  conn: LibvirtConnection;
  client: Duplex;
  peer: ScriptedPeer;
}

const rigs: Rig[] = [];
function rig(options: ConnectionOptions = {}, peerOptions: { answerPings?: boolean; read?: boolean } = {}): Rig {
  const { client, peer } = pairWithPeer(peerOptions);
  const conn = new LibvirtConnection(client, { label: 'test', ...options });
  const r = { conn, client, peer };
  rigs.push(r);
  return r;
}

afterEach(() => {
  for (const r of rigs.splice(0)) {
    r.conn.kill(new Error('test over'));
    r.peer.dispose();
  }
});

/** Asserts that the connection died of `reason`, destroyed its transport, and that the peer saw it. */
async function assertKilled(r: Rig, reason: new (...args: never[]) => Error): Promise<void> {
  assert.ok(r.conn.isDead, 'connection is dead');
  assert.ok(r.conn.deadReason instanceof reason, `dead reason is ${reason.name}, got ${String(r.conn.deadReason)}`);
  assert.ok(r.client.destroyed, 'transport destroyed');
  assert.equal(r.conn.pendingCalls, 0);
  assert.equal(r.conn.openStreams, 0);
  await within(r.peer.closed, 1000, 'peer sees the close');
}

/** A rejection that is a LibvirtConnectionError caused by `cause`. */
function assertConnectionLost(err: Error, cause: new (...args: never[]) => Error): void {
  assert.ok(err instanceof LibvirtConnectionError, `expected LibvirtConnectionError, got ${err.name}: ${err.message}`);
  assert.ok(err.cause instanceof cause, `expected cause ${cause.name}, got ${String(err.cause)}`);
}

describe('LibvirtConnection: calls and replies', () => {
  it('sends a call with the hand-written bytes and resolves with the reply body', async () => {
    const { conn, peer } = rig();
    const p = conn.call(DOMAIN_LOOKUP_BY_NAME, LOOKUP_BY_NAME_CALL.bytes.subarray(28), {}, 4);
    const call = await peer.nextCall();
    assert.equal(call.raw.toString('hex'), LOOKUP_BY_NAME_CALL.bytes.toString('hex'));
    peer.send(LOOKUP_BY_NAME_REPLY.bytes);
    const body = await within(p, 1000);
    assert.equal(body.toString('hex'), LOOKUP_BY_NAME_REPLY.bytes.subarray(28).toString('hex'));
    assert.equal(conn.pendingCalls, 0);
    assert.equal(conn.bytesOut, LOOKUP_BY_NAME_CALL.bytes.length);
    assert.equal(conn.bytesIn, LOOKUP_BY_NAME_REPLY.bytes.length);
  });

  it('allocates serials from 1 upward', () => {
    const { conn } = rig();
    assert.deepEqual([conn.allocSerial(), conn.allocSerial(), conn.allocSerial()], [1, 2, 3]);
  });

  it('routes concurrent calls answered out of order by serial', async () => {
    const { conn, peer } = rig();
    const procs = [CONNECT_GET_LIB_VERSION, STORAGE_POOL_GET_INFO, DOMAIN_LOOKUP_BY_NAME, CONNECT_GET_LIB_VERSION];
    const promises = procs.map((proc) => conn.call(proc, EMPTY));
    const calls = [];
    for (let i = 0; i < procs.length; i++) calls.push(await peer.nextCall());
    assert.deepEqual(
      calls.map((c) => c.serial),
      [1, 2, 3, 4],
    );
    assert.equal(conn.pendingCalls, 4);
    for (const i of [2, 0, 3, 1]) peer.reply(calls[i]!, xdr.u32(1000 + i));
    const bodies = await within(Promise.all(promises), 1000);
    assert.deepEqual(
      bodies.map((b) => b.readUInt32BE(0)),
      [1000, 1001, 1002, 1003],
    );
    assert.equal(conn.pendingCalls, 0);
  });

  it('reassembles a reply that arrives one byte at a time', async () => {
    const { conn, peer } = rig();
    const p = conn.call(STORAGE_POOL_GET_INFO, EMPTY, {}, 3);
    await peer.nextCall();
    for (const b of POOL_GET_INFO_REPLY.bytes) {
      peer.send(Buffer.from([b]));
      await sleep(0);
    }
    const body = await within(p, 1000);
    assert.equal(body.toString('hex'), POOL_GET_INFO_REPLY.bytes.subarray(28).toString('hex'));
  });

  it('turns an error reply into a LibvirtError with code, domain, message and kind (NO_DOMAIN → NotFound)', async () => {
    const { conn, peer } = rig();
    const p = conn.call(DOMAIN_LOOKUP_BY_NAME, EMPTY, {}, 5);
    await peer.nextCall();
    peer.send(LOOKUP_ERROR_REPLY.bytes);
    const err = await rejectionOf(p);
    assert.ok(err instanceof LibvirtError);
    assert.equal(err.libvirtCode, 42);
    assert.equal(err.libvirtDomain, 10);
    assert.equal(err.libvirtMessage, 'Domain not found');
    assert.equal(err.kind, 'NotFound');
    assert.equal(err.proc, DOMAIN_LOOKUP_BY_NAME);
    assert.equal(conn.isDead, false, 'a daemon error leaves the connection usable');
    const next = conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
    peer.reply(await peer.nextCall(), xdr.u64(9000000n));
    assert.equal((await within(next, 1000)).length, 8);
  });

  it('ignores asynchronous MESSAGE packets of the remote program (events) and STREAM packets of no stream', async () => {
    const { conn, peer } = rig();
    const p = conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
    const call = await peer.nextCall();
    peer.send(frame({ proc: 315, type: WIRE.MESSAGE, serial: 0 }, xdr.u32(7)));
    peer.send(frame({ proc: 208, type: WIRE.STREAM, serial: 77, status: WIRE.CONTINUE }, Buffer.from('late')));
    peer.send(
      frame(
        { proc: CONNECT_GET_LIB_VERSION, type: WIRE.REPLY, serial: call.serial },
        GET_LIB_VERSION_REPLY.bytes.subarray(28),
      ),
    );
    assert.equal((await within(p, 1000)).length, 8);
    assert.equal(conn.isDead, false);
  });

  it('reports each call once to the observer, with bytes and outcome', async () => {
    const starts: CallStart[] = [];
    const ends: CallEnd[] = [];
    const observer: CallObserver = {
      start(call) {
        starts.push(call);
        return { end: (result) => ends.push(result) };
      },
    };
    const { conn, peer } = rig({ observer });
    const ok = conn.call(CONNECT_GET_LIB_VERSION, hex('00000001'));
    peer.reply(await peer.nextCall(), xdr.u64(1n));
    await within(ok, 1000);
    const bad = conn.call(DOMAIN_LOOKUP_BY_NAME, EMPTY);
    peer.replyError(await peer.nextCall(), { code: 42, domain: 10, message: 'gone' });
    await rejectionOf(bad);
    const killed = conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
    conn.kill(new Error('bye'));
    await rejectionOf(killed);
    assert.deepEqual(starts, [
      { proc: CONNECT_GET_LIB_VERSION, serial: 1, bytesOut: 4 },
      { proc: DOMAIN_LOOKUP_BY_NAME, serial: 2, bytesOut: 0 },
      { proc: CONNECT_GET_LIB_VERSION, serial: 3, bytesOut: 0 },
    ]);
    assert.equal(ends.length, 3);
    assert.deepEqual(ends[0], { bytesIn: 8, error: undefined });
    assert.ok(ends[1]!.error instanceof LibvirtError);
    assert.ok(ends[2]!.error instanceof LibvirtConnectionError);
  });
});

describe('LibvirtConnection: protocol violations kill the connection', () => {
  /** Two pending calls, then `bytes` from the peer: both reject, the connection dies of a protocol error. */
  async function violate(bytes: (serials: number[]) => Buffer): Promise<Error[]> {
    const r = rig();
    const a = conn2(r, DOMAIN_LOOKUP_BY_NAME);
    const b = conn2(r, CONNECT_GET_LIB_VERSION);
    const serials = [(await r.peer.nextCall()).serial, (await r.peer.nextCall()).serial];
    r.peer.send(bytes(serials));
    const errs = [await rejectionOf(a, 1000), await rejectionOf(b, 1000)];
    for (const e of errs) assertConnectionLost(e, LibvirtProtocolError);
    await assertKilled(r, LibvirtProtocolError);
    // A later call fails at once, without sending anything.
    const out = r.conn.bytesOut;
    const late = await rejectionOf(r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY), 50);
    assert.ok(late instanceof LibvirtConnectionError);
    assert.equal(r.conn.bytesOut, out);
    return errs;
  }
  function conn2(r: Rig, proc: number): Promise<Buffer> {
    return r.conn.call(proc, EMPTY, { timeoutMs: 10_000 });
  }

  it('a reply for an unknown serial', async () => {
    const [e] = await violate(() => frame({ proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.REPLY, serial: 99 }));
    assert.match((e!.cause as Error).message, /unknown serial/);
  });

  it('a reply whose procedure differs from the call', async () => {
    const [e] = await violate(([s]) => frame({ proc: 24, type: WIRE.REPLY, serial: s! }));
    assert.match((e!.cause as Error).message, /names procedure 24, the call was 23/);
  });

  it('a packet of an unexpected message type (CALL from the daemon)', async () => {
    await violate(([s]) => frame({ proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.CALL, serial: s! }));
  });

  it('a packet of an unknown message type (7)', async () => {
    await violate(([s]) => frame({ proc: DOMAIN_LOOKUP_BY_NAME, type: 7, serial: s! }));
  });

  it('a reply with status CONTINUE', async () => {
    await violate(([s]) => frame({ proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.REPLY, serial: s!, status: WIRE.CONTINUE }));
  });

  it('an unknown program', async () => {
    const [e] = await violate(([s]) =>
      frame({ prog: 0x20008087, proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.REPLY, serial: s! }),
    );
    assert.match((e!.cause as Error).message, /unknown program/);
  });

  it('an unknown version of the remote program', async () => {
    await violate(([s]) => frame({ vers: 2, proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.REPLY, serial: s! }));
  });

  it('a keepalive packet of the wrong type, or an unknown keepalive procedure', async () => {
    await violate(() => frame({ prog: WIRE.KEEPALIVE, proc: WIRE.PING, type: WIRE.REPLY, serial: 0 }));
    await violate(() => frame({ prog: WIRE.KEEPALIVE, proc: 3, type: WIRE.MESSAGE, serial: 0 }));
  });

  it('garbage (an HTTP request)', async () => {
    await violate(() => Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
  });

  it('a length word of 0x7fffffff', async () => {
    await violate(() => hex('7fffffff'));
  });

  it('a length word below 28', async () => {
    await violate(() => hex('00000010' + '00000000'.repeat(3)));
  });

  it('a malformed error body (truncated remote_error)', async () => {
    const [e] = await violate(([s]) =>
      frame({ proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.REPLY, serial: s!, status: WIRE.ERROR }, xdr.u32(42)),
    );
    assert.match((e!.cause as Error).message, /malformed error body/);
  });

  it('an error body with trailing bytes', async () => {
    await violate(([s]) =>
      frame(
        { proc: DOMAIN_LOOKUP_BY_NAME, type: WIRE.REPLY, serial: s!, status: WIRE.ERROR },
        Buffer.concat([LOOKUP_ERROR_REPLY.bytes.subarray(28), xdr.u32(0)]),
      ),
    );
  });

  it('garbage right after a good reply: the good one resolves, the next is rejected', async () => {
    const r = rig();
    const a = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
    const b = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
    const ca = await r.peer.nextCall();
    await r.peer.nextCall();
    r.peer.send(frame({ proc: CONNECT_GET_LIB_VERSION, type: WIRE.REPLY, serial: ca.serial }, xdr.u64(1n)));
    await within(a, 1000);
    r.peer.send(hex('ffffffff'));
    assertConnectionLost(await rejectionOf(b), LibvirtProtocolError);
    await assertKilled(r, LibvirtProtocolError);
  });
});

describe('LibvirtConnection: budgets and cancellation', () => {
  it('a call over its budget gets LibvirtTimeoutError, the others LibvirtConnectionError, and the link dies', async () => {
    const r = rig();
    const t0 = performance.now();
    const slow = r.conn.call(DOMAIN_LOOKUP_BY_NAME, EMPTY, { timeoutMs: 100 });
    const other = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 10_000 });
    const e1 = await rejectionOf(slow, 2000);
    const elapsed = performance.now() - t0;
    assert.ok(e1 instanceof LibvirtTimeoutError, e1.message);
    assert.ok(elapsed >= 95 && elapsed < 1000, `timed out after ${elapsed} ms`);
    assertConnectionLost(await rejectionOf(other, 100), LibvirtTimeoutError);
    await assertKilled(r, LibvirtTimeoutError);
    const t1 = performance.now();
    const late = await rejectionOf(r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 10_000 }), 50);
    assert.ok(late instanceof LibvirtConnectionError);
    assert.ok(performance.now() - t1 < 50);
  });

  it('uses the connection default budget when the call names none', async () => {
    const r = rig({ callTimeoutMs: 80 });
    const err = await rejectionOf(r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY), 2000);
    assert.ok(err instanceof LibvirtTimeoutError);
  });

  it('an abort rejects the call with LibvirtAbortedError and kills the connection', async () => {
    const r = rig();
    const ac = new AbortController();
    const other = new AbortController();
    const p = r.conn.call(DOMAIN_LOOKUP_BY_NAME, EMPTY, { signal: ac.signal });
    const q = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { signal: other.signal });
    await r.peer.nextCall();
    assert.equal(getEventListeners(ac.signal, 'abort').length, 1);
    const reason = new Error('workflow cancelled');
    ac.abort(reason);
    const err = await rejectionOf(p, 100);
    assert.ok(err instanceof LibvirtAbortedError);
    assert.equal(err.cause, reason);
    assertConnectionLost(await rejectionOf(q, 100), LibvirtAbortedError);
    await assertKilled(r, LibvirtAbortedError);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
    assert.equal(getEventListeners(other.signal, 'abort').length, 0);
  });

  it('an already-aborted signal rejects without sending anything', async () => {
    const r = rig();
    const ac = new AbortController();
    ac.abort();
    const err = await rejectionOf(r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { signal: ac.signal }), 50);
    assert.ok(err instanceof LibvirtAbortedError);
    await sleep(20);
    assert.equal(r.conn.bytesOut, 0);
    assert.equal(r.peer.bytesReceived, 0);
    assert.equal(r.conn.pendingCalls, 0);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  });

  it('a call that completes leaves no listener on its signal and no timer running', async () => {
    const r = rig();
    const ac = new AbortController();
    const p = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { signal: ac.signal, timeoutMs: 50 });
    r.peer.reply(await r.peer.nextCall(), xdr.u64(1n));
    await within(p, 1000);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
    await sleep(100); // past the budget: a leaked timer would kill the connection
    assert.equal(r.conn.isDead, false);
    ac.abort();
    assert.equal(r.conn.isDead, false);
  });
});

describe('LibvirtConnection: keepalive', () => {
  it('answers a PING from the peer with a PONG, byte for byte', async () => {
    const r = rig();
    r.peer.send(KEEPALIVE_PING.bytes);
    const pong = await r.peer.next((p) => p.prog === WIRE.KEEPALIVE);
    assert.equal(pong.raw.toString('hex'), KEEPALIVE_PONG.bytes.toString('hex'));
    assert.equal(r.conn.isDead, false);
  });

  it('accepts an unsolicited PONG', async () => {
    const r = rig();
    r.peer.send(KEEPALIVE_PONG.bytes);
    const p = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
    r.peer.reply(await r.peer.nextCall(), xdr.u64(1n));
    await within(p, 1000);
  });

  it('declares a silent peer dead within intervalMs × (countMax + 1) + slack', async () => {
    const r = rig();
    const intervalMs = 100;
    const countMax = 2;
    const pending = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 10_000 });
    await r.peer.nextCall();
    const t0 = performance.now();
    r.conn.startKeepalive({ intervalMs, countMax });
    const died = new Promise<Error>((resolve) => r.conn.onDeath(resolve));
    const reason = await within(died, intervalMs * (countMax + 1) + 400, 'keepalive death');
    const elapsed = performance.now() - t0;
    assert.ok(reason instanceof LibvirtKeepaliveError, reason.message);
    assert.ok(elapsed >= intervalMs * (countMax + 1) - 60, `dead after ${elapsed} ms: too early`);
    assertConnectionLost(await rejectionOf(pending, 100), LibvirtKeepaliveError);
    const pings = r.peer.received.filter((p) => p.prog === WIRE.KEEPALIVE);
    assert.equal(pings.length, countMax);
    for (const p of pings) assert.equal(p.raw.toString('hex'), KEEPALIVE_PING.bytes.toString('hex'));
    await assertKilled(r, LibvirtKeepaliveError);
  });

  it('keeps a peer that answers its PINGs alive, and starts only once', async () => {
    const r = rig({}, { answerPings: true });
    r.conn.startKeepalive({ intervalMs: 100, countMax: 1 });
    r.conn.startKeepalive({ intervalMs: 100, countMax: 1 });
    await sleep(700);
    assert.equal(r.conn.isDead, false);
    const pings = r.peer.received.filter((p) => p.prog === WIRE.KEEPALIVE && p.proc === WIRE.PING);
    assert.ok(pings.length >= 3 && pings.length <= 7, `${pings.length} pings in 700 ms`);
  });

  it('sends no PING while the peer keeps talking', async () => {
    const r = rig();
    r.conn.startKeepalive({ intervalMs: 100, countMax: 1 });
    for (let i = 0; i < 10; i++) {
      r.peer.send(KEEPALIVE_PONG.bytes);
      await sleep(40);
    }
    assert.equal(r.conn.isDead, false);
    assert.equal(r.peer.received.filter((p) => p.prog === WIRE.KEEPALIVE).length, 0);
  });
});

describe('LibvirtConnection: teardown', () => {
  it('the peer closing its end rejects pending calls with LibvirtConnectionError', async () => {
    const r = rig();
    const p = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 10_000 });
    await r.peer.nextCall();
    r.peer.socket.end();
    const err = await rejectionOf(p, 500);
    assert.ok(err instanceof LibvirtConnectionError);
    assert.match(err.message, /closed by peer/);
    assert.ok(r.conn.deadReason instanceof LibvirtConnectionError);
    assert.ok(r.client.destroyed);
  });

  it('the peer destroying its end rejects pending calls with LibvirtConnectionError', async () => {
    const r = rig();
    const p = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 10_000 });
    await r.peer.nextCall();
    r.peer.socket.destroy();
    assert.ok((await rejectionOf(p, 500)) instanceof LibvirtConnectionError);
  });

  it('a transport error rejects pending calls with LibvirtConnectionError carrying the cause', async () => {
    const r = rig();
    const p = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 10_000 });
    const boom = new Error('ECONNRESET');
    r.client.destroy(boom);
    const err = await rejectionOf(p, 500);
    assert.ok(err instanceof LibvirtConnectionError);
    assert.match(err.message, /ECONNRESET/);
    assert.equal((r.conn.deadReason as Error).cause, boom);
  });

  it('kill is idempotent, the first reason wins, and death listeners run once', () => {
    const r = rig();
    const seen: Error[] = [];
    r.conn.onDeath((e) => seen.push(e));
    const unsubscribed = r.conn.onDeath((e) => seen.push(e));
    unsubscribed();
    const first = new Error('first');
    r.conn.kill(first);
    r.conn.kill(new Error('second'));
    r.conn.kill(new LibvirtTimeoutError('third'));
    assert.equal(r.conn.deadReason, first);
    assert.deepEqual(seen, [first]);
    const late: Error[] = [];
    r.conn.onDeath((e) => late.push(e));
    assert.deepEqual(late, [first], 'a listener added after death runs at once');
  });

  it('a throwing observer or death listener neither stops teardown nor leaves a call unsettled', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const observer: CallObserver = {
        start: () => ({
          end: () => {
            throw new Error('exporter broke');
          },
        }),
      };
      const r = rig({ observer });
      r.conn.onDeath(() => {
        throw new Error('listener broke');
      });
      const answered = r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY);
      r.peer.reply(await r.peer.nextCall(), xdr.u64(1n));
      assert.equal((await within(answered, 1000)).length, 8, 'the reply still resolves its call');
      const pending = [r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY), r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY)];
      r.conn.kill(new Error('link dead'));
      for (const p of pending) assert.ok((await rejectionOf(p, 100)) instanceof LibvirtConnectionError);
      assert.ok(r.client.destroyed, 'the transport is destroyed all the same');
      await sleep(10);
      assert.ok(warnings.some((w) => w.message === 'exporter broke'));
      assert.ok(warnings.some((w) => w.message === 'listener broke'));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('whenWritable resolves at once on an idle transport and rejects on a dead one with its reason', async () => {
    const r = rig();
    await within(r.conn.whenWritable(), 100);
    const gone = new LibvirtConnectionError('gone');
    r.conn.kill(gone);
    assert.equal(await rejectionOf(r.conn.whenWritable(), 100), gone);
  });

  it('kill settles every waiter before it destroys the transport (H1 order)', async () => {
    const r = rig({}, { read: false });
    const calls = [r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY), r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY)];
    const outcomes = calls.map((c) =>
      c.then(
        () => 'resolved',
        () => 'rejected',
      ),
    );
    const sinkDeaths: Error[] = [];
    r.conn.registerStream(r.conn.allocSerial(), { onPacket: () => {}, onDead: (e) => void sinkDeaths.push(e) });
    const listenerRan: Error[] = [];
    r.conn.onDeath((e) => void listenerRan.push(e));
    let atDestroy:
      { pending: number; streams: number; reason: Error | undefined; sinks: number; listeners: number } | undefined;
    const destroy = r.client.destroy.bind(r.client);
    r.client.destroy = (err?: Error) => {
      atDestroy ??= {
        pending: r.conn.pendingCalls,
        streams: r.conn.openStreams,
        reason: r.conn.deadReason,
        sinks: sinkDeaths.length,
        listeners: listenerRan.length,
      };
      return destroy(err);
    };
    const reason = new LibvirtConnectionError('link marked dead');
    r.conn.kill(reason);
    assert.deepEqual(atDestroy, { pending: 0, streams: 0, reason, sinks: 1, listeners: 1 });
    assert.deepEqual(await Promise.all(outcomes), ['rejected', 'rejected']);
  });

  it('kill returns at once and rejects every pending call while the peer reads nothing (H1)', async () => {
    const r = rig({}, { read: false });
    const big = Buffer.alloc(64 * 1024 * 1024);
    const calls = [
      r.conn.call(CONNECT_GET_LIB_VERSION, big, { timeoutMs: 60_000 }),
      r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: 60_000 }),
      r.conn.call(CONNECT_GET_LIB_VERSION, big, { timeoutMs: 60_000 }),
    ];
    assert.ok(r.client.writableLength > 64 * 1024 * 1024, `unflushed ${r.client.writableLength}`);
    assert.ok(r.conn.writeBlocked);
    const t0 = performance.now();
    r.conn.kill(new LibvirtConnectionError('link marked dead'));
    assert.ok(performance.now() - t0 < 50, 'kill returned promptly');
    for (const c of calls) assert.ok((await rejectionOf(c, 100)) instanceof LibvirtConnectionError);
    assert.ok(performance.now() - t0 < 150);
    assert.ok(r.client.destroyed);
    assert.equal(r.conn.pendingCalls, 0);
  });
});

describe('LibvirtClient over a scripted daemon', () => {
  async function handshake(peer: ScriptedPeer, authReply: Buffer, supported = 1): Promise<void> {
    const auth = await peer.nextCall();
    assert.equal(auth.raw.toString('hex'), AUTH_LIST_CALL.bytes.toString('hex'));
    peer.send(authReply);
    const open = await peer.nextCall();
    assert.equal(open.body.toString('hex'), CONNECT_OPEN_CALL.bytes.subarray(28).toString('hex'));
    peer.reply(open);
    const feature = await peer.nextCall();
    assert.equal(feature.proc, CONNECT_SUPPORTS_FEATURE);
    assert.equal(feature.body.toString('hex'), SUPPORTS_FEATURE_CALL.bytes.subarray(28).toString('hex'));
    peer.reply(feature, xdr.i32(supported));
  }

  it('performs AUTH_LIST, CONNECT_OPEN and CONNECT_SUPPORTS_FEATURE with the hand-written bytes, then keepalive', async () => {
    const { client: transport, peer } = pairWithPeer();
    const connecting = LibvirtClient.connect(transport, { label: 't', keepalive: { intervalMs: 100, countMax: 5 } });
    const auth = await peer.nextCall();
    assert.equal(auth.raw.toString('hex'), AUTH_LIST_CALL.bytes.toString('hex'));
    peer.send(AUTH_LIST_REPLY.bytes);
    const open = await peer.nextCall();
    assert.equal(open.raw.toString('hex'), CONNECT_OPEN_CALL.bytes.toString('hex'));
    peer.send(CONNECT_OPEN_REPLY.bytes);
    const feature = await peer.nextCall();
    assert.equal(feature.raw.toString('hex'), SUPPORTS_FEATURE_CALL.bytes.toString('hex'));
    peer.send(SUPPORTS_FEATURE_REPLY.bytes);
    const client = await within(connecting, 1000);
    const ping = await peer.next((p) => p.prog === WIRE.KEEPALIVE, 1000);
    assert.equal(ping.raw.toString('hex'), KEEPALIVE_PING.bytes.toString('hex'));
    client.connection.kill(new Error('done'));
    peer.dispose();
  });

  it('does not start keepalive when the daemon lacks the feature', async () => {
    const { client: transport, peer } = pairWithPeer();
    const connecting = LibvirtClient.connect(transport, { keepalive: { intervalMs: 60, countMax: 1 } });
    await handshake(peer, AUTH_LIST_REPLY.bytes, 0);
    const client = await within(connecting, 1000);
    await sleep(300);
    assert.equal(client.connection.isDead, false);
    assert.equal(peer.received.filter((p) => p.prog === WIRE.KEEPALIVE).length, 0);
    client.connection.kill(new Error('done'));
    peer.dispose();
  });

  it('calls AUTH_POLKIT when polkit is the only method offered', async () => {
    const { client: transport, peer } = pairWithPeer();
    const connecting = LibvirtClient.connect(transport, { keepalive: false });
    const auth = await peer.nextCall();
    peer.reply(auth, xdr.cat(xdr.u32(1), xdr.i32(2))); // types = [POLKIT]
    const polkit = await peer.nextCall();
    assert.equal(polkit.proc, AUTH_POLKIT);
    assert.equal(polkit.body.length, 0);
    peer.reply(polkit, xdr.i32(1)); // remote_auth_polkit_ret { int complete }
    const open = await peer.nextCall();
    assert.equal(open.proc, CONNECT_OPEN);
    peer.reply(open);
    const client = await within(connecting, 1000);
    assert.equal(client.connection.isDead, false);
    client.connection.kill(new Error('done'));
    peer.dispose();
  });

  it('refuses a daemon that offers only SASL, and kills the connection', async () => {
    const { client: transport, peer } = pairWithPeer();
    const connecting = LibvirtClient.connect(transport);
    peer.reply(await peer.nextCall(), xdr.cat(xdr.u32(1), xdr.i32(1))); // types = [SASL]
    const err = await rejectionOf(connecting, 1000);
    assert.ok(err instanceof LibvirtAuthUnsupportedError);
    assert.equal(err.kind, 'Permanent');
    assert.ok(transport.destroyed);
    await within(peer.closed, 1000);
    assert.equal(peer.received.filter((p) => p.proc === AUTH_LIST).length, 1);
    assert.equal(peer.received.length, 1, 'nothing sent after AUTH_LIST');
  });

  it('rejects with the daemon error when CONNECT_OPEN fails, and kills the connection', async () => {
    const { client: transport, peer } = pairWithPeer();
    const connecting = LibvirtClient.connect(transport, { uri: 'qemu:///nope' });
    peer.send(AUTH_LIST_REPLY.bytes);
    await peer.nextCall();
    const open = await peer.nextCall();
    assert.equal(open.body.subarray(8, 8 + 12).toString(), 'qemu:///nope');
    peer.replyError(open, { code: 38, domain: 13, message: 'Failed to connect socket' });
    const err = await rejectionOf(connecting, 1000);
    assert.ok(err instanceof LibvirtError);
    assert.equal(err.libvirtCode, 38);
    assert.ok(transport.destroyed);
  });

  it('a handshake call over its budget rejects with LibvirtTimeoutError', async () => {
    const { client: transport, peer } = pairWithPeer();
    const err = await rejectionOf(LibvirtClient.connect(transport, { handshakeTimeoutMs: 80 }), 2000);
    assert.ok(err instanceof LibvirtTimeoutError);
    assert.ok(transport.destroyed);
    peer.dispose();
  });

  it('decodes typed results and kills the connection on a malformed reply body', async () => {
    const r = rig();
    const client = new LibvirtClient(r.conn);
    const dom = client.domainLookupByName('proxy-1');
    const call = await r.peer.nextCall();
    assert.equal(call.body.toString('hex'), LOOKUP_BY_NAME_CALL.bytes.subarray(28).toString('hex'));
    r.peer.reply(call, LOOKUP_BY_NAME_REPLY.bytes.subarray(28));
    const d = await within(dom, 1000);
    assert.equal(d.name, 'proxy-1');
    assert.equal(Buffer.from(d.uuid).toString('hex'), PROXY_UUID);
    assert.equal(d.id, -1);

    const info = client.storagePoolGetInfo({ name: 'default', uuid: new Uint8Array(16) });
    r.peer.reply(await r.peer.nextCall(), POOL_GET_INFO_REPLY.bytes.subarray(28));
    assert.deepEqual(await within(info, 1000), {
      state: 2,
      capacity: 107374182400n,
      allocation: 21474877440n,
      available: 85899304960n,
    });

    const version = client.getLibVersion();
    r.peer.reply(await r.peer.nextCall(), xdr.u32(1)); // 4 bytes where a u64 belongs
    const err = await rejectionOf(version, 1000);
    assert.ok(err instanceof LibvirtProtocolError);
    await assertKilled(r, LibvirtProtocolError);
  });

  it('close sends CONNECT_CLOSE and destroys the transport; it never throws', async () => {
    const r = rig();
    const client = new LibvirtClient(r.conn);
    const closing = client.close();
    const call = await r.peer.nextCall();
    assert.equal(call.proc, CONNECT_CLOSE);
    r.peer.reply(call);
    await within(closing, 1000);
    assert.ok(r.conn.isDead);
    assert.ok(r.client.destroyed);
    await within(client.close(), 100);
  });
});

describe('duration options are validated', () => {
  for (const bad of [Infinity, NaN, 0, -5, 2 ** 31]) {
    it(`timeoutMs ${bad} is refused naming the field, and the connection lives on`, async () => {
      const r = rig();
      const err = await rejectionOf(r.conn.call(CONNECT_GET_LIB_VERSION, EMPTY, { timeoutMs: bad }));
      assert.ok(err instanceof RangeError);
      assert.match(err.message, /timeoutMs must be a number of milliseconds/);
      assert.equal(r.conn.isDead, false);
      assert.equal(r.conn.pendingCalls, 0);
    });
  }
  it('callTimeoutMs is checked when the connection is made', () => {
    const { client, peer } = pairWithPeer();
    try {
      assert.throws(() => new LibvirtConnection(client, { callTimeoutMs: Infinity }), /callTimeoutMs must be/);
    } finally {
      client.destroy();
      peer.dispose();
    }
  });
});
