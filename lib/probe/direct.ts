/**
 * The probe's direct path: a TCP connection from the worker to the guest's Squid, for guests the
 * worker routes to (lib/probe/route.ts decides when). Bounded in time and abortable; the socket
 * is destroyed on every failure.
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import { settleOnce } from '../wait.ts';
import { ProbeFailedError } from './errors.ts';

export interface DirectOptions {
  /** Bound on the TCP handshake, in ms. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/** Connects to `host:port` and resolves with the connected socket (`PROBE_TIMEOUT`, `PROBE_CLOSED` when it fails, `PROBE_ABORTED`). */
export function openDirectTcp(host: string, port: number, options: DirectOptions): Promise<Socket> {
  const what = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return settleOnce<Socket>(
    {
      timeoutMs: options.timeoutMs,
      onTimeout: () =>
        new ProbeFailedError('PROBE_TIMEOUT', `no TCP connection to ${what} within ${options.timeoutMs} ms (direct)`),
      signal: options.signal,
      onAbort: () =>
        new ProbeFailedError('PROBE_ABORTED', `the direct connection to ${what} was aborted`, {
          cause: options.signal?.reason,
        }),
    },
    (settle) => {
      const sock = net.connect({ host, port, noDelay: true });
      const onConnect = (): void => void settle(undefined, sock);
      const onError = (err: Error): void =>
        void settle(
          new ProbeFailedError('PROBE_CLOSED', `TCP connection to ${what} (direct): ${err.message}`, { cause: err }),
        );
      sock.once('connect', onConnect);
      sock.once('error', onError);
      return (err) => {
        sock.off('connect', onConnect);
        sock.off('error', onError);
        if (err !== undefined) sock.destroy();
      };
    },
  );
}
