import { closeSync, openSync, readSync } from 'node:fs';

/**
 * A file in `readBytes` pieces through one reused buffer. The upload copies each chunk into its
 * packet before asking for the next, so the reader allocates nothing per read and the benchmark
 * measures the client, not the garbage of a file stream.
 *
 * It reads with `readSync` on the main thread, as virsh reads its file: a read from the page cache
 * costs tens of microseconds, while `fs/promises` sends each read through libuv's thread pool and
 * back (two thread hand-offs per 256 KiB), which on a busy 2-vCPU machine adds more wall time than
 * the upload path itself. Production sources are HTTP downloads, not files.
 */
// eslint-disable-next-line @typescript-eslint/require-await -- async like a download source; the reads are sync
export async function* fileChunks(path: string, readBytes: number): AsyncGenerator<Uint8Array> {
  const buf = Buffer.allocUnsafeSlow(readBytes);
  const fd = openSync(path, 'r');
  try {
    for (;;) {
      const bytesRead = readSync(fd, buf, 0, readBytes, null);
      if (bytesRead === 0) return;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    closeSync(fd);
  }
}
