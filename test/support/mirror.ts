/**
 * A local HTTP image mirror for tests: serves in-memory files on 127.0.0.1, counts the requests
 * per path, and misbehaves on demand (dies mid-body, stalls mid-body, serves corrupted bytes,
 * omits Content-Length, answers with an error status, paces the body slowly). `close()` destroys every socket at once.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type MirrorMode =
  /** 200 with Content-Length and the bytes. */
  | { kind: 'normal' }
  /** Headers with the full Content-Length, then `afterBytes` bytes, then the socket is destroyed. */
  | { kind: 'die'; afterBytes: number }
  /** Headers with the full Content-Length, then `afterBytes` bytes, then nothing (the socket stays open). */
  | { kind: 'stall'; afterBytes: number }
  /** The bytes with one byte flipped (same length): a digest mismatch. */
  | { kind: 'corrupt' }
  /** The bytes without Content-Length (chunked transfer encoding). */
  | { kind: 'no-content-length' }
  /** An error status with a short body. */
  | { kind: 'status'; status: number }
  /** 200 with Content-Length and the bytes, paced at about `bytesPerSecond` (a long transfer from a small image). */
  | { kind: 'slow'; bytesPerSecond: number };

interface File {
  bytes: Buffer;
  mode: MirrorMode;
  requests: number;
  /** Body bytes written for this path, over every request. */
  sent: number;
}

const CHUNK_BYTES = 64 * 1024;

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export class ImageMirror {
  readonly #server: http.Server;
  readonly #files = new Map<string, File>();
  readonly #sockets = new Set<Socket>();
  #port = 0;

  private constructor() {
    this.#server = http.createServer((req, res) => this.#handle(req, res));
    this.#server.on('connection', (sock) => {
      this.#sockets.add(sock);
      sock.once('close', () => this.#sockets.delete(sock));
    });
  }

  /** Starts a mirror on 127.0.0.1 on a free port. */
  static async start(): Promise<ImageMirror> {
    const m = new ImageMirror();
    await new Promise<void>((resolve, reject) => {
      m.#server.once('error', reject);
      m.#server.listen(0, '127.0.0.1', () => resolve());
    });
    m.#port = (m.#server.address() as AddressInfo).port;
    return m;
  }

  /** The URL of `path` (which starts with `/`). */
  url(path: string): string {
    return `http://127.0.0.1:${this.#port}${path}`;
  }

  /** Serves `bytes` at `path` in `mode` (default normal); returns the URL. Resets the request count. */
  serve(path: string, bytes: Buffer, mode: MirrorMode = { kind: 'normal' }): string {
    this.#files.set(path, { bytes, mode, requests: 0, sent: 0 });
    return this.url(path);
  }

  /** Changes how `path` is served (the request count is kept). */
  setMode(path: string, mode: MirrorMode): void {
    const f = this.#files.get(path);
    if (!f) throw new Error(`mirror: nothing served at ${path}`);
    f.mode = mode;
  }

  /** Requests received for `path` (0 for a path never served). */
  requests(path: string): number {
    return this.#files.get(path)?.requests ?? 0;
  }

  /** Body bytes written for `path` over every request (0 for a path never served). */
  sentBytes(path: string): number {
    return this.#files.get(path)?.sent ?? 0;
  }

  /** Stops listening and destroys every open socket (stalled responses included). */
  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://mirror').pathname;
    const file = this.#files.get(path);
    if (!file) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    file.requests++;
    const { mode } = file;
    switch (mode.kind) {
      case 'status':
        res.writeHead(mode.status, { 'content-type': 'text/plain' }).end(`status ${mode.status}\n`);
        return;
      case 'no-content-length':
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        void this.#send(res, file.bytes, file).then(() => res.end());
        return;
      case 'slow':
        res.writeHead(200, { 'content-length': String(file.bytes.length), 'content-type': 'application/octet-stream' });
        void this.#send(res, file.bytes, file, mode.bytesPerSecond).then(() => res.end());
        return;
      case 'corrupt': {
        const bad = Buffer.from(file.bytes);
        const i = Math.floor(bad.length / 2);
        bad[i] = bad[i]! ^ 0xff;
        res.writeHead(200, { 'content-length': String(bad.length), 'content-type': 'application/octet-stream' });
        void this.#send(res, bad, file).then(() => res.end());
        return;
      }
      case 'die':
      case 'stall': {
        res.writeHead(200, {
          'content-length': String(file.bytes.length),
          'content-type': 'application/octet-stream',
        });
        const part = file.bytes.subarray(0, Math.min(mode.afterBytes, file.bytes.length));
        void this.#send(res, part, file).then(() => {
          // Let the bytes leave before the socket goes, so the client sees them first.
          if (mode.kind === 'die') setTimeout(() => res.socket?.destroy(), 50);
        });
        return;
      }
      default:
        res.writeHead(200, { 'content-length': String(file.bytes.length), 'content-type': 'application/octet-stream' });
        void this.#send(res, file.bytes, file).then(() => res.end());
    }
  }

  /**
   * Writes `bytes` in chunks, honouring backpressure; stops quietly if the response goes away.
   * Counts what it writes into `file.sent`; with `bytesPerSecond`, paces the chunks to that rate.
   */
  async #send(res: http.ServerResponse, bytes: Buffer, file?: File, bytesPerSecond?: number): Promise<void> {
    const started = performance.now();
    for (let off = 0; off < bytes.length; off += CHUNK_BYTES) {
      if (res.destroyed) return;
      if (bytesPerSecond !== undefined && bytesPerSecond > 0) {
        const dueMs = (off / bytesPerSecond) * 1000 - (performance.now() - started);
        if (dueMs > 0) await new Promise((resolve) => setTimeout(resolve, dueMs));
        if (res.destroyed) return;
      }
      const chunk = bytes.subarray(off, off + CHUNK_BYTES);
      if (file) file.sent += chunk.length;
      if (!res.write(chunk)) {
        await new Promise<void>((resolve) => {
          const done = (): void => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
      }
    }
  }
}
