/**
 * One libvirt RPC connection over any duplex byte stream (a unix socket, an SSH-forwarded
 * channel). It owns the stream: serials, reply routing, per-call budgets, keepalive, and teardown.
 *
 * Teardown never waits (H1): `kill(reason)` records the reason, rejects every pending call and
 * stream, and only then destroys the transport. Any framing error, overrun budget, abort or
 * keepalive timeout kills the connection; the next user dials a new one.
 */
import type { Duplex } from 'node:stream';
import { KeepaliveProc, MessageStatus, MessageType, Program, REMOTE_PROTOCOL_VERSION, procName } from './constants.ts';
import { armBudget } from './budget.ts';
import {
  checkDurationMs,
  connectionLost,
  decodeRemoteError,
  LibvirtAbortedError,
  LibvirtConnectionError,
  LibvirtProtocolError,
} from './errors.ts';
import { Keepalive, keepalivePacket } from './keepalive.ts';
import type { KeepaliveOptions } from './keepalive.ts';
import type { CallObservation, CallObserver } from './observe.ts';
import { encodePrefix, PACKET_PREFIX_BYTES, PacketParser } from './packet.ts';
import type { Header, Packet } from './packet.ts';

/** Budget and cancellation of one call. */
export interface CallOptions {
  /** Budget of the call in milliseconds, from send to reply. Default: the connection's `callTimeoutMs`. */
  timeoutMs?: number;
  /** Aborting kills the connection (the daemon cannot be told to forget a call) and rejects the call. */
  signal?: AbortSignal;
}

export interface ConnectionOptions {
  /** Default budget of a call in milliseconds. Default 30000. */
  callTimeoutMs?: number;
  /** Largest packet accepted from the peer, in bytes. Default 32 MiB + 4 (VIR_NET_MESSAGE_MAX). */
  maxPacketBytes?: number;
  /** Receives one start/end per call (spans, log lines). */
  observer?: CallObserver;
  /** A label for errors and logs, e.g. the host name. */
  label?: string;
}

/** Receives STREAM packets of one serial, and the connection's death. */
export interface StreamSink {
  /** One STREAM packet. A throw kills the connection with that error (a LibvirtProtocolError as is). */
  onPacket(packet: Packet): void;
  onDead(reason: Error): void;
}

interface PendingCall {
  proc: number;
  resolve(body: Buffer): void;
  reject(err: Error): void;
  cleanup(): void;
  observation: CallObservation | undefined;
}

const EMPTY = Buffer.alloc(0);

/** Length word and header of a packet of the remote program (CALL or STREAM) with `bodyBytes` of body. */
function remotePrefix(proc: number, type: number, serial: number, status: number, bodyBytes: number): Buffer {
  return encodePrefix({ prog: Program.REMOTE, vers: REMOTE_PROTOCOL_VERSION, proc, type, serial, status }, bodyBytes);
}

/**
 * Runs a callback that is not the connection's own (an observer, a stream sink, a death listener)
 * so that its failure cannot interrupt teardown or leave a call unsettled; the failure becomes a
 * process warning.
 */
function runCallback<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch (err) {
    process.emitWarning(err instanceof Error ? err : new Error(String(err)), { code: 'LIBVIRT_CALLBACK_FAILED' });
    return undefined;
  }
}

export class LibvirtConnection {
  readonly label: string;
  readonly #transport: Duplex;
  readonly #parser: PacketParser;
  readonly #callTimeoutMs: number;
  readonly #observer: CallObserver | undefined;
  readonly #pending = new Map<number, PendingCall>();
  readonly #streams = new Map<number, StreamSink>();
  readonly #deathListeners = new Set<(reason: Error) => void>();
  #nextSerial = 1;
  #deadReason: Error | undefined;
  readonly #keepalive = new Keepalive();
  #bytesIn = 0;
  #bytesOut = 0;
  readonly #onData = (chunk: Buffer): void => this.#receive(chunk);
  readonly #onError = (err: Error): void =>
    this.kill(new LibvirtConnectionError(`${this.label}: transport error: ${err.message}`, { cause: err }));
  readonly #onClose = (): void => this.kill(new LibvirtConnectionError(`${this.label}: connection closed by peer`));

  constructor(transport: Duplex, options: ConnectionOptions = {}) {
    this.label = options.label ?? 'libvirt';
    this.#transport = transport;
    this.#parser = new PacketParser(options.maxPacketBytes);
    this.#callTimeoutMs = checkDurationMs('callTimeoutMs', options.callTimeoutMs ?? 30_000);
    this.#observer = options.observer;
    transport.on('data', this.#onData);
    transport.on('error', this.#onError);
    transport.on('close', this.#onClose);
    transport.on('end', this.#onClose);
  }

  get isDead(): boolean {
    return this.#deadReason !== undefined;
  }
  get deadReason(): Error | undefined {
    return this.#deadReason;
  }
  /** Calls waiting for a reply. */
  get pendingCalls(): number {
    return this.#pending.size;
  }
  /** Streams registered. */
  get openStreams(): number {
    return this.#streams.size;
  }
  get bytesIn(): number {
    return this.#bytesIn;
  }
  get bytesOut(): number {
    return this.#bytesOut;
  }
  /** The transport's write buffer is full: wait for `whenWritable` before writing more. */
  get writeBlocked(): boolean {
    return this.#transport.writableNeedDrain;
  }

  /** Runs `fn` once when the connection dies (at once if it is dead). Returns an unsubscribe. */
  onDeath(fn: (reason: Error) => void): () => void {
    if (this.#deadReason) {
      fn(this.#deadReason);
      return () => {};
    }
    this.#deathListeners.add(fn);
    return () => this.#deathListeners.delete(fn);
  }

  /**
   * Kills the connection: idempotent, first reason wins. Order matters (H1): record the reason,
   * reject every waiter, and only then destroy the transport, never a polite close first.
   */
  kill(reason: Error, culpritSerial?: number): void {
    if (this.#deadReason) return;
    this.#deadReason = reason;
    this.#keepalive.stop();
    const others = connectionLost(reason, `${this.label}: connection killed: ${reason.message}`);
    const pending = [...this.#pending.entries()];
    this.#pending.clear();
    for (const [serial, call] of pending) {
      call.cleanup();
      const err = serial === culpritSerial ? reason : others;
      runCallback(() => call.observation?.end({ error: err }));
      call.reject(err);
    }
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    for (const sink of streams) runCallback(() => sink.onDead(others));
    const listeners = [...this.#deathListeners];
    this.#deathListeners.clear();
    for (const fn of listeners) runCallback(() => fn(reason));
    this.#transport.off('data', this.#onData);
    this.#transport.destroy();
    // Late 'error' events after destroy must not crash the process.
    this.#transport.on('error', () => {});
  }

  /** Next free serial (never 0, which keepalive uses). */
  allocSerial(): number {
    const serial = this.#nextSerial;
    this.#nextSerial = this.#nextSerial >= 0xffffffff ? 1 : this.#nextSerial + 1;
    return serial;
  }

  /**
   * Sends a CALL of the remote program and resolves with the reply body. Rejects with
   * LibvirtError (daemon error), LibvirtTimeoutError (budget overrun: the connection is killed),
   * LibvirtAbortedError (aborted: the connection is killed) or LibvirtConnectionError.
   */
  call(
    proc: number,
    body: Uint8Array,
    options: CallOptions = {},
    serial: number = this.allocSerial(),
  ): Promise<Buffer> {
    if (this.#deadReason) {
      return Promise.reject(
        new LibvirtConnectionError(
          `${this.label}: ${procName(proc)} on a dead connection: ${this.#deadReason.message}`,
          {
            cause: this.#deadReason,
          },
        ),
      );
    }
    const { signal } = options;
    if (signal?.aborted) {
      return Promise.reject(
        new LibvirtAbortedError(`${procName(proc)} aborted before it was sent`, { cause: signal.reason }),
      );
    }
    let timeoutMs: number;
    try {
      timeoutMs = checkDurationMs('timeoutMs', options.timeoutMs ?? this.#callTimeoutMs);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return new Promise<Buffer>((resolve, reject) => {
      const observation = runCallback(() => this.#observer?.start({ proc, serial, bytesOut: body.length }));
      const cleanup = armBudget(this.label, procName(proc), timeoutMs, signal, (err) => this.kill(err, serial));
      this.#pending.set(serial, { proc, resolve, reject, observation, cleanup });
      this.#write([remotePrefix(proc, MessageType.CALL, serial, MessageStatus.OK, body.length), body]);
    });
  }

  /** Starts an observation of a stream (upload or download) with the connection's observer. */
  observeStream(proc: number, serial: number): CallObservation | undefined {
    const observation = runCallback(() => this.#observer?.start({ proc, serial, bytesOut: 0, stream: true }));
    return observation && { end: (result) => void runCallback(() => observation.end(result)) };
  }

  /** Registers the receiver of STREAM packets for `serial`. */
  registerStream(serial: number, sink: StreamSink): void {
    if (this.#deadReason) {
      sink.onDead(this.#deadReason);
      return;
    }
    this.#streams.set(serial, sink);
  }

  unregisterStream(serial: number): void {
    this.#streams.delete(serial);
  }

  /**
   * Writes one STREAM packet of `proc`/`serial` with the given status and body pieces (written
   * without copying). Returns false when the transport's buffer is full (wait for `whenWritable`).
   */
  writeStreamPacket(proc: number, serial: number, status: number, pieces: readonly Uint8Array[]): boolean {
    let bytes = 0;
    for (const p of pieces) bytes += p.length;
    return this.#write([remotePrefix(proc, MessageType.STREAM, serial, status, bytes), ...pieces]);
  }

  /**
   * Writes one STREAM/CONTINUE-style packet whose body is already in `packet` after room for the
   * 28-byte prefix: the prefix is filled in place and the packet written as one buffer, with no
   * copy. `done` runs once the transport no longer needs the buffer (written, or failed), so the
   * caller may reuse it then. Returns false when the transport's buffer is full.
   */
  writeStreamBuffer(
    proc: number,
    serial: number,
    status: number,
    packet: Buffer,
    bodyBytes: number,
    done: (err?: Error | null) => void,
  ): boolean {
    if (this.#deadReason) {
      done(this.#deadReason);
      return false;
    }
    remotePrefix(proc, MessageType.STREAM, serial, status, bodyBytes).copy(packet, 0);
    const length = PACKET_PREFIX_BYTES + bodyBytes;
    this.#bytesOut += length;
    const ok = this.#transport.write(packet.subarray(0, length), done);
    return ok && !this.#transport.writableNeedDrain;
  }

  /** Resolves when the transport can take more data; rejects when the connection dies. */
  whenWritable(): Promise<void> {
    if (this.#deadReason) return Promise.reject(this.#deadReason);
    if (!this.#transport.writableNeedDrain) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onDrain = (): void => {
        off();
        resolve();
      };
      const offDeath = this.onDeath((reason) => {
        this.#transport.off('drain', onDrain);
        reject(reason);
      });
      const off = (): void => {
        this.#transport.off('drain', onDrain);
        offDeath();
      };
      this.#transport.on('drain', onDrain);
    });
  }

  /** Starts keepalive (after the daemon confirmed the feature). Idempotent. */
  startKeepalive(options: KeepaliveOptions = {}): void {
    if (this.#deadReason) return;
    this.#keepalive.start(
      this.label,
      options,
      (packet) => this.#write([packet]),
      (err) => this.kill(err),
    );
  }

  #write(pieces: readonly Uint8Array[]): boolean {
    if (this.#deadReason) return false;
    const t = this.#transport;
    let ok = true;
    t.cork();
    for (const p of pieces) {
      if (p.length === 0) continue;
      this.#bytesOut += p.length;
      ok = t.write(p);
    }
    t.uncork();
    return ok && !t.writableNeedDrain;
  }

  #receive(chunk: Buffer): void {
    if (this.#deadReason) return;
    this.#bytesIn += chunk.length;
    this.#keepalive.received();
    let packets: Packet[];
    try {
      packets = this.#parser.push(chunk);
    } catch (err) {
      this.kill(err instanceof Error ? err : new LibvirtProtocolError(String(err)));
      return;
    }
    for (const packet of packets) {
      if (this.#deadReason) return;
      try {
        this.#dispatch(packet);
      } catch (err) {
        this.kill(
          err instanceof LibvirtProtocolError
            ? err
            : new LibvirtProtocolError(`${this.label}: malformed packet: ${(err as Error).message}`, { cause: err }),
        );
        return;
      }
    }
  }

  #dispatch(packet: Packet): void {
    const { header } = packet;
    if (header.prog === Program.KEEPALIVE) {
      if (header.type !== MessageType.MESSAGE) throw this.#protocolError('keepalive packet of wrong type', header);
      if (header.proc === KeepaliveProc.PING) this.#write([keepalivePacket(KeepaliveProc.PONG)]);
      else if (header.proc !== KeepaliveProc.PONG) throw this.#protocolError('unknown keepalive procedure', header);
      return;
    }
    if (header.prog !== Program.REMOTE) throw this.#protocolError('unknown program', header);
    if (header.vers !== REMOTE_PROTOCOL_VERSION) throw this.#protocolError('unknown protocol version', header);
    switch (header.type) {
      case MessageType.REPLY:
        this.#dispatchReply(packet);
        return;
      case MessageType.STREAM: {
        const sink = this.#streams.get(header.serial);
        // Packets of a stream that already ended are dropped (the daemon may still confirm late).
        sink?.onPacket(packet);
        return;
      }
      case MessageType.MESSAGE:
        // Asynchronous events: this client registers none; ignore.
        return;
      default:
        throw this.#protocolError('unexpected message type', header);
    }
  }

  #dispatchReply(packet: Packet): void {
    const { header, body } = packet;
    const call = this.#pending.get(header.serial);
    if (!call) throw this.#protocolError('reply for an unknown serial', header);
    if (call.proc !== header.proc)
      throw this.#protocolError(`reply names procedure ${header.proc}, the call was ${call.proc}`, header);
    if (header.status !== MessageStatus.OK && header.status !== MessageStatus.ERROR) {
      throw this.#protocolError('reply with unexpected status', header);
    }
    // Decode before settling: a malformed error body kills the connection with this call pending.
    const err = header.status === MessageStatus.ERROR ? decodeRemoteError(body, header.proc) : undefined;
    this.#pending.delete(header.serial);
    call.cleanup();
    runCallback(() => call.observation?.end({ bytesIn: body.length, error: err }));
    if (err) call.reject(err);
    else call.resolve(body.length === 0 ? EMPTY : body);
  }

  #protocolError(what: string, header: Header): LibvirtProtocolError {
    return new LibvirtProtocolError(
      `${this.label}: ${what} (prog 0x${header.prog.toString(16)}, vers ${header.vers}, proc ${header.proc}, type ${header.type}, serial ${header.serial}, status ${header.status}); connection dropped`,
    );
  }
}
