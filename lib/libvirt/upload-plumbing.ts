/**
 * Plumbing of upload streams: a deferred whose rejection can be subscribed to and unsubscribed
 * from (so waits retain nothing; see waitBounded in lib/wait.ts), the packet-buffer ring, and a
 * sync-to-async iterator adapter.
 */
import { PACKET_PREFIX_BYTES } from './packet.ts';

/** A promise settled from outside, whose rejection can be subscribed to (see `onReject`). */
export class Deferred<T> {
  readonly promise: Promise<T>;
  resolve!: (value: T) => void;
  reject!: (err: Error) => void;
  settled = false;
  #error: Error | undefined;
  readonly #onReject = new Set<(err: Error) => void>();
  constructor() {
    this.promise = new Promise<T>((res, rej) => {
      this.resolve = (v) => {
        if (!this.settled) {
          this.settled = true;
          this.#onReject.clear();
          res(v);
        }
      };
      this.reject = (e) => {
        if (!this.settled) {
          this.settled = true;
          this.#error = e;
          rej(e);
          const listeners = [...this.#onReject];
          this.#onReject.clear();
          for (const fn of listeners) fn(e);
        }
      };
    });
    this.promise.catch(() => {});
  }
  /**
   * Calls `fn` if (or at once, when already) rejected; returns an unsubscribe. Waits subscribe and
   * unsubscribe here instead of racing `promise`: every `Promise.race` against a long-lived pending
   * promise leaves a reaction on it that keeps the race's result (a source chunk) alive until the
   * upload ends, so memory would grow with the bytes uploaded.
   */
  onReject(fn: (err: Error) => void): () => void {
    if (this.#error) {
      fn(this.#error);
      return () => {};
    }
    if (this.settled) return () => {};
    this.#onReject.add(fn);
    return () => this.#onReject.delete(fn);
  }
}

export function syncToAsync(it: Iterator<Uint8Array>): AsyncIterator<Uint8Array> {
  return {
    next: () => Promise.resolve(it.next()),
    return: () => Promise.resolve(it.return?.() ?? { done: true as const, value: undefined }),
  };
}

/** Packet buffers per upload: one being filled, one being written, one queued, one spare. */
const PACKET_RING = 4;

/** A few packet buffers, handed out to be filled and returned once the transport is done. */
export class PacketRing {
  readonly #bytes: number;
  readonly #free: Buffer[] = [];
  #allocated = 0;
  #wake: (() => void) | undefined;
  constructor(chunkBytes: number) {
    this.#bytes = PACKET_PREFIX_BYTES + chunkBytes;
  }
  async acquire(): Promise<Buffer> {
    for (;;) {
      const buf = this.#free.pop();
      if (buf) return buf;
      if (this.#allocated < PACKET_RING) {
        this.#allocated++;
        return Buffer.allocUnsafeSlow(this.#bytes);
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }
  release(buf: Buffer): void {
    this.#free.push(buf);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
  dispose(): void {
    this.#free.length = 0;
    this.#wake = undefined;
  }
}
