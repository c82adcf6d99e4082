/**
 * A hostile "daemon" on a real unix socket (a net.Server in a temp dir) answers the client's call
 * with: an oversized length word, a truncated frame then silence, a reply for an unknown serial,
 * 1 MiB of random garbage, a length that claims 32 MiB then dribbles bytes, and a peer that never
 * reads. For each, run 200 times: the pending call is rejected with a typed error within its budget,
 * the client destroys the socket (the server sees it close), the process stays up, and RSS growth
 * stays bounded.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LibvirtConnection } from '../../lib/libvirt/connection.ts';
import { LibvirtConnectionError, LibvirtProtocolError, LibvirtTimeoutError } from '../../lib/libvirt/errors.ts';
import { frame, rejectionOf, WIRE, within } from '../support/fake-daemon.ts';

const CONNECT_GET_LIB_VERSION = 157;
const MiB = 1024 * 1024;
const ROUNDS = 200;
const BATCH = 25;
const BUDGET_MS = 300;
const RSS_GROWTH_LIMIT = 64 * MiB;
const SCENARIO_DEADLINE_MS = 60_000;

/** What the hostile server does once it has read the client's call (the first 28+ bytes). */
type Behaviour = (socket: net.Socket, call: { serial: number; proc: number }) => void;

describe('libvirt client against a hostile peer on a unix socket', { timeout: 300_000 }, () => {
  let dir: string;
  let path: string;
  let server: net.Server;
  let behaviour: Behaviour = () => {};
  /** Server-side sockets still open, and how many the server accepted in all. */
  const open = new Set<net.Socket>();
  let accepted = 0;
  const serverClosed: Promise<void>[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ep-hostile-'));
    path = join(dir, 'libvirt-sock');
    server = net.createServer((socket) => {
      accepted++;
      open.add(socket);
      socket.on('error', () => {});
      serverClosed.push(
        new Promise<void>((resolve) =>
          socket.once('close', () => {
            open.delete(socket);
            resolve();
          }),
        ),
      );
      const act = behaviour;
      let head = Buffer.alloc(0);
      const onData = (chunk: Buffer): void => {
        head = Buffer.concat([head, chunk]);
        if (head.length < 28) return;
        socket.off('data', onData);
        act(socket, { proc: head.readInt32BE(12), serial: head.readUInt32BE(20) });
      };
      socket.on('data', onData);
    });
    server.listen(path);
    await once(server, 'listening');
  });

  after(async () => {
    for (const s of open) s.destroy();
    server.close();
    await once(server, 'close');
    rmSync(dir, { recursive: true, force: true });
  });

  /** One client connection: dial, call, and return the call's rejection and how long it took. */
  async function attempt(): Promise<{ err: Error; ms: number; conn: LibvirtConnection; socket: net.Socket }> {
    const socket = net.createConnection(path);
    await once(socket, 'connect');
    const conn = new LibvirtConnection(socket, { label: 'hostile', callTimeoutMs: 10_000 });
    const t0 = performance.now();
    const err = await rejectionOf(
      conn.call(CONNECT_GET_LIB_VERSION, new Uint8Array(0), { timeoutMs: BUDGET_MS }),
      BUDGET_MS + 2000,
    );
    return { err, ms: performance.now() - t0, conn, socket };
  }

  /** Runs `ROUNDS` attempts in batches, checks each with `check`, and bounds RSS growth. */
  async function scenario(b: Behaviour, check: (err: Error, ms: number) => void): Promise<string> {
    behaviour = b;
    const started = Date.now();
    const accepted0 = accepted;
    let rss0 = 0;
    for (let done = 0; done < ROUNDS; done += BATCH) {
      // The first batch warms up (buffers, JIT, socket pools); growth is measured from there.
      if (done === BATCH) rss0 = process.memoryUsage().rss;
      assert.ok(Date.now() - started < SCENARIO_DEADLINE_MS, 'scenario deadline');
      const results = await Promise.all(Array.from({ length: Math.min(BATCH, ROUNDS - done) }, () => attempt()));
      for (const { err, ms, conn, socket } of results) {
        check(err, ms);
        assert.ok(conn.isDead, 'connection dead');
        assert.ok(socket.destroyed, 'client socket destroyed');
        assert.equal(conn.pendingCalls, 0);
      }
    }
    await within(Promise.all(serverClosed.splice(0)), 5000, 'the server sees every connection close');
    assert.equal(accepted - accepted0, ROUNDS);
    assert.equal(open.size, 0, 'no server-side socket left open');
    const growth = process.memoryUsage().rss - rss0;
    assert.ok(growth < RSS_GROWTH_LIMIT, `rss grew by ${(growth / MiB).toFixed(1)} MiB over ${ROUNDS} rounds`);
    return `${ROUNDS} rounds in ${Date.now() - started} ms; rss grew by ${(growth / MiB).toFixed(1)} MiB after warm-up`;
  }

  function isProtocolDrop(err: Error): boolean {
    return err instanceof LibvirtConnectionError && err.cause instanceof LibvirtProtocolError;
  }

  it('(a) an oversized length word: dropped at once with a protocol error', async (t) => {
    t.diagnostic(
      await scenario(
        (socket) => socket.write(Buffer.concat([Buffer.from('7fffffff', 'hex'), randomBytes(64)])),
        (err, ms) => {
          assert.ok(isProtocolDrop(err), `${err.name}: ${err.message}`);
          assert.ok(ms < BUDGET_MS, `dropped after ${ms} ms, not at its budget`);
        },
      ),
    );
  });

  it('(a2) a length of 32 MiB + 5 (one past the maximum): dropped at once', async (t) => {
    t.diagnostic(
      await scenario(
        (socket) => socket.write(Buffer.from('02000005' + '20008086', 'hex')),
        (err) => assert.ok(isProtocolDrop(err), `${err.name}: ${err.message}`),
      ),
    );
  });

  it('(b) a truncated frame then silence: the call ends at its budget with LibvirtTimeoutError', async (t) => {
    t.diagnostic(
      await scenario(
        (socket, call) => {
          const reply = frame({ proc: call.proc, type: WIRE.REPLY, serial: call.serial }, Buffer.alloc(8));
          socket.write(reply.subarray(0, 20)); // then nothing, ever
        },
        (err, ms) => {
          assert.ok(err instanceof LibvirtTimeoutError, `${err.name}: ${err.message}`);
          assert.ok(ms >= BUDGET_MS - 10 && ms < BUDGET_MS + 1000, `ended after ${ms} ms`);
        },
      ),
    );
  });

  it('(c) a reply for an unknown serial: dropped with a protocol error', async (t) => {
    t.diagnostic(
      await scenario(
        (socket, call) =>
          socket.write(frame({ proc: call.proc, type: WIRE.REPLY, serial: call.serial + 1000 }, Buffer.alloc(8))),
        (err) => {
          assert.ok(isProtocolDrop(err), `${err.name}: ${err.message}`);
          assert.match((err.cause as Error).message, /unknown serial/);
        },
      ),
    );
  });

  // The hostile server's own allocations are not the client's: it reuses a pool of garbage.
  const garbage = Array.from({ length: BATCH }, () => randomBytes(MiB));
  let garbageNext = 0;

  it('(d) 1 MiB of random garbage: dropped with a protocol error (or, if the garbage parses as a long frame, at the budget)', async (t) => {
    t.diagnostic(
      await scenario(
        (socket) => socket.write(garbage[garbageNext++ % garbage.length]!),
        (err, ms) => {
          assert.ok(isProtocolDrop(err) || err instanceof LibvirtTimeoutError, `${err.name}: ${err.message}`);
          assert.ok(ms < BUDGET_MS + 1000);
        },
      ),
    );
  });

  it('(e) a length that claims 32 MiB then dribbles bytes: the call ends at its budget', async (t) => {
    t.diagnostic(
      await scenario(
        (socket) => {
          socket.write(Buffer.from('02000000', 'hex')); // 32 MiB, within the maximum
          const dribble = setInterval(() => {
            if (socket.destroyed || !socket.writable) clearInterval(dribble);
            else socket.write(randomBytes(1));
          }, 10);
          socket.once('close', () => clearInterval(dribble));
        },
        (err, ms) => {
          assert.ok(err instanceof LibvirtTimeoutError, `${err.name}: ${err.message}`);
          assert.ok(ms < BUDGET_MS + 1000);
        },
      ),
    );
  });

  it('(f) a peer that never reads: killing the link is immediate despite 64 MiB of unflushed writes (H1)', async () => {
    behaviour = (socket) => socket.pause();
    const rss0 = process.memoryUsage().rss;
    const big = Buffer.alloc(64 * MiB);
    for (let round = 0; round < 20; round++) {
      const socket = net.createConnection(path);
      await once(socket, 'connect');
      const conn = new LibvirtConnection(socket, { label: 'stuck' });
      const calls = [
        conn.call(CONNECT_GET_LIB_VERSION, big, { timeoutMs: 60_000 }),
        conn.call(CONNECT_GET_LIB_VERSION, new Uint8Array(0), { timeoutMs: 60_000 }),
      ];
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.ok(socket.writableLength > 32 * MiB, `unflushed ${socket.writableLength}`);
      const t0 = performance.now();
      conn.kill(new LibvirtConnectionError('host marked dead'));
      assert.ok(performance.now() - t0 < 50, 'kill returned promptly');
      for (const c of calls) assert.ok((await rejectionOf(c, 100)) instanceof LibvirtConnectionError);
      assert.ok(socket.destroyed);
    }
    // A paused server notices EOF only once it reads again: let it drain what reached it.
    for (const s of open) s.resume();
    await within(Promise.all(serverClosed.splice(0)), 5000, 'the server sees every connection close');
    assert.equal(open.size, 0);
    const growth = process.memoryUsage().rss - rss0;
    assert.ok(growth < RSS_GROWTH_LIMIT + 64 * MiB, `rss grew by ${(growth / MiB).toFixed(1)} MiB`);
  });
});
