import { open } from 'node:fs/promises';

/**
 * A file in `readBytes` pieces through one reused buffer. The upload copies each chunk into its
 * packet before asking for the next, so the reader allocates nothing per read and the benchmark
 * measures the client, not the garbage of a file stream.
 */
export async function* fileChunks(path: string, readBytes: number): AsyncGenerator<Uint8Array> {
  const fh = await open(path, 'r');
  const buf = Buffer.allocUnsafeSlow(readBytes);
  try {
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, readBytes, null);
      if (bytesRead === 0) return;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await fh.close();
  }
}
