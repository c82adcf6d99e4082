/** The TCP half of a dial: we create and own the socket that ssh2 then runs over. */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { settleOnce } from '../wait.ts';
import { SshAbortedError, SshConnectError, SshTimeoutError } from './errors.ts';

/**
 * Connects to host:port with its own timeout, Nagle off. Rejects with {@link SshTimeoutError}
 * `SSH_CONNECT_TIMEOUT`, {@link SshConnectError} `SSH_CONNECT_FAILED` (ECONNREFUSED,
 * EHOSTUNREACH, ENOTFOUND, ...) or {@link SshAbortedError}; the socket is destroyed on failure.
 * The resolved socket keeps a no-op `error` listener, so an error before ssh2 attaches its own
 * cannot crash the process.
 */
export function connectTcp(host: string, port: number, timeoutMs: number, signal?: AbortSignal): Promise<Socket> {
  const where = `${host}:${port}`;
  return settleOnce<Socket>(
    {
      timeoutMs,
      onTimeout: () =>
        new SshTimeoutError('SSH_CONNECT_TIMEOUT', `TCP connect to ${where} did not complete within ${timeoutMs} ms`),
      signal,
      onAbort: () => new SshAbortedError(`TCP connect to ${where} was aborted`, { cause: signal?.reason }),
    },
    (settle) => {
      const socket = connect({ host, port, noDelay: true });
      socket.on('error', () => undefined);
      const onConnect = (): void => {
        socket.setNoDelay(true);
        settle(undefined, socket);
      };
      const onError = (err: NodeJS.ErrnoException): void => {
        settle(
          new SshConnectError('SSH_CONNECT_FAILED', `TCP connect to ${where} failed: ${err.code ?? err.message}`, {
            cause: err,
          }),
        );
      };
      socket.once('connect', onConnect);
      socket.once('error', onError);
      return (err) => {
        socket.removeListener('connect', onConnect);
        socket.removeListener('error', onError);
        if (err !== undefined) socket.destroy();
      };
    },
  );
}
