/**
 * Download streams (STORAGE_VOL_DOWNLOAD), bounded: CALL → REPLY OK, then STREAM/CONTINUE packets
 * of data from the daemon, an empty STREAM packet at the end of the data, our STREAM/OK finish, and
 * the daemon's STREAM/OK confirmation. Meant for small objects (marker volumes): the whole content
 * is collected in memory, and more than `maxBytes` kills the connection (the daemon cannot be
 * told to stop a download without aborting it, and a stream abort mid-download races its data).
 */
import { MessageStatus, procName } from './constants.ts';
import type { CallOptions, LibvirtConnection } from './connection.ts';
import { armBudget } from './budget.ts';
import { checkDurationMs, connectionLost, decodeRemoteError, LibvirtProtocolError } from './errors.ts';

export interface DownloadOptions extends CallOptions {
  /** Largest content accepted, in bytes. Default 1 MiB. */
  maxBytes?: number;
}

/** Runs a download stream of `proc` with the XDR-encoded `argsBody`; resolves with the content. */
export async function downloadStream(
  conn: LibvirtConnection,
  proc: number,
  argsBody: Uint8Array,
  options: DownloadOptions = {},
): Promise<Buffer> {
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  if (!Number.isInteger(maxBytes) || maxBytes < 0)
    throw new RangeError(`maxBytes must be a whole number of bytes, got ${maxBytes}`);
  const timeoutMs = checkDurationMs('timeoutMs', options.timeoutMs ?? 30_000);
  const name = procName(proc);
  const serial = conn.allocSerial();
  const pieces: Buffer[] = [];
  let received = 0;
  let sawEnd = false;
  let settle!: { resolve: () => void; reject: (err: Error) => void };
  const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => {});
  conn.registerStream(serial, {
    onPacket(packet) {
      const { status } = packet.header;
      if (status === MessageStatus.CONTINUE && packet.body.length > 0) {
        received += packet.body.length;
        if (received > maxBytes) {
          conn.kill(
            new LibvirtProtocolError(`${conn.label}: ${name} returned more than ${maxBytes} bytes; connection dropped`),
          );
          return;
        }
        pieces.push(Buffer.from(packet.body));
      } else if (status === MessageStatus.CONTINUE || (status === MessageStatus.OK && !sawEnd)) {
        // End of data (libvirt 9 sends an empty STREAM/CONTINUE): finish our side, then wait for
        // the daemon's STREAM/OK confirmation.
        if (sawEnd) return;
        sawEnd = true;
        conn.writeStreamPacket(proc, serial, MessageStatus.OK, []);
      } else if (status === MessageStatus.OK) {
        settle.resolve();
      } else if (status === MessageStatus.ERROR) {
        // A malformed error body throws: the connection dies of that protocol error.
        settle.reject(decodeRemoteError(packet.body, proc));
      }
    },
    onDead(reason) {
      settle.reject(connectionLost(reason, `${conn.label}: ${name} download lost its connection`));
    },
  });
  // Our own bounds end the download with their own error (not the connection loss they cause).
  let ended: Error | undefined;
  const end = (err: Error): void => {
    ended ??= err;
    settle.reject(err);
    conn.kill(err);
  };
  const disarm = armBudget(conn.label, `${name} download`, timeoutMs, options.signal, end);
  try {
    await conn.call(proc, argsBody, { timeoutMs, signal: options.signal }, serial);
    await done;
    return Buffer.concat(pieces, received);
  } catch (err) {
    throw ended ?? err;
  } finally {
    disarm();
    conn.unregisterStream(serial);
  }
}
