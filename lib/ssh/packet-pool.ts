/**
 * Reuse of ssh2's outgoing packet buffers (ssh2 1.17, AES-GCM and ChaCha20-Poly1305 with its
 * native binding).
 *
 * ssh2 allocates a fresh buffer for every outgoing SSH packet (`allocPacket`: length, padding
 * length, payload, padding, room for the tag), encrypts it in place and hands it to the socket.
 * A bulk upload sends one 32 KiB packet per 32 KiB of data, so 400 MiB are 12 800 buffers of
 * external memory; V8 collects them only when external memory has grown by its soft limit
 * (64 MiB), and then with a full mark-compact. That is most of the RSS growth of an upload over
 * SSH and one GC every 64 MiB sent.
 *
 * This module gives the session's current cipher an `allocPacket` that takes large packets from a
 * small free list of equally sized buffers, and puts a buffer back once the socket has written it
 * (the socket's write callback). Buffers are recognised by their own ArrayBuffer, so a packet the
 * socket never writes (the session died) is simply collected. Small packets and unknown ciphers
 * keep ssh2's own allocation. An upstream change would do the same inside ssh2: a per-protocol
 * free list in `allocPacket`, released from the `write` callback of `onWrite`.
 */
import { randomFillSync } from 'node:crypto';
import type { Socket } from 'node:net';

/** Largest SSH payload a pooled buffer holds: a 32 KiB CHANNEL_DATA (OpenSSH's maximum packet) plus its header. */
const POOLED_PAYLOAD_BYTES = 32 * 1024 + 64;
/** Smaller payloads keep ssh2's allocation (Node's own slab serves those under 4 KiB). */
const MIN_POOLED_PAYLOAD_BYTES = 8 * 1024;
/** Buffers kept for reuse at most: 3 MiB, more than a 2 MiB channel window in flight. */
const MAX_FREE = 96;

/** Packet layout of a cipher: padding block, and the bytes after the padding (tag). */
interface Layout {
  block: number;
  tag: number;
}
/** The ciphers whose `allocPacket` we reproduce (ssh2 lib/protocol/crypto.js). */
const LAYOUTS: Record<string, Layout> = {
  AESGCMCipherBinding: { block: 16, tag: 16 },
  ChaChaPolyCipherBinding: { block: 8, tag: 16 },
};

interface Cipher {
  allocPacket(payloadLen: number): Buffer;
  constructor: { name: string };
  [POOLED]?: true;
}
const POOLED = Symbol('pooled allocPacket');

export class OutgoingPacketPool {
  readonly #free: Buffer[] = [];
  /** Buffers handed out, by their ArrayBuffer (weak: a packet never written is just collected). */
  readonly #out = new WeakMap<ArrayBufferLike, Buffer>();
  #reused = 0;
  #allocated = 0;
  readonly #capacity: number;

  constructor() {
    // 4-byte length, padding length, payload, up to 2 blocks of padding, tag.
    this.#capacity = 4 + 1 + POOLED_PAYLOAD_BYTES + 32 + 16;
  }

  /** Buffers reused / allocated by the pool so far. */
  get stats(): { reused: number; allocated: number; free: number } {
    return { reused: this.#reused, allocated: this.#allocated, free: this.#free.length };
  }

  /**
   * Installs the pooled `allocPacket` on the client's current cipher, if it is one whose layout is
   * known. Call after every key exchange (ssh2 makes a new cipher object each time). Returns
   * whether the cipher is now pooled.
   */
  patchCipher(client: unknown): boolean {
    const cipher = (client as { _protocol?: { _cipher?: Cipher } })._protocol?._cipher;
    if (cipher === undefined || typeof cipher.allocPacket !== 'function') return false;
    if (cipher[POOLED]) return true;
    const layout = LAYOUTS[cipher.constructor.name];
    if (layout === undefined) return false;
    const own = cipher.allocPacket.bind(cipher);
    cipher.allocPacket = (payloadLen: number): Buffer => {
      if (payloadLen < MIN_POOLED_PAYLOAD_BYTES || payloadLen > POOLED_PAYLOAD_BYTES) return own(payloadLen);
      return this.#alloc(payloadLen, layout);
    };
    cipher[POOLED] = true;
    return true;
  }

  /**
   * Wraps `socket.write` so that a pooled packet goes back to the free list once written. ssh2
   * writes with `sock.write(data)`, no callback; other writes pass through untouched.
   */
  wrapSocket(socket: Socket): void {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with the socket as `this`
    const write = socket.write as (this: Socket, ...a: unknown[]) => boolean;
    const out = this.#out;
    const release = (buf: Buffer): void => {
      if (this.#free.length < MAX_FREE) this.#free.push(buf);
    };
    socket.write = function pooledWrite(this: Socket, ...args: unknown[]): boolean {
      const chunk = args[0];
      if (args.length === 1 && chunk instanceof Uint8Array) {
        const buf = out.get(chunk.buffer);
        if (buf !== undefined) {
          out.delete(chunk.buffer);
          return write.call(this, chunk, () => release(buf));
        }
      }
      return write.apply(this, args);
    };
  }

  /** ssh2's allocPacket layout (crypto.js), in a reused buffer. */
  #alloc(payloadLen: number, { block, tag }: Layout): Buffer {
    let pktLen = 4 + 1 + payloadLen;
    let padLen = block - ((pktLen - 4) & (block - 1));
    if (padLen < 4) padLen += block;
    pktLen += padLen;
    let buf = this.#free.pop();
    if (buf === undefined) {
      buf = Buffer.allocUnsafeSlow(this.#capacity);
      this.#allocated++;
    } else {
      this.#reused++;
    }
    this.#out.set(buf.buffer, buf);
    const packet = buf.subarray(0, pktLen + tag);
    packet.writeUInt32BE(pktLen - 4, 0);
    packet[4] = padLen;
    randomFillSync(packet, 5 + payloadLen, padLen);
    return packet;
  }
}
