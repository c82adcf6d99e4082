/**
 * The exit-IP read: the address destinations see when the proxy connects out. Through the proxy
 * (a CONNECT tunnel to the URL's host and port, as any client's), one `GET` of `health.egressIpUrl`,
 * a URL whose body is the caller's address: plain text (`203.0.113.7\n`, as ipify, icanhazip or
 * checkip answer, and the dev target's `/ip`) or a JSON object with a string `ip`. Plain `http://`
 * only: the body is read inside the tunnel without TLS. The answer is bounded in size and the whole
 * exchange in time.
 */
import http from 'node:http';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import { openTunnel } from './connect.ts';
import { ProbeFailedError } from './errors.ts';

/** Largest exit-IP answer body accepted, in bytes (an address, a small JSON object). */
export const EXIT_IP_MAX_BODY_BYTES = 4 * 1024;

export interface ExitIpOptions {
  /** `http://host[:port]/path`: its body is the caller's address. */
  url: string;
  /** Bound on the whole exchange (CONNECT, request, body), in ms. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** As {@link ConnectProbeOptions.proxyAuthorization}: sent to the proxy only, in the CONNECT. */
  proxyAuthorization?: string;
}

export interface ExitIpResult {
  /** The address the URL's server saw (IPv4 or IPv6, as written by it). */
  ip: string;
  /** Time from the CONNECT to the end of the body, in ms. */
  latencyMs: number;
}

/** Why `url` cannot be an exit-IP URL, or undefined when it can (the providers file's check too). */
export function exitIpUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be a URL such as http://203.0.113.10/ip';
  }
  if (u.protocol !== 'http:') {
    return `must be an http:// URL (the probe reads it through the proxy without TLS), not ${u.protocol}//`;
  }
  if (u.username !== '' || u.password !== '') return 'must not carry credentials';
  if (u.hash !== '') return 'must not have a #fragment';
  return undefined;
}

/** The CONNECT target (`host:port`, `[v6]:port`) of an http:// URL. */
function authority(u: URL): string {
  return `${u.hostname}:${u.port === '' ? 80 : u.port}`;
}

/** The address in an exit-IP answer body, or undefined. */
export function parseExitIp(body: string): string | undefined {
  const text = body.trim();
  if (isIP(text) !== 0) return text;
  if (!text.startsWith('{')) return undefined;
  try {
    const ip = (JSON.parse(text) as { ip?: unknown }).ip;
    return typeof ip === 'string' && isIP(ip) !== 0 ? ip : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Opens a CONNECT tunnel on `stream` (a fresh connection to the proxy) to the URL's host and port,
 * sends `GET` for the URL inside it and resolves with the address its body names. Rejects with
 * {@link ProbeFailedError}: the CONNECT's codes (connect.ts), `EXIT_IP_HTTP_STATUS` (the URL did
 * not answer 200), `EXIT_IP_BAD_ANSWER` (no address in the body, or a body over
 * {@link EXIT_IP_MAX_BODY_BYTES}), `PROBE_TIMEOUT`, `PROBE_ABORTED`. Always destroys `stream`.
 */
export async function readExitIp(stream: Duplex, options: ExitIpOptions): Promise<ExitIpResult> {
  const { url, timeoutMs, signal, proxyAuthorization } = options;
  const problem = exitIpUrlProblem(url);
  if (problem !== undefined) {
    stream.destroy();
    throw new RangeError(`exit-IP URL ${JSON.stringify(url)} ${problem}`);
  }
  const u = new URL(url);
  const started = performance.now();
  const deadline = AbortSignal.timeout(timeoutMs);
  const bound = signal === undefined ? deadline : AbortSignal.any([signal, deadline]);
  const failure = (): ProbeFailedError =>
    signal?.aborted === true
      ? new ProbeFailedError('PROBE_ABORTED', `the exit-IP read of ${url} was aborted`, { cause: signal.reason })
      : new ProbeFailedError('PROBE_TIMEOUT', `the exit-IP read of ${url} did not finish within ${timeoutMs} ms`);
  try {
    await openTunnel(stream, { target: authority(u), timeoutMs, signal: bound, proxyAuthorization });
  } catch (err) {
    // The tunnel's own time bound is the same as the whole read's.
    if (bound.aborted) throw failure();
    throw err;
  }
  const body = await new Promise<string>((resolve, reject) => {
    const req = http.request({
      createConnection: () => stream,
      method: 'GET',
      host: u.hostname,
      port: u.port === '' ? 80 : Number(u.port),
      path: `${u.pathname}${u.search}`,
      headers: { 'user-agent': 'egress-proxies-probe', accept: 'text/plain, application/json', connection: 'close' },
      signal: bound,
    });
    const fail = (err: Error): void => {
      req.destroy();
      stream.destroy();
      reject(err);
    };
    // The tunnel was left paused (connect.ts): it flows once the request's parser reads it.
    req.once('socket', () => stream.resume());
    req.once('error', (err) => fail(bound.aborted ? failure() : err));
    req.once('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        fail(
          new ProbeFailedError(
            'EXIT_IP_HTTP_STATUS',
            `the exit-IP URL ${url} answered ${res.statusCode ?? '?'} through the proxy, not 200`,
            { status: res.statusCode },
          ),
        );
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > EXIT_IP_MAX_BODY_BYTES) {
          fail(
            new ProbeFailedError(
              'EXIT_IP_BAD_ANSWER',
              `the exit-IP URL ${url} answered more than ${EXIT_IP_MAX_BODY_BYTES} bytes; it must answer the caller's address`,
            ),
          );
          return;
        }
        chunks.push(chunk);
      });
      res.once('end', () => {
        stream.destroy();
        resolve(Buffer.concat(chunks).toString('utf8'));
      });
      res.once('error', (err) => fail(bound.aborted ? failure() : err));
    });
    req.end();
  });
  const ip = parseExitIp(body);
  if (ip === undefined) {
    throw new ProbeFailedError(
      'EXIT_IP_BAD_ANSWER',
      `the exit-IP URL ${url} did not answer an address (plain text or JSON {"ip": ...}): ${JSON.stringify(body.slice(0, 80))}`,
    );
  }
  return { ip, latencyMs: performance.now() - started };
}
