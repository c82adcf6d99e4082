/**
 * A scripted libvirt peer for unit tests of the client: it frames and unframes packets with its
 * own few lines of code (no code from lib/libvirt or lib/xdr; only the type of the six header
 * words), so what it sees is what went on the wire, and what it sends is written independently of
 * the encoder under test.
 *
 * Use it over `duplexPair()` (`pairWithPeer`) or over any socket (`new ScriptedPeer(socket)`).
 * Tests drive it step by step: `await peer.nextCall()`, then `peer.reply(call, body)`.
 */
import { within } from './bounded.ts';
import { duplexPair } from 'node:stream';
import type { Duplex } from 'node:stream';
import type { Header } from '../../lib/libvirt/packet.ts';

// Wire constants, as literals (deliberately not imported from lib/libvirt/constants.ts).
export const WIRE = {
  REMOTE: 0x20008086,
  KEEPALIVE: 0x6b656570,
  CALL: 0,
  REPLY: 1,
  MESSAGE: 2,
  STREAM: 3,
  OK: 0,
  ERROR: 1,
  CONTINUE: 2,
  PING: 1,
  PONG: 2,
} as const;

/** One packet as the peer saw it on the wire: the six header words, the body and the frame. */
export interface WirePacket extends Header {
  body: Buffer;
  /** The whole frame, length word included. */
  raw: Buffer;
}

export interface FrameHeader {
  prog?: number;
  vers?: number;
  proc: number;
  type: number;
  serial: number;
  status?: number;
}

/** Builds one frame (length word, six header words, body) without the code under test. */
export function frame(h: FrameHeader, body: Uint8Array = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(28);
  head.writeUInt32BE(28 + body.length, 0);
  head.writeUInt32BE(h.prog ?? WIRE.REMOTE, 4);
  head.writeUInt32BE(h.vers ?? 1, 8);
  head.writeInt32BE(h.proc, 12);
  head.writeInt32BE(h.type, 16);
  head.writeUInt32BE(h.serial, 20);
  head.writeInt32BE(h.status ?? WIRE.OK, 24);
  return Buffer.concat([head, body]);
}

/** A tiny XDR writer for the peer's replies (independent of lib/xdr). */
export const xdr = {
  u32(n: number): Buffer {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n >>> 0);
    return b;
  },
  i32(n: number): Buffer {
    const b = Buffer.alloc(4);
    b.writeInt32BE(n);
    return b;
  },
  u64(n: bigint): Buffer {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(n);
    return b;
  },
  str(s: string): Buffer {
    const bytes = Buffer.from(s, 'utf8');
    const pad = (4 - (bytes.length % 4)) % 4;
    return Buffer.concat([xdr.u32(bytes.length), bytes, Buffer.alloc(pad)]);
  },
  optStr(s: string | null): Buffer {
    return s === null ? xdr.u32(0) : Buffer.concat([xdr.u32(1), xdr.str(s)]);
  },
  cat(...parts: Buffer[]): Buffer {
    return Buffer.concat(parts);
  },
};

export interface PeerError {
  code: number;
  domain: number;
  message: string | null;
  level?: number;
  str1?: string | null;
  int1?: number;
}

/** A remote_error body with no dom/net and the given fields. */
export function remoteErrorBody(e: PeerError): Buffer {
  return xdr.cat(
    xdr.i32(e.code),
    xdr.i32(e.domain),
    xdr.optStr(e.message),
    xdr.i32(e.level ?? 2),
    xdr.u32(0), // dom absent
    xdr.optStr(e.str1 ?? null),
    xdr.u32(0), // str2 absent
    xdr.u32(0), // str3 absent
    xdr.i32(e.int1 ?? -1),
    xdr.i32(-1), // int2
    xdr.u32(0), // net absent
  );
}

export interface PeerOptions {
  /** Answer keepalive PINGs with PONG automatically. Default false. */
  answerPings?: boolean;
  /** Start reading at once. Default true; false leaves the socket unread (the client's writes back up). */
  read?: boolean;
  /** Keep STREAM/CONTINUE packets in `received`. Default true; false only counts them (long uploads). */
  keepStreamData?: boolean;
}

interface Waiter {
  match: (p: WirePacket) => boolean;
  resolve: (p: WirePacket) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

/** The scripted end of a connection. */
export class ScriptedPeer {
  readonly socket: Duplex;
  /** Every packet received, in order. */
  readonly received: WirePacket[] = [];
  /** Raw bytes received. */
  bytesReceived = 0;
  /** STREAM/CONTINUE packets and payload bytes received (counted even when not kept). */
  streamPackets = 0;
  streamBytes = 0;
  readonly closed: Promise<void>;
  #isClosed = false;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #queue: WirePacket[] = [];
  #waiters: Waiter[] = [];
  readonly #answerPings: boolean;
  readonly #keepStreamData: boolean;
  readonly #onData = (chunk: Buffer): void => this.#receive(chunk);

  constructor(socket: Duplex, options: PeerOptions = {}) {
    this.socket = socket;
    this.#answerPings = options.answerPings ?? false;
    this.#keepStreamData = options.keepStreamData ?? true;
    socket.on('error', () => {});
    this.closed = new Promise<void>((resolve) => {
      const done = (): void => {
        this.#isClosed = true;
        resolve();
      };
      socket.once('end', done);
      socket.once('close', done);
    });
    if (options.read ?? true) this.startReading();
  }

  get isClosed(): boolean {
    return this.#isClosed;
  }

  startReading(): void {
    this.socket.on('data', this.#onData);
  }

  stopReading(): void {
    this.socket.off('data', this.#onData);
    this.socket.pause();
  }

  /** Reads whatever is buffered now (for a peer that reads slowly with `read: false`). */
  readSome(): number {
    let n = 0;
    for (let chunk = this.socket.read() as Buffer | null; chunk !== null; chunk = this.socket.read() as Buffer | null) {
      n += chunk.length;
      this.#receive(chunk);
    }
    return n;
  }

  /** The first `n` buffered bytes, removed from the buffer. */
  #take(n: number): Buffer {
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    const out = Buffer.from(all.subarray(0, n));
    this.#chunks = all.length > n ? [all.subarray(n)] : [];
    this.#buffered -= n;
    return out;
  }

  #peekLength(): number {
    const first = this.#chunks[0]!;
    if (first.length >= 4) return first.readUInt32BE(0);
    return Buffer.concat(this.#chunks).readUInt32BE(0);
  }

  #receive(chunk: Buffer): void {
    this.bytesReceived += chunk.length;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    while (this.#buffered >= 4) {
      const len = this.#peekLength();
      if (len < 28) throw new Error(`peer: client sent a packet of length ${len}`);
      if (this.#buffered < len) break;
      const raw = this.#take(len);
      const p: WirePacket = {
        prog: raw.readUInt32BE(4),
        vers: raw.readUInt32BE(8),
        proc: raw.readInt32BE(12),
        type: raw.readInt32BE(16),
        serial: raw.readUInt32BE(20),
        status: raw.readInt32BE(24),
        body: raw.subarray(28),
        raw,
      };
      if (p.type === WIRE.STREAM && p.status === WIRE.CONTINUE) {
        this.streamPackets++;
        this.streamBytes += p.body.length;
        if (!this.#keepStreamData) continue;
      }
      this.received.push(p);
      if (this.#answerPings && p.prog === WIRE.KEEPALIVE && p.proc === WIRE.PING) {
        this.send(frame({ prog: WIRE.KEEPALIVE, proc: WIRE.PONG, type: WIRE.MESSAGE, serial: 0 }));
        continue;
      }
      const i = this.#waiters.findIndex((w) => w.match(p));
      if (i >= 0) {
        const [w] = this.#waiters.splice(i, 1);
        clearTimeout(w!.timer);
        w!.resolve(p);
      } else {
        this.#queue.push(p);
      }
    }
  }

  /** The next packet matching `match` (default: any), within `timeoutMs`. */
  next(match: (p: WirePacket) => boolean = () => true, timeoutMs = 3000): Promise<WirePacket> {
    const i = this.#queue.findIndex(match);
    if (i >= 0) return Promise.resolve(this.#queue.splice(i, 1)[0]!);
    return new Promise<WirePacket>((resolve, reject) => {
      const w: Waiter = {
        match,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters.splice(this.#waiters.indexOf(w), 1);
          reject(new Error(`peer: no matching packet within ${timeoutMs} ms (received ${this.received.length})`));
        }, timeoutMs),
      };
      this.#waiters.push(w);
    });
  }

  /** The next CALL of the remote program (stream data and keepalives are skipped but recorded). */
  nextCall(timeoutMs?: number): Promise<WirePacket> {
    return this.next((p) => p.prog === WIRE.REMOTE && p.type === WIRE.CALL, timeoutMs);
  }

  /** The next STREAM packet of `serial` whose status is not CONTINUE (a finish or an abort). */
  nextStreamControl(serial: number, timeoutMs?: number): Promise<WirePacket> {
    return this.next((p) => p.type === WIRE.STREAM && p.serial === serial && p.status !== WIRE.CONTINUE, timeoutMs);
  }

  /** STREAM/CONTINUE packets of `serial` received so far. */
  streamData(serial: number): WirePacket[] {
    return this.received.filter((p) => p.type === WIRE.STREAM && p.serial === serial && p.status === WIRE.CONTINUE);
  }

  send(bytes: Uint8Array): void {
    if (!this.socket.destroyed && !this.socket.writableEnded) this.socket.write(bytes);
  }

  reply(call: Pick<WirePacket, 'proc' | 'serial'>, body: Uint8Array = Buffer.alloc(0)): void {
    this.send(frame({ proc: call.proc, type: WIRE.REPLY, serial: call.serial, status: WIRE.OK }, body));
  }

  replyError(call: Pick<WirePacket, 'proc' | 'serial'>, err: PeerError): void {
    this.send(
      frame({ proc: call.proc, type: WIRE.REPLY, serial: call.serial, status: WIRE.ERROR }, remoteErrorBody(err)),
    );
  }

  streamOk(call: Pick<WirePacket, 'proc' | 'serial'>): void {
    this.send(frame({ proc: call.proc, type: WIRE.STREAM, serial: call.serial, status: WIRE.OK }));
  }

  streamError(call: Pick<WirePacket, 'proc' | 'serial'>, err: PeerError): void {
    this.send(
      frame({ proc: call.proc, type: WIRE.STREAM, serial: call.serial, status: WIRE.ERROR }, remoteErrorBody(err)),
    );
  }

  ping(): void {
    this.send(frame({ prog: WIRE.KEEPALIVE, proc: WIRE.PING, type: WIRE.MESSAGE, serial: 0 }));
  }

  /** Fails every waiter (call from an after hook). */
  dispose(): void {
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new Error('peer disposed'));
    }
    this.socket.destroy();
  }
}

/** A connected pair: the client's end (a Duplex) and a scripted peer on the other end. */
export function pairWithPeer(options: PeerOptions = {}): { client: Duplex; peer: ScriptedPeer } {
  const [client, server] = duplexPair();
  return { client, peer: new ScriptedPeer(server, options) };
}

/** Settles with the rejection of `p` (fails if it resolves), within `ms`. */
export async function rejectionOf(p: Promise<unknown>, ms = 3000): Promise<Error> {
  const outcome = await within(
    p.then(
      (value) => ({ ok: true as const, value }),
      (err: unknown) => ({ ok: false as const, err }),
    ),
    ms,
    'rejection',
  );
  if (outcome.ok) throw new Error(`expected a rejection, got ${String(outcome.value)}`);
  if (!(outcome.err instanceof Error)) throw new Error(`rejected with a non-Error: ${String(outcome.err)}`);
  return outcome.err;
}

export { sleep, within } from './bounded.ts';
