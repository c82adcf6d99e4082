/**
 * Framing of libvirt RPC packets: a big-endian u32 length (counting itself), a 24-byte header,
 * then the body. Pure and synchronous. The parser accepts bytes split anywhere, rejects a length
 * outside [MIN_PACKET_SIZE, maxPacketBytes] before allocating, and never skips ahead.
 */
import { Limits, MAX_PACKET_SIZE, MIN_PACKET_SIZE } from './constants.ts';
import { LibvirtProtocolError } from './errors.ts';

export interface Header {
  prog: number;
  vers: number;
  proc: number;
  type: number;
  serial: number;
  status: number;
}

export interface Packet {
  header: Header;
  /** The body: a view that the packet owns (not reused by the parser). */
  body: Buffer;
}

/** Length word plus header (28 bytes): where a packet's body starts. */
export const PACKET_PREFIX_BYTES = MIN_PACKET_SIZE;
const PREFIX = PACKET_PREFIX_BYTES;
/** Chunks smaller than this are merged while buffered, so a dribbled frame costs its bytes, not per-chunk overhead. */
const COMPACT_BELOW_BYTES = 64 * 1024;

/** Length word plus header for a packet whose body is `bodyBytes` long. */
export function encodePrefix(header: Header, bodyBytes: number): Buffer {
  const buf = Buffer.allocUnsafe(PREFIX);
  buf.writeUInt32BE(PREFIX + bodyBytes, 0);
  buf.writeUInt32BE(header.prog >>> 0, 4);
  buf.writeUInt32BE(header.vers >>> 0, 8);
  buf.writeInt32BE(header.proc | 0, 12);
  buf.writeInt32BE(header.type | 0, 16);
  buf.writeUInt32BE(header.serial >>> 0, 20);
  buf.writeInt32BE(header.status | 0, 24);
  return buf;
}

/** One whole packet as a single buffer (for small messages). */
export function encodePacket(header: Header, body: Uint8Array = new Uint8Array(0)): Buffer {
  const prefix = encodePrefix(header, body.length);
  return body.length === 0 ? prefix : Buffer.concat([prefix, body]);
}

/** Reads the header of a packet whose length word starts at `offset`. */
export function decodeHeader(buf: Buffer, offset = 0): Header {
  return {
    prog: buf.readUInt32BE(offset + 4),
    vers: buf.readUInt32BE(offset + 8),
    proc: buf.readInt32BE(offset + 12),
    type: buf.readInt32BE(offset + 16),
    serial: buf.readUInt32BE(offset + 20),
    status: buf.readInt32BE(offset + 24),
  };
}

/**
 * Push parser. `push` returns every packet completed by the chunk and keeps the rest; it throws
 * LibvirtProtocolError on a bad length, after which the parser must be discarded.
 */
export class PacketParser {
  readonly maxPacketBytes: number;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #need = 0; // length of the packet being assembled, 0 while the length word is incomplete
  #failed = false;

  constructor(maxPacketBytes: number = MAX_PACKET_SIZE) {
    if (maxPacketBytes < MIN_PACKET_SIZE || maxPacketBytes > MAX_PACKET_SIZE) {
      throw new RangeError(`maxPacketBytes must be within [${MIN_PACKET_SIZE}, ${MAX_PACKET_SIZE}]`);
    }
    this.maxPacketBytes = maxPacketBytes;
  }

  /** Buffers held waiting for the rest of a packet (bounded by compaction). */
  get heldChunks(): number {
    return this.#chunks.length;
  }

  /** Bytes held waiting for the rest of a packet. */
  get bufferedBytes(): number {
    return this.#buffered;
  }

  push(chunk: Buffer): Packet[] {
    if (this.#failed) throw new LibvirtProtocolError('packet parser used after a framing error');
    const out: Packet[] = [];
    if (chunk.length === 0) return out;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    if (chunk.length < COMPACT_BELOW_BYTES) this.#compact();
    for (;;) {
      if (this.#need === 0) {
        if (this.#buffered < Limits.LEN_SIZE) break;
        const len = this.#peekLength();
        if (len < MIN_PACKET_SIZE || len > this.maxPacketBytes) {
          this.#fail();
          throw new LibvirtProtocolError(
            `packet length ${len} outside [${MIN_PACKET_SIZE}, ${this.maxPacketBytes}]; connection dropped`,
          );
        }
        this.#need = len;
      }
      if (this.#buffered < this.#need) break;
      const bytes = this.#take(this.#need);
      this.#need = 0;
      out.push({ header: decodeHeader(bytes), body: bytes.subarray(PREFIX) });
    }
    return out;
  }

  /**
   * A binary counter over the small newest chunks: two neighbours merge while the older is no
   * larger than the newer (and small). Chunks held stay O(bytes / 64 KiB + log n) and each byte is
   * copied at most ~16 times, whatever the peer's pacing.
   */
  #compact(): void {
    const c = this.#chunks;
    while (
      c.length > 1 &&
      c[c.length - 1]!.length < COMPACT_BELOW_BYTES &&
      c[c.length - 2]!.length <= c[c.length - 1]!.length
    ) {
      const b = c.pop()!;
      const a = c.pop()!;
      c.push(Buffer.concat([a, b]));
    }
  }

  #fail(): void {
    this.#failed = true;
    this.#chunks = [];
    this.#buffered = 0;
  }

  #peekLength(): number {
    const first = this.#chunks[0]!;
    if (first.length >= 4) return first.readUInt32BE(0);
    const four = Buffer.allocUnsafe(4);
    let filled = 0;
    for (const c of this.#chunks) {
      const n = Math.min(4 - filled, c.length);
      c.copy(four, filled, 0, n);
      filled += n;
      if (filled === 4) break;
    }
    return four.readUInt32BE(0);
  }

  /** Removes and returns the first `n` buffered bytes (zero-copy when one chunk holds them). */
  #take(n: number): Buffer {
    const first = this.#chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      this.#buffered -= n;
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const c = this.#chunks[0]!;
      const k = Math.min(n - filled, c.length);
      c.copy(out, filled, 0, k);
      filled += k;
      if (k === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(k);
    }
    this.#buffered -= n;
    return out;
  }
}
