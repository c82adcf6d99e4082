/**
 * A load client for forward proxies (a door, an exit): raw sockets, HTTP/1.1, small responses with
 * Content-Length. Plain requests are absolute-URI GETs on a keep-alive connection; CONNECT opens a
 * new tunnel per request and sends one GET inside it. Used by bench/door.ts (loopback) and
 * bench/door-guests.ts (real guests behind a pool's door).
 */
import net from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { percentile } from './stats.ts';

/** A TCP address. */
export interface Addr {
  host: string;
  port: number;
}

/** A socket with a read buffer: reads one response head (CONNECT) or one whole response at a time. */
export class Conn {
  readonly sock: net.Socket;
  private buf: Buffer = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  private closed: Error | undefined;
  constructor(a: Addr) {
    this.sock = net.connect(a.port, a.host);
    this.sock.setNoDelay(true);
    this.sock.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.wake?.();
    });
    const fail = (err?: Error): void => {
      this.closed ??= err ?? new Error('connection closed');
      this.wake?.();
    };
    this.sock.on('error', fail);
    this.sock.on('close', () => fail());
  }
  /** Sends `req` and reads one response: its status and body (headers only when `headOnly`). */
  async exchange(req: string, headOnly: boolean): Promise<{ status: number; body: string }> {
    this.sock.write(req);
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.buf.subarray(0, end).toString('latin1');
        const status = Number(head.slice(9, 12));
        const len = headOnly ? 0 : Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? NaN);
        if (Number.isNaN(len)) throw new Error(`response without Content-Length: ${head}`);
        if (this.buf.length >= end + 4 + len) {
          const body = this.buf.subarray(end + 4, end + 4 + len).toString('latin1');
          this.buf = this.buf.subarray(end + 4 + len);
          return { status, body };
        }
      }
      if (this.closed) throw this.closed;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
  close(): void {
    this.sock.destroy();
  }
}

const hostPort = (a: Addr): string => `${a.host}:${a.port}`;
/** `Proxy-Authorization` header line for `user` (password `secret`), or none for `undefined`. */
const authLine = (user: string | undefined): string =>
  user === undefined ? '' : `Proxy-Authorization: Basic ${Buffer.from(`${user}:secret`).toString('base64')}\r\n`;
export const plainReq = (target: Addr, user?: string, path = '/'): string =>
  `GET http://${hostPort(target)}${path} HTTP/1.1\r\nHost: ${hostPort(target)}\r\n${authLine(user)}\r\n`;
export const connectReq = (target: Addr, user?: string): string =>
  `CONNECT ${hostPort(target)} HTTP/1.1\r\nHost: ${hostPort(target)}\r\n${authLine(user)}\r\n`;
export const innerReq = (target: Addr, path = '/'): string =>
  `GET ${path} HTTP/1.1\r\nHost: ${hostPort(target)}\r\n\r\n`;

/** A plain GET through `proxy` on a new connection: the body, or throws. */
export async function plainOnce(proxy: Addr, target: Addr, user?: string, path = '/'): Promise<string> {
  const c = new Conn(proxy);
  try {
    const r = await c.exchange(plainReq(target, user, path), false);
    if (r.status !== 200) throw new Error(`status ${r.status}`);
    return r.body;
  } finally {
    c.close();
  }
}

export type Kind = 'http' | 'connect';
export interface Load {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU of the proxy process the client talks to, µs per request. */
  cpuUs?: number;
  /** CPU of the process that runs it (the door service), µs per request. */
  serviceCpuUs?: number;
  /** New connections the proxy opened to its upstreams, per request. */
  connectsPerRequest?: number;
}

/**
 * CPU seconds a process has run so far, all its threads: the scheduler's own count
 * (/proc/PID/task/TID/schedstat, nanoseconds). The user and system ticks of /proc/PID/stat are
 * sampled 100 times a second, too coarse and too biased for a process that runs in bursts of
 * microseconds between a slow peer's answers; they are the fallback where schedstat is missing.
 */
export function cpuSecs(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    return readdirSync(`/proc/${pid}/task`).reduce(
      (sum, tid) => sum + Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e9,
      0,
    );
  } catch {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  }
}

/** The user of worker `w`'s keep-alive GETs, or of CONNECT number `i`: the `k` of `userOf(k)`. */
export const userIndex = (kind: Kind, w: number, i: number): number => (kind === 'http' ? w : i % 64);

/**
 * `n` requests at `conc` at once through `proxy`: keep-alive GETs (worker `w` as `userOf(w)`), or
 * a new tunnel per request (request `i` as `userOf(i % 64)`); `userOf` undefined sends no credential.
 * `proxy` may depend on the same `k` ({@link userIndex}): straight to the exit a door would pick
 * for that user, so both variants load the same exits alike.
 */
export async function load(
  kind: Kind,
  proxy: Addr | ((k: number) => Addr),
  target: Addr,
  n: number,
  conc: number,
  userOf: ((k: number) => string) | undefined = (k) => `user-session-${k}`,
): Promise<Load> {
  const proxyOf = typeof proxy === 'function' ? proxy : () => proxy;
  const lat: number[] = [];
  let next = 0;
  let errors = 0;
  const t0 = performance.now();
  const worker = async (w: number): Promise<void> => {
    let conn: Conn | undefined;
    while (next < n) {
      const i = next++;
      const k = userIndex(kind, w, i);
      const user = userOf?.(k);
      const s = performance.now();
      try {
        if (kind === 'http') {
          conn ??= new Conn(proxyOf(k));
          const r = await conn.exchange(plainReq(target, user), false);
          if (r.status !== 200) throw new Error(`status ${r.status}`);
        } else {
          const c = new Conn(proxyOf(k));
          try {
            const h = await c.exchange(connectReq(target, user), true);
            if (h.status !== 200) throw new Error(`CONNECT status ${h.status}`);
            const r = await c.exchange(innerReq(target), false);
            if (r.status !== 200) throw new Error(`status ${r.status}`);
          } finally {
            c.close();
          }
        }
        lat.push(performance.now() - s);
      } catch {
        errors++;
        conn?.close();
        conn = undefined;
      }
    }
    conn?.close();
  };
  await Promise.all(Array.from({ length: conc }, (_, w) => worker(w)));
  const secs = (performance.now() - t0) / 1000;
  return { rps: lat.length / secs, p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), errors };
}
