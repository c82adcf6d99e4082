/**
 * A client of a front door on loopback, for the door's tests: one request on a new connection
 * (an absolute-URI GET or a CONNECT), and a CONNECT tunnel carrying keep-alive GETs one at a time.
 * Every read is bounded by BOUND_MS.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const HOST = '127.0.0.1';
const BOUND_MS = 10_000;

/** `Basic base64(user:password)`. */
export const basic = (user: string, password = 'secret'): string =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}
/** One request through the door on a new connection: GET of an absolute URL, or CONNECT host:port. */
export function viaDoor(
  door: number,
  target: string,
  auth?: string,
  extra: Record<string, string> = {},
): Promise<Answer> {
  const connect = !target.startsWith('http://');
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: HOST,
      port: door,
      method: connect ? 'CONNECT' : 'GET',
      path: target,
      agent: false,
      headers: {
        ...(auth ? { 'proxy-authorization': auth } : {}),
        host: connect ? target : new URL(target).host,
        ...extra,
      },
      timeout: BOUND_MS,
    });
    req.on('timeout', () => req.destroy(new Error(`${target}: no answer within ${BOUND_MS} ms`)));
    req.on('error', reject);
    req.on('connect', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.end();
  });
}

/** A CONNECT tunnel through the door carrying keep-alive GETs to the target, one at a time. */
export class Tunnel {
  private buf = '';
  private wake: (() => void) | undefined;
  private closed: Error | undefined;
  private readonly sock: net.Socket;
  private constructor(sock: net.Socket) {
    this.sock = sock;
    sock.setEncoding('latin1');
    sock.on('data', (d: string) => ((this.buf += d), this.wake?.()));
    const fail = (err?: Error): void => void ((this.closed ??= err ?? new Error('tunnel closed')), this.wake?.());
    sock.on('error', fail);
    sock.on('close', () => fail());
  }
  static async open(door: number, target: number, user: string): Promise<Tunnel> {
    const t = new Tunnel(net.connect(door, HOST));
    const head = await t.read(
      `CONNECT ${HOST}:${target} HTTP/1.1\r\nHost: ${HOST}:${target}\r\nProxy-Authorization: ${basic(user)}\r\n\r\n`,
      true,
    );
    assert.match(head, /^HTTP\/1\.[01] 200/, head);
    return t;
  }
  /** Sends a GET inside the tunnel; resolves with the response body. */
  get(target: number): Promise<string> {
    return this.read(`GET / HTTP/1.1\r\nHost: ${HOST}:${target}\r\n\r\n`, false);
  }
  private async read(req: string, headOnly: boolean): Promise<string> {
    this.sock.write(req);
    const t0 = Date.now();
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.buf.slice(0, end);
        const len = headOnly ? 0 : Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? NaN);
        assert.ok(!Number.isNaN(len), `response without Content-Length: ${head}`);
        if (this.buf.length >= end + 4 + len) {
          const body = this.buf.slice(end + 4, end + 4 + len);
          this.buf = this.buf.slice(end + 4 + len);
          return headOnly ? head : body;
        }
      }
      if (this.closed) throw this.closed;
      if (Date.now() - t0 > BOUND_MS) throw new Error(`no answer in the tunnel within ${BOUND_MS} ms`);
      await Promise.race([new Promise<void>((r) => (this.wake = r)), sleep(200)]);
    }
  }
  close(): void {
    this.sock.destroy();
  }
}
