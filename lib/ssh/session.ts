/**
 * An authenticated SSH connection (made by `dialSsh`) that opens `direct-streamlocal` channels to
 * unix sockets on the host, and dies in one place: {@link SshSession.kill}. We own the TCP
 * socket; killing destroys it at once (never a polite `end()`, which ssh2 queues behind buffered
 * data), errors every open channel and pending open with the reason, then signals `dead`.
 */
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import type { Client, ClientChannel } from 'ssh2';
import {
  SshAbortedError,
  SshChannelOpenError,
  SshConnectError,
  SshSessionDeadError,
  SshTimeoutError,
} from './errors.ts';
import { classifyClientError, classifyOpenError } from './classify.ts';
import { OutgoingPacketPool } from './packet-pool.ts';
import { ackHostKeysPromptly } from './prompt-ack.ts';
import { settleOnce } from '../wait.ts';
import type { LineLogger } from '../log/line-logger.ts';

/** Default bound on opening one forwarded channel. */
export const DEFAULT_OPEN_TIMEOUT_MS = 10_000;

/** Options of {@link SshSession.openStreamLocal}. */
export interface OpenStreamLocalOptions {
  /**
   * Bound on the channel open, in milliseconds. Default {@link DEFAULT_OPEN_TIMEOUT_MS}. An open
   * that overruns it means the connection is stalled: the session is killed with the
   * `SSH_OPEN_TIMEOUT` error.
   */
  timeoutMs?: number;
  /** Cancels the open (the session stays alive; a channel that arrives late is closed). */
  signal?: AbortSignal;
}

/** Algorithms agreed in the key exchange (ssh2's `handshake` event). */
export interface NegotiatedAlgorithms {
  kex: string;
  serverHostKey: string;
  cipher: string;
  mac: string;
}

/** Internal: what `dialSsh` hands a new session. */
export interface SshSessionInit {
  client: Client;
  socket: Socket;
  host: string;
  port: number;
  user: string;
  hostKeyFingerprint: string;
  negotiated: NegotiatedAlgorithms | undefined;
  logger: LineLogger | undefined;
  /** Leave ssh2's per-packet buffers and writes alone (`DialOptions.stockSsh2Writes`). */
  stockWrites?: boolean;
}

interface SessionEvents {
  dead: [reason: Error];
}

/** See the module comment. Instances come from `dialSsh`. */
export class SshSession extends EventEmitter<SessionEvents> {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** `SHA256:...` fingerprint of the host key the server proved. */
  readonly hostKeyFingerprint: string;
  /** Algorithms of the latest key exchange. */
  negotiated: NegotiatedAlgorithms | undefined;
  /** Resolves (never rejects) with the reason once the session is dead; the first reason wins. */
  readonly dead: Promise<Error>;
  readonly #client: Client;
  readonly #socket: Socket;
  readonly #logger: LineLogger | undefined;
  readonly #channels = new Set<ClientChannel>();
  readonly #pendingOpens = new Set<(reason: Error) => void>();
  #resolveDead: (reason: Error) => void = () => undefined;
  #deadReason: Error | undefined;
  #keyExchanges = 1;
  /** Reused buffers for ssh2's outgoing packets (see packet-pool.ts); none with `stockSsh2Writes`. */
  readonly packetPool: OutgoingPacketPool | undefined;
  readonly #stockWrites: boolean;
  #promptAcks: { readonly sent: number } | undefined;

  constructor(init: SshSessionInit) {
    super();
    this.host = init.host;
    this.port = init.port;
    this.user = init.user;
    this.hostKeyFingerprint = init.hostKeyFingerprint;
    this.negotiated = init.negotiated;
    this.#client = init.client;
    this.#socket = init.socket;
    this.#logger = init.logger;
    this.dead = new Promise<Error>((resolve) => {
      this.#resolveDead = resolve;
    });
    const where = `${this.host}:${this.port}`;
    this.#stockWrites = init.stockWrites === true;
    if (!this.#stockWrites) {
      const pool = new OutgoingPacketPool();
      pool.wrapSocket(this.#socket);
      pool.patchCipher(this.#client);
      this.packetPool = pool;
    }
    // Registered on 'ready', before ssh2 parses the host-keys notice that follows it.
    if (!this.#stockWrites) this.#promptAcks = ackHostKeysPromptly(this.#client);
    this.#client.on('handshake', (n: { kex: string; serverHostKey: string; cs: { cipher: string; mac: string } }) => {
      // ssh2 makes a new cipher object for each key exchange.
      this.packetPool?.patchCipher(this.#client);
      this.#keyExchanges++;
      this.negotiated = { kex: n.kex, serverHostKey: n.serverHostKey, cipher: n.cs.cipher, mac: n.cs.mac };
    });
    this.#client.on('error', (err: Error) => {
      this.kill(classifyClientError(err, { where, phase: 'session' }));
    });
    const lost = (what: string) => () => {
      this.kill(new SshConnectError('SSH_CONNECTION_LOST', `SSH connection to ${where} ${what}`));
    };
    // Ahead of ssh2's own listeners: on 'close' ssh2 ends every channel's readable side as if
    // the peer had closed it cleanly; the channels must see the error first.
    this.#socket.prependListener('end', lost('was closed by the peer'));
    this.#socket.prependListener('close', lost('closed'));
    if (this.#socket.destroyed) lost('closed')();
  }

  /** SSH_MSG_IGNOREs sent to acknowledge sshd's host-keys proof at once (prompt-ack.ts). */
  get promptAcks(): number {
    return this.#promptAcks?.sent ?? 0;
  }

  get isDead(): boolean {
    return this.#deadReason !== undefined;
  }

  get deadReason(): Error | undefined {
    return this.#deadReason;
  }

  /** Key exchanges completed so far: 1 after the dial, one more per re-key. */
  get keyExchanges(): number {
    return this.#keyExchanges;
  }

  /**
   * Opens a `direct-streamlocal@openssh.com` channel to `socketPath` on the host. The returned
   * Duplex is ssh2's channel; the session attaches a no-op `error` listener to it so that a kill
   * never crashes the process: attach your own to observe the reason. On kill the channel is
   * destroyed with the kill reason (reads reject, an in-flight write's callback gets it).
   *
   * Rejects with `SshForwardingRefusedError` ("administratively prohibited"), `SshChannelOpenError`
   * (no such socket, or a refusal by a modern OpenSSH, which reports both alike: see
   * `classifyOpenError`), {@link SshTimeoutError} `SSH_OPEN_TIMEOUT`, {@link SshAbortedError} or
   * {@link SshSessionDeadError}.
   */
  openStreamLocal(socketPath: string, options: OpenStreamLocalOptions = {}): Promise<Duplex> {
    return this.#openChannel(
      socketPath,
      options,
      (cb) => this.#client.openssh_forwardOutStreamLocal(socketPath, cb),
      (err, where) => classifyOpenError(err, { socketPath, where, user: this.user }),
    );
  }

  /**
   * Opens a `direct-tcpip` channel: sshd on the host connects to `host:port` as seen from the host
   * (a guest behind the host's NAT network, for example). Same lifetime rules as
   * {@link openStreamLocal}. Rejects with `SshChannelOpenError` when sshd cannot connect or refuses
   * TCP forwarding (`AllowTcpForwarding`), {@link SshTimeoutError} `SSH_OPEN_TIMEOUT`,
   * {@link SshAbortedError} or {@link SshSessionDeadError}.
   */
  openTcp(host: string, port: number, options: OpenStreamLocalOptions = {}): Promise<Duplex> {
    const what = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    return this.#openChannel(
      what,
      options,
      (cb) => this.#client.forwardOut('127.0.0.1', 0, host, port, cb),
      (err, where) => {
        const said = err.message.replace(/^\(SSH\) Channel open failure: /, '');
        return new SshChannelOpenError(
          `sshd on ${where} could not connect to ${what} for user ${this.user} ("${said}", reason ${String(err.reason)}). ` +
            'Either nothing listens there, or sshd refuses TCP forwarding (set AllowTcpForwarding yes in sshd_config)',
          { cause: err },
        );
      },
    );
  }

  /**
   * Runs `command` on the host (an `exec` channel) and resolves with at most `maxBytes` of its
   * standard output (the rest is dropped and `truncated` set) and its exit code, within
   * `timeoutMs` from opening to exit. Standard error is read and dropped. The session lives on;
   * the channel is closed on every path. The command string goes to the host's shell as is:
   * callers quote what they interpolate.
   */
  async exec(
    command: string,
    options: { timeoutMs: number; maxBytes: number; signal?: AbortSignal },
  ): Promise<{ stdout: Buffer; truncated: boolean; code: number | undefined }> {
    const started = Date.now();
    const where = `${this.host}:${this.port}`;
    // ssh2 emits `exit` once, synchronously, while it parses the packets of one read: for a fast
    // command, the exec reply, exit-status, EOF and CLOSE come in one read, and a listener added
    // after the open's promise resumes us would miss it. So the code is caught in the open callback.
    let code: number | undefined;
    const channel = await this.#openChannel(
      'a command',
      { timeoutMs: options.timeoutMs, signal: options.signal },
      (cb) =>
        this.#client.exec(command, (err, ch) => {
          ch?.once('exit', (c: number | null) => {
            code = c ?? undefined;
          });
          cb(err, ch);
        }),
      (err) => new SshChannelOpenError(`sshd on ${where} refused to run a command: ${err.message}`, { cause: err }),
    );
    const remaining = Math.max(1, options.timeoutMs - (Date.now() - started));
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    return settleOnce<{ stdout: Buffer; truncated: boolean; code: number | undefined }>(
      {
        timeoutMs: remaining,
        onTimeout: () =>
          new SshTimeoutError(
            'SSH_OPEN_TIMEOUT',
            `a command on ${where} did not finish within ${options.timeoutMs} ms`,
          ),
        signal: options.signal,
        onAbort: () => new SshAbortedError(`a command on ${where} was aborted`, { cause: options.signal?.reason }),
      },
      (settle) => {
        const onData = (chunk: Buffer): void => {
          const room = options.maxBytes - size;
          if (chunk.length > room) truncated = true;
          if (room > 0) {
            const part = chunk.subarray(0, room);
            chunks.push(part);
            size += part.length;
          }
        };
        const onClose = (): void => void settle(undefined, { stdout: Buffer.concat(chunks), truncated, code });
        const onError = (err: Error): void => void settle(err);
        const stderr = (channel as ClientChannel).stderr;
        const drop = (): void => undefined;
        channel.on('data', onData);
        stderr.on('data', drop);
        channel.once('close', onClose);
        channel.once('error', onError);
        return () => {
          channel.off('data', onData);
          stderr.off('data', drop);
          channel.off('close', onClose);
          channel.off('error', onError);
          channel.destroy();
        };
      },
    );
  }

  #openChannel(
    what: string,
    options: OpenStreamLocalOptions,
    open: (cb: (err: Error | undefined, channel: ClientChannel) => void) => void,
    classify: (err: Error & { reason?: unknown }, where: string) => Error,
  ): Promise<Duplex> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_OPEN_TIMEOUT_MS;
    const { signal } = options;
    const where = `${this.host}:${this.port}`;
    if (this.#deadReason !== undefined) return Promise.reject(this.#deadError());
    return settleOnce<Duplex>(
      {
        timeoutMs,
        onTimeout: () =>
          new SshTimeoutError(
            'SSH_OPEN_TIMEOUT',
            `opening a channel to ${what} on ${where} took longer than ${timeoutMs} ms; the connection is stalled`,
          ),
        afterTimeout: (err) => this.kill(err),
        signal,
        onAbort: () => new SshAbortedError(`opening ${what} on ${where} was aborted`, { cause: signal?.reason }),
      },
      (settle) => {
        const onKill = (): void => void settle(this.#deadError());
        this.#pendingOpens.add(onKill);
        try {
          open((err, channel) => {
            if (err !== undefined && err !== null) {
              settle(this.#deadReason !== undefined ? this.#deadError() : classify(err, where));
              return;
            }
            channel.on('error', () => undefined);
            if (!this.#stockWrites) corkPerWrite(channel, this.#socket);
            if (this.#deadReason === undefined && settle(undefined, channel)) {
              this.#channels.add(channel);
              channel.once('close', () => this.#channels.delete(channel));
              return;
            }
            // Too late (killed, aborted, timed out): give the channel back.
            if (this.#deadReason !== undefined) destroyChannel(channel, this.#deadReason);
            else channel.destroy();
          });
        } catch (err) {
          // ssh2 throws "Not connected" synchronously once its socket is gone.
          settle(new SshSessionDeadError(`SSH session to ${where} is not connected`, { cause: err }));
        }
        return () => this.#pendingOpens.delete(onKill);
      },
    );
  }

  /**
   * Kills the session: idempotent, synchronous, returns at once. Destroys the TCP socket first
   * (buffered output is dropped), then destroys every open channel with `reason` and rejects every
   * pending open, then resolves {@link dead} and emits `dead` once. The first reason wins.
   */
  kill(reason: Error): void {
    if (this.#deadReason !== undefined) return;
    this.#deadReason = reason;
    this.#socket.destroy();
    for (const channel of this.#channels) destroyChannel(channel, reason);
    this.#channels.clear();
    for (const fail of [...this.#pendingOpens]) fail(reason);
    this.#pendingOpens.clear();
    this.#resolveDead(reason);
    const code = (reason as { code?: unknown }).code;
    this.#logger?.info(
      {
        event: 'ssh.session.dead',
        host: this.host,
        port: this.port,
        code: typeof code === 'string' ? code : undefined,
        reason: reason.message,
      },
      'ssh session dead',
    );
    try {
      this.emit('dead', reason);
    } catch {
      // A throwing listener must not break the kill of the caller.
    }
  }

  #deadError(): SshSessionDeadError {
    const reason = this.#deadReason;
    return new SshSessionDeadError(
      `SSH session to ${this.host}:${this.port} is dead: ${reason?.message ?? 'unknown reason'}`,
      { cause: reason },
    );
  }
}

/**
 * Destroys an ssh2 channel with an error. ssh2's own `Channel#destroy()` is a polite end+close
 * that emits no error, and after the socket dies ssh2 ends the channel's readable side as if the
 * peer had closed it cleanly; so we call the stream's real destroy with the reason first. ssh2
 * (1.17) holds the callback of a write waiting for window space in `_chunkcb` and never calls it
 * once the socket is gone: we fail it, so that writers awaiting it see the reason.
 */
function destroyChannel(channel: ClientChannel, reason: Error): void {
  const internals = channel as unknown as { _waitWindow?: boolean; _chunkcb?: (err?: Error) => void };
  const pendingWrite = internals._waitWindow === true ? internals._chunkcb : undefined;
  internals._waitWindow = false;
  Duplex.prototype.destroy.call(channel, reason);
  if (typeof pendingWrite === 'function') {
    internals._chunkcb = undefined;
    pendingWrite(reason);
  }
}

/**
 * ssh2 turns one channel write into one SSH packet per 32 KiB (the peer's maximum packet), each
 * written to the TCP socket on its own: eight `write` syscalls for a 256 KiB libvirt packet.
 * Corking the socket around the channel's `_write` (ssh2 also calls it again itself when window
 * space arrives) hands the kernel those packets in one `writev`.
 */
function corkPerWrite(channel: ClientChannel, socket: Socket): void {
  const internals = channel as unknown as {
    _write: (data: Buffer, encoding: BufferEncoding, cb: (err?: Error | null) => void) => void;
  };
  const write = internals._write;
  internals._write = function corkedWrite(data, encoding, cb) {
    socket.cork();
    try {
      write.call(this, data, encoding, cb);
    } finally {
      socket.uncork();
    }
  };
}
