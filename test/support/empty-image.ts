/** The proxy image the integration tests and benchmarks serve: an empty qcow2 made by qemu-img. */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const pexec = promisify(execFile);

/** Creates `<dir>/empty.qcow2` (64 MiB virtual, a few KiB on disk; qemu-img bounded to 20 s) and returns its bytes. */
export async function emptyQcow2(dir: string): Promise<Buffer> {
  const file = join(dir, 'empty.qcow2');
  await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
  return readFile(file);
}
