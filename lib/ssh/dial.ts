/**
 * `dialSsh`: TCP connect (our own socket), SSH handshake with known_hosts verification, public
 * key / agent authentication with credentials read fresh from disk, keepalive; yields an
 * {@link SshSession}. One log line per dial (host, port, duration_ms, outcome).
 */
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { AuthMethod, CipherAlgorithm, ConnectConfig, ServerHostKeyAlgorithm } from 'ssh2';
import { classifyClientError } from './classify.ts';
import type { Ssh2Error } from './classify.ts';
import { loadCredentials } from './credentials.ts';
import type { SshCredentials } from './credentials.ts';
import { SshAbortedError, SshAuthError, SshConfigError, SshConnectError, SshTimeoutError } from './errors.ts';
import { HostKeyCheck, hostKeyAlgorithms } from './host-key-check.ts';
import { fingerprintSha256, knownKeyTypes } from './known-hosts.ts';
import { SshSession } from './session.ts';
import { Client } from './ssh2-parts.ts';
import type { NegotiatedAlgorithms } from './session.ts';
import type { SshTarget } from './target.ts';
import { connectTcp } from './tcp.ts';
import { settleOnce } from '../wait.ts';
import type { LineLogger } from '../log/line-logger.ts';

export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_READY_TIMEOUT_MS = 10_000;
export const DEFAULT_KEEPALIVE_INTERVAL_MS = 5_000;
export const DEFAULT_KEEPALIVE_COUNT_MAX = 3;
/** AES-GCM first (hardware AES, no separate MAC), then ChaCha20-Poly1305, then CTR. */
export const DEFAULT_CIPHERS: readonly string[] = [
  'aes128-gcm@openssh.com',
  'aes128-gcm',
  'aes256-gcm@openssh.com',
  'aes256-gcm',
  'chacha20-poly1305@openssh.com',
  'aes128-ctr',
  'aes256-ctr',
];

/** Options of {@link dialSsh}. */
export interface DialOptions {
  /** Bound on the TCP connect, in ms. Default {@link DEFAULT_CONNECT_TIMEOUT_MS} (5000). */
  connectTimeoutMs?: number;
  /**
   * Bound on everything after the TCP connect up to an authenticated session (server banner,
   * key exchange, host key check, authentication), in ms. Default
   * {@link DEFAULT_READY_TIMEOUT_MS} (10000). A server that never sends a banner fails here.
   */
  readyTimeoutMs?: number;
  /**
   * Interval of SSH keepalive requests once authenticated, in ms; 0 disables keepalive. Default
   * {@link DEFAULT_KEEPALIVE_INTERVAL_MS} (5000). A dead peer is detected (and the session killed
   * with `SSH_KEEPALIVE_TIMEOUT`) after about `keepaliveIntervalMs × (keepaliveCountMax + 1)`
   * ms without any keepalive reply: 20 s with the defaults.
   */
  keepaliveIntervalMs?: number;
  /** Unanswered keepalives tolerated before the session is killed. Default 3. */
  keepaliveCountMax?: number;
  /** Cipher preference, most preferred first (ssh2 names). Default {@link DEFAULT_CIPHERS}. */
  ciphers?: readonly string[];
  /**
   * Leave ssh2's outgoing path as it is: a fresh buffer per SSH packet and one socket write each.
   * Default false: packet buffers are reused and a channel write reaches the socket as one
   * `writev` (see packet-pool.ts and docs/benchmarks.md). For comparisons, and as a way back
   * should an ssh2 upgrade change the internals these rely on.
   */
  stockSsh2Writes?: boolean;
  /** Aborts the dial (rejects with `SshAbortedError`, socket destroyed). */
  signal?: AbortSignal;
  /** pino-compatible logger: one line per dial; never key, passphrase or agent details. */
  logger?: LineLogger;
}

/**
 * Dials `target` and returns an authenticated session. Rejects with a project error:
 * `SshCredentialsError` (files), `SshConnectError`/`SshTimeoutError` (Transient),
 * `SshHostKeyError`, `SshAuthError`, `SshHandshakeError`, `SshConfigError` (Permanent),
 * `SshAbortedError`.
 */
export async function dialSsh(target: SshTarget, options: DialOptions = {}): Promise<SshSession> {
  const started = performance.now();
  const facts: DialFacts = { hostKeyRecorded: false };
  const base = { event: 'ssh.dial', host: target.host, port: target.port, user: target.user };
  try {
    const session = await dial(target, options, facts);
    options.logger?.info(
      {
        ...base,
        duration_ms: Math.round(performance.now() - started),
        outcome: 'ok',
        host_key: session.hostKeyFingerprint,
        host_key_recorded: facts.hostKeyRecorded,
        cipher: session.negotiated?.cipher,
      },
      'ssh dial',
    );
    return session;
  } catch (err) {
    const e = err as { code?: unknown; kind?: unknown; message?: unknown };
    options.logger?.warn(
      {
        ...base,
        duration_ms: Math.round(performance.now() - started),
        host_key_recorded: facts.hostKeyRecorded,
        outcome: 'error',
        code: e.code,
        kind: e.kind,
        error: e.message,
      },
      'ssh dial failed',
    );
    throw err;
  }
}

interface DialFacts {
  hostKeyRecorded: boolean;
}

async function dial(target: SshTarget, options: DialOptions, facts: DialFacts): Promise<SshSession> {
  const { signal } = options;
  const where = `${target.host}:${target.port}`;
  const aborted = (): SshAbortedError =>
    new SshAbortedError(`SSH dial to ${where} was aborted`, { cause: signal?.reason });
  const isAborted = (): boolean => signal?.aborted === true;
  if (isAborted()) throw aborted();
  const creds = await loadCredentials(target);
  if (isAborted()) throw aborted();
  const socket = await connectTcp(
    target.host,
    target.port,
    options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    signal,
  );
  try {
    return await handshake(target, creds, socket, options, facts);
  } catch (err) {
    socket.destroy();
    throw err;
  }
}

function handshake(
  target: SshTarget,
  creds: SshCredentials,
  socket: Socket,
  options: DialOptions,
  facts: DialFacts,
): Promise<SshSession> {
  const where = `${target.host}:${target.port}`;
  const readyTimeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const { signal } = options;
  return settleOnce<SshSession>(
    {
      timeoutMs: readyTimeoutMs,
      onTimeout: () =>
        new SshTimeoutError(
          'SSH_READY_TIMEOUT',
          `SSH handshake and authentication with ${where} did not complete within ${readyTimeoutMs} ms ` +
            `(server banner, key exchange, host key check, authentication)`,
        ),
      signal,
      onAbort: () => new SshAbortedError(`SSH dial to ${where} was aborted`, { cause: signal?.reason }),
    },
    (settle) => {
      const client = new Client();
      // Permanent guard: ssh2 emits 'error' after we settled too (e.g. a late DISCONNECT).
      client.on('error', () => undefined);
      const hostKey = new HostKeyCheck(target, creds.knownHosts.entries);
      let negotiated: NegotiatedAlgorithms | undefined;
      let agentError: Error | undefined;

      const onError = (err: Ssh2Error): void => {
        if (err.level === 'agent') {
          agentError = err; // ssh2 goes on with the next method
          return;
        }
        if (hostKey.refusal !== undefined) return void settle(hostKey.refusal);
        if (err.level === 'client-authentication') return void settle(authError(target, creds, agentError, err));
        settle(classifyClientError(err, { where, phase: 'dial' }));
      };
      const onClose = (): void => {
        settle(
          hostKey.refusal ??
            new SshConnectError(
              'SSH_CONNECTION_LOST',
              `SSH connection to ${where} closed before authentication completed`,
            ),
        );
      };
      const onReady = (): void => {
        const session = new SshSession({
          client,
          socket,
          host: target.host,
          port: target.port,
          user: target.user,
          hostKeyFingerprint: hostKey.fingerprint,
          negotiated,
          logger: options.logger,
          stockWrites: options.stockSsh2Writes === true,
        });
        // A re-key presenting another host key kills the session with the SshHostKeyError.
        hostKey.onLateRefusal = (refusal) => session.kill(refusal);
        settle(undefined, session);
      };
      const onHandshake = (n: { kex: string; serverHostKey: string; cs: { cipher: string; mac: string } }): void => {
        negotiated = { kex: n.kex, serverHostKey: n.serverHostKey, cipher: n.cs.cipher, mac: n.cs.mac };
      };
      client.on('error', onError);
      client.on('close', onClose);
      client.on('ready', onReady);
      client.on('handshake', onHandshake);

      const authHandler: AuthMethod[] = [];
      if (creds.privateKey !== undefined) {
        authHandler.push({ type: 'publickey', username: target.user, key: creds.privateKey } as AuthMethod);
      }
      if (creds.agentSocket !== undefined) {
        authHandler.push({ type: 'agent', username: target.user, agent: creds.agentSocket } as AuthMethod);
      }
      const keepaliveIntervalMs = options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_INTERVAL_MS;
      const config: ConnectConfig = {
        sock: socket,
        username: target.user,
        authHandler,
        hostVerifier: hostKey.verify,
        readyTimeout: 0, // our own time bound (settleOnce), so the error is ours
        keepaliveInterval: keepaliveIntervalMs,
        keepaliveCountMax: options.keepaliveCountMax ?? DEFAULT_KEEPALIVE_COUNT_MAX,
        strictVendor: false,
        algorithms: {
          cipher: [...(options.ciphers ?? DEFAULT_CIPHERS)] as CipherAlgorithm[],
          serverHostKey: hostKeyAlgorithms(
            knownKeyTypes(creds.knownHosts.entries, target.host, target.port),
          ) as ServerHostKeyAlgorithm[],
        },
      };
      try {
        client.connect(config);
      } catch (err) {
        settle(
          new SshConfigError(`invalid SSH options for ${where}: ${(err as Error).message} (check options.ciphers)`, {
            cause: err,
          }),
        );
      }
      return (err) => {
        facts.hostKeyRecorded = hostKey.recorded;
        client.removeListener('error', onError);
        client.removeListener('close', onClose);
        client.removeListener('ready', onReady);
        client.removeListener('handshake', onHandshake);
        if (err !== undefined) socket.destroy();
      };
    },
  );
}

function authError(target: SshTarget, creds: SshCredentials, agentError: Error | undefined, err: Error): SshAuthError {
  const where = `${target.host}:${target.port}`;
  const offered: string[] = [];
  if (creds.privateKey !== undefined) {
    const fp = fingerprintSha256(creds.privateKey.getPublicSSH());
    offered.push(`the key in ${target.keyPath ?? '(keyPath)'} (${creds.privateKey.type} ${fp})`);
  }
  if (creds.agentSocket !== undefined) {
    offered.push(agentError === undefined ? 'the ssh-agent keys' : 'the ssh-agent (which could not be used)');
  }
  return new SshAuthError(
    `SSH authentication as ${target.user} to ${where} failed: the server accepted none of ${offered.join(' and ')}. ` +
      `Add the public key to ~${target.user}/.ssh/authorized_keys on the host ` +
      `(e.g. \`ssh-copy-id -i KEY.pub -p ${target.port} ${target.user}@${target.host}\`), or fix keyPath/user`,
    { cause: err },
  );
}
