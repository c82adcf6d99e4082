/**
 * Upload streams (STORAGE_VOL_UPLOAD): CALL → REPLY OK, then STREAM/CONTINUE packets of raw bytes
 * with no per-packet reply, then finish (STREAM/OK, confirmed by STREAM/OK or answered with
 * STREAM/ERROR). A source that fails or stalls, or an abort, sends STREAM/ERROR and waits, within
 * a bound, for the daemon's confirmation, leaving the connection usable. A STREAM/ERROR from the
 * daemon at any time ends the upload at once with the daemon's error. Nothing outlives the call:
 * the sink, listeners, timers and the source are released on every path.
 */
import { Readable } from 'node:stream';
import { Limits, MessageStatus, procName } from './constants.ts';
import { PACKET_PREFIX_BYTES } from './packet.ts';
import { Deferred, PacketRing, syncToAsync } from './upload-plumbing.ts';
import { waitBounded } from '../wait.ts';
import type { CallOptions, LibvirtConnection } from './connection.ts';
import {
  checkDurationMs,
  connectionLost,
  decodeRemoteError,
  LibvirtAbortedError,
  LibvirtProtocolError,
  LibvirtTimeoutError,
  LibvirtUploadSourceError,
} from './errors.ts';
import type { CallObservation } from './observe.ts';
import type { Packet } from './packet.ts';
import { errorKind } from '../errors.ts';

/**
 * Default bytes per STREAM packet: libvirt's legacy stream payload bound (262 120), what virsh
 * sends. Not 256 KiB: libvirtd writes each packet to the volume as it comes, and writes that all
 * land on 256 KiB boundaries make the kernel cache the volume in 256 KiB folios, which on a VM
 * with free-page reporting made 1.6 GiB local uploads 2-3 times slower than virsh's
 * (docs/benchmarks.md). Keep it off page multiples.
 */
export const DEFAULT_UPLOAD_CHUNK_BYTES: number = Limits.LEGACY_PAYLOAD_MAX;

export interface UploadProgress {
  /** Bytes handed to the transport so far. */
  bytes: number;
}

export interface UploadOptions extends CallOptions {
  /** Bytes per STREAM packet. Default DEFAULT_UPLOAD_CHUNK_BYTES (262 120, as virsh; docs/benchmarks.md). */
  chunkBytes?: number;
  /** Longest wait, in ms, for the transport to take more data before the connection is killed. Default 30000. */
  writeIdleTimeoutMs?: number;
  /** Longest wait, in ms, for the source's next chunk before the upload is aborted. Default 60000. */
  sourceIdleTimeoutMs?: number;
  /** Longest wait, in ms, for the daemon to confirm the finish. Default 120000. */
  finishTimeoutMs?: number;
  /** Longest wait, in ms, for the daemon to confirm an abort before the connection is killed. Default 5000. */
  abortTimeoutMs?: number;
  /** Called after each packet is handed to the transport. */
  onProgress?: (progress: UploadProgress) => void;
}

export interface UploadResult {
  bytes: number;
}

const MAX_CHUNK_BYTES = 16 * 1024 * 1024 - 64;

/** Marks errors that end the upload without an abort message (daemon error, dead connection). */
const REMOTE = Symbol('remote failure');
function isRemote(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[REMOTE] === true;
}
function markRemote(err: Error): Error {
  (err as unknown as Record<symbol, unknown>)[REMOTE] = true;
  return err;
}

/** What an upload reads: a Readable, an async iterable, or an iterable of byte chunks. */
export type UploadSource = Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

function uploadLimits(options: UploadOptions) {
  const chunkBytes = options.chunkBytes ?? DEFAULT_UPLOAD_CHUNK_BYTES;
  if (!Number.isInteger(chunkBytes) || chunkBytes < 1 || chunkBytes > MAX_CHUNK_BYTES) {
    throw new RangeError(`chunkBytes must be an integer in [1, ${MAX_CHUNK_BYTES}], got ${chunkBytes}`);
  }
  return {
    chunkBytes,
    writeIdleTimeoutMs: checkDurationMs('writeIdleTimeoutMs', options.writeIdleTimeoutMs ?? 30_000),
    sourceIdleTimeoutMs: checkDurationMs('sourceIdleTimeoutMs', options.sourceIdleTimeoutMs ?? 60_000),
    finishTimeoutMs: checkDurationMs('finishTimeoutMs', options.finishTimeoutMs ?? 120_000),
    abortTimeoutMs: checkDurationMs('abortTimeoutMs', options.abortTimeoutMs ?? 5_000),
  };
}

/**
 * Runs an upload stream of `proc` with the XDR-encoded `argsBody`, feeding it from `source`.
 * Resolves once the daemon confirmed the finish.
 */
export async function uploadStream(
  conn: LibvirtConnection,
  proc: number,
  argsBody: Uint8Array,
  source: UploadSource,
  options: UploadOptions = {},
): Promise<UploadResult> {
  let limits: ReturnType<typeof uploadLimits>;
  try {
    limits = uploadLimits(options);
  } catch (err) {
    // Bad options lose nothing: the source is released as on every other path.
    if (source instanceof Readable) source.destroy();
    throw err;
  }
  const { chunkBytes, writeIdleTimeoutMs, sourceIdleTimeoutMs, finishTimeoutMs, abortTimeoutMs } = limits;
  const name = procName(proc);

  const serial = conn.allocSerial();
  const failure = new Deferred<never>(); // daemon STREAM/ERROR or dead connection
  const confirmation = new Deferred<'ok'>(); // daemon STREAM/OK (finish or abort confirmed)
  conn.registerStream(serial, {
    onPacket(packet: Packet) {
      const { status } = packet.header;
      if (status === MessageStatus.OK) {
        confirmation.resolve('ok');
      } else if (status === MessageStatus.ERROR) {
        // A malformed error body throws: the connection dies of that protocol error.
        const err = markRemote(decodeRemoteError(packet.body, proc));
        failure.reject(err);
        confirmation.reject(err);
      } else {
        conn.kill(new LibvirtProtocolError(`${conn.label}: ${name} upload received stream data with status ${status}`));
      }
    },
    onDead(reason) {
      const err = markRemote(connectionLost(reason, `${conn.label}: ${name} upload lost its connection`));
      failure.reject(err);
      confirmation.reject(err);
    },
  });

  const aborted = new Deferred<never>();
  const onAbort = (): void =>
    aborted.reject(new LibvirtAbortedError(`${name} upload aborted by the caller`, { cause: options.signal?.reason }));
  options.signal?.addEventListener('abort', onAbort, { once: true });

  // A plain async iterable is iterated directly (never buffered ahead), so it may reuse its
  // buffer: each chunk is copied into a packet before the next one is asked for.
  const iterator: AsyncIterator<Uint8Array> =
    Symbol.asyncIterator in source
      ? (source[Symbol.asyncIterator]() as AsyncIterator<Uint8Array>)
      : syncToAsync(source[Symbol.iterator]());
  const releaseSource = (): void => {
    if (source instanceof Readable) source.destroy();
    else void Promise.resolve(iterator.return?.()).catch(() => {});
  };
  let sourceEnded = false;
  let opened = false;
  let finishing = false;
  let observation: CallObservation | undefined;
  let total = 0;
  // Packets are filled in a small ring of buffers reused once the transport is done with them:
  // memory stays at PACKET_RING × chunkBytes whatever the file size, and the source's chunks
  // become garbage at once.
  const ring = new PacketRing(chunkBytes);
  let packet: Buffer | undefined;
  let filled = 0;
  const stalledTransport = (): Error => {
    const err = new LibvirtTimeoutError(
      `${conn.label}: ${name} upload: the transport took no data for ${writeIdleTimeoutMs} ms; connection killed`,
    );
    conn.kill(err);
    return markRemote(err);
  };

  const send = async (): Promise<void> => {
    const buf = packet!;
    const bytes = filled;
    packet = undefined;
    filled = 0;
    // Backpressure is honoured before writing, not after: while the transport drains the last
    // packet, the loop already fills the next one.
    if (conn.writeBlocked) {
      await waitBounded(conn.whenWritable(), {
        timeoutMs: writeIdleTimeoutMs,
        onTimeout: stalledTransport,
        interrupts: [failure, aborted],
      });
    }
    conn.writeStreamBuffer(proc, serial, MessageStatus.CONTINUE, buf, bytes, () => ring.release(buf));
    total += bytes;
    options.onProgress?.({ bytes: total });
  };

  const append = async (chunk: Uint8Array): Promise<void> => {
    for (let offset = 0; offset < chunk.length;) {
      packet ??= await waitBounded(ring.acquire(), {
        timeoutMs: writeIdleTimeoutMs,
        onTimeout: stalledTransport,
        interrupts: [failure, aborted],
      });
      const n = Math.min(chunkBytes - filled, chunk.length - offset);
      packet.set(chunk.subarray(offset, offset + n), PACKET_PREFIX_BYTES + filled);
      filled += n;
      offset += n;
      if (filled === chunkBytes) await send();
    }
  };

  try {
    await conn.call(proc, argsBody, options, serial);
    opened = true;
    observation = conn.observeStream(proc, serial);
    if (failure.settled) await failure.promise;
    for (;;) {
      const next = await waitBounded(iterator.next(), {
        timeoutMs: sourceIdleTimeoutMs,
        onTimeout: () =>
          new LibvirtUploadSourceError(`${name} upload: the source produced no data for ${sourceIdleTimeoutMs} ms`),
        interrupts: [failure, aborted],
      }).catch((err: unknown) => {
        if (isRemote(err) || err instanceof LibvirtAbortedError || err instanceof LibvirtUploadSourceError) throw err;
        throw new LibvirtUploadSourceError(`${name} upload: the source failed: ${(err as Error).message}`, {
          cause: err,
          kind: errorKind(err),
        });
      });
      if (next.done) {
        sourceEnded = true;
        break;
      }
      const chunk: unknown = next.value;
      if (!(chunk instanceof Uint8Array)) {
        // A string chunk (a Readable with an encoding set) would be counted in UTF-16 units but
        // written as UTF-8, desynchronising the framing: refuse it.
        throw new LibvirtUploadSourceError(`${name} upload: the source yielded ${typeof chunk} chunks, not bytes`, {
          kind: 'Permanent',
        });
      }
      await append(chunk);
    }
    if (filled > 0) await send();
    finishing = true;
    conn.writeStreamPacket(proc, serial, MessageStatus.OK, []);
    await waitBounded(confirmation.promise, {
      timeoutMs: finishTimeoutMs,
      onTimeout: () => {
        const err = new LibvirtTimeoutError(
          `${conn.label}: ${name} upload: the daemon did not confirm the finish within ${finishTimeoutMs} ms; connection killed`,
        );
        conn.kill(err);
        return markRemote(err);
      },
      interrupts: [aborted],
    });
    observation?.end({ bytesOut: total });
    return { bytes: total };
  } catch (err) {
    observation?.end({ bytesOut: total, error: err });
    if (finishing && err instanceof LibvirtAbortedError) {
      // The finish is on the wire and cannot be taken back by a stream abort: the caller wants out
      // now, so the connection goes (the volume's state is unknown to the caller, as it should be).
      conn.kill(err);
    } else if (opened && !finishing && !isRemote(err) && !conn.isDead && !failure.settled) {
      await abortStream(conn, proc, serial, confirmation, abortTimeoutMs, name);
    }
    throw err;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    conn.unregisterStream(serial);
    ring.dispose();
    if (!sourceEnded) releaseSource();
  }
}

/** Sends STREAM/ERROR and waits for the daemon's confirmation; kills the connection if none comes. */
async function abortStream(
  conn: LibvirtConnection,
  proc: number,
  serial: number,
  confirmation: Deferred<'ok'>,
  abortTimeoutMs: number,
  name: string,
): Promise<void> {
  conn.writeStreamPacket(proc, serial, MessageStatus.ERROR, []);
  try {
    await waitBounded(confirmation.promise, {
      timeoutMs: abortTimeoutMs,
      onTimeout: () => new LibvirtTimeoutError(`${name} upload: no abort confirmation within ${abortTimeoutMs} ms`),
    });
  } catch (err) {
    if (err instanceof LibvirtTimeoutError) conn.kill(err);
    // A STREAM/ERROR answer also confirms the abort.
  }
}
