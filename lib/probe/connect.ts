/**
 * The health probe: a real HTTP `CONNECT` through a proxy (Squid) to a target, over any duplex
 * stream: a TCP socket where the worker can route to the guest, or an SSH `direct-tcpip` channel
 * through the guest's host where it cannot (NAT networks). The same bytes go over the wire either
 * way. The response head is bounded in size and the whole exchange in time.
 */
import type { Duplex } from 'node:stream';
import { settleOnce } from '../wait.ts';
import { ProbeFailedError } from './errors.ts';

/** Largest response head accepted from the proxy, in bytes. */
export const PROBE_MAX_HEAD_BYTES = 8 * 1024;

export interface ConnectProbeOptions {
  /** The target the proxy is asked to tunnel to, `host:port` (`[v6]:port` for IPv6). */
  target: string;
  /** Bound on the whole exchange (request to response head), in ms. */
  timeoutMs: number;
  signal?: AbortSignal;
  /**
   * A `Proxy-Authorization` value (`Basic …`) for proxies that require client credentials; sent
   * only to the proxy, never logged. CR and LF are refused.
   */
  proxyAuthorization?: string;
}

export interface ConnectProbeResult {
  /** The proxy's status code (200 on success). */
  status: number;
  /** Time from sending the request to reading the response head, in ms. */
  latencyMs: number;
}

/**
 * Sends `CONNECT target` on `stream` and resolves when the proxy answers 2xx. Rejects with
 * {@link ProbeFailedError}: `PROBE_REFUSED` (a non-2xx status, e.g. 403 from an ACL),
 * `PROBE_BAD_RESPONSE` (not HTTP, or a head over {@link PROBE_MAX_HEAD_BYTES}), `PROBE_CLOSED`
 * (the stream ended first), `PROBE_TIMEOUT`, `PROBE_ABORTED`. Always destroys `stream`.
 */
export function connectProbe(stream: Duplex, options: ConnectProbeOptions): Promise<ConnectProbeResult> {
  return connectOn(stream, options, false);
}

/**
 * {@link connectProbe} that leaves `stream` open on success: it is then the tunnel to `target`
 * (bytes after the proxy's head, if any, are put back on it). Destroys `stream` on failure.
 */
export function openTunnel(stream: Duplex, options: ConnectProbeOptions): Promise<ConnectProbeResult> {
  return connectOn(stream, options, true);
}

function connectOn(stream: Duplex, options: ConnectProbeOptions, keepOpen: boolean): Promise<ConnectProbeResult> {
  const { target, timeoutMs, signal, proxyAuthorization } = options;
  if (!/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/.test(target)) {
    stream.destroy();
    return Promise.reject(new RangeError(`probe target must be host:port or [v6]:port, got ${JSON.stringify(target)}`));
  }
  if (proxyAuthorization !== undefined && /[\r\n]/.test(proxyAuthorization)) {
    stream.destroy();
    return Promise.reject(new RangeError('probe proxyAuthorization must not contain CR or LF'));
  }
  const auth = proxyAuthorization === undefined ? '' : `Proxy-Authorization: ${proxyAuthorization}\r\n`;
  // settleOnce rejects at once, without subscribing, if the signal already fired.
  if (signal?.aborted === true) stream.destroy();
  const started = performance.now();
  return settleOnce<ConnectProbeResult>(
    {
      timeoutMs,
      onTimeout: () =>
        new ProbeFailedError('PROBE_TIMEOUT', `the proxy did not answer CONNECT ${target} within ${timeoutMs} ms`),
      signal,
      onAbort: () =>
        new ProbeFailedError('PROBE_ABORTED', `probe CONNECT ${target} was aborted`, { cause: signal?.reason }),
    },
    (settle) => {
      let head = Buffer.alloc(0);
      let rest = Buffer.alloc(0);
      const onEnd = (): void =>
        void settle(
          new ProbeFailedError('PROBE_CLOSED', `the proxy closed the connection before answering CONNECT ${target}`),
        );
      const onError = (err: Error): void =>
        void settle(new ProbeFailedError('PROBE_CLOSED', `probe CONNECT ${target}: ${err.message}`, { cause: err }));
      const onData = (chunk: Buffer): void => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > PROBE_MAX_HEAD_BYTES) {
            settle(
              new ProbeFailedError(
                'PROBE_BAD_RESPONSE',
                `the proxy's response head exceeds ${PROBE_MAX_HEAD_BYTES} bytes`,
              ),
            );
          }
          return;
        }
        const statusLine = head.subarray(0, Math.min(end, head.indexOf('\r\n'))).toString('latin1');
        const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(statusLine);
        if (!m) {
          settle(
            new ProbeFailedError(
              'PROBE_BAD_RESPONSE',
              `the proxy did not answer with HTTP: ${JSON.stringify(statusLine.slice(0, 80))}`,
            ),
          );
          return;
        }
        const status = Number(m[1]);
        if (status < 200 || status > 299) {
          settle(
            new ProbeFailedError(
              'PROBE_REFUSED',
              `the proxy answered CONNECT ${target} with ${statusLine.slice(0, 120)}`,
              {
                status,
              },
            ),
          );
          return;
        }
        rest = head.subarray(end + 4);
        settle(undefined, { status, latencyMs: performance.now() - started });
      };
      stream.on('data', onData);
      stream.once('end', onEnd);
      stream.once('close', onEnd);
      stream.on('error', onError);
      stream.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nUser-Agent: egress-proxies-probe\r\n${auth}\r\n`);
      return (err) => {
        stream.off('data', onData);
        stream.off('end', onEnd);
        stream.off('close', onEnd);
        stream.off('error', onError);
        if (err !== undefined || !keepOpen) stream.destroy();
        else {
          // Nothing reads the tunnel until its user does: what came after the head waits there.
          stream.pause();
          if (rest.length > 0) stream.unshift(rest);
        }
      };
    },
  );
}
