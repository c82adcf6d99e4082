/**
 * Volumes in a test host's storage pool, made and removed with virsh inside the host's namespaces
 * (on its unix socket), for the upload benchmarks.
 */
import { spawnSync } from 'node:child_process';
import type { TestHost } from '../../test/support/testhosts.ts';
import { sh } from './run.ts';

/** `args` run inside the host's mount and network namespaces. */
export const inHost = (host: TestHost, ...args: string[]): string[] => [
  'nsenter',
  '-t',
  String(host.holderPid),
  '-m',
  '-n',
  '--',
  ...args,
];

/** Deletes a volume if it is there (no error when it is not). */
export function deleteVol(host: TestHost, name: string): void {
  const argv = inHost(host, 'virsh', '-q', 'vol-delete', '--pool', host.pool, name);
  spawnSync(argv[0]!, argv.slice(1), { timeout: 30_000 });
}

/**
 * Writes back dirty pages, so that the writeback of one upload (which the kernel starts up to 30 s
 * later) does not land on another one's clock. Every variant gets it before its run.
 */
export function settle(): void {
  spawnSync('sync');
}

/** A new empty raw volume of `sizeMiB` (the old one deleted), then `settle()`. */
export function freshVol(host: TestHost, name: string, sizeMiB: number): void {
  deleteVol(host, name);
  sh(inHost(host, 'virsh', '-q', 'vol-create-as', host.pool, name, `${sizeMiB}M`, '--format', 'raw'));
  settle();
}
