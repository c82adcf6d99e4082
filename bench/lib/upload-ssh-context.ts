/**
 * What bench/upload-ssh.ts and its rounds (bench/lib/upload-ssh-rounds.ts) share: the options,
 * the test host they upload to, and the file they upload.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTestHosts } from '../../test/support/testhosts.ts';
import type { TestHost } from '../../test/support/testhosts.ts';
import { makeRandomFile } from './run.ts';

/** The options of every SSH upload benchmark (for `parseArgs`). */
export const COMMON_OPTIONS = {
  'size-mib': { type: 'string', default: '400' },
  host: { type: 'string', default: '0' },
  'max-load': { type: 'string', default: '1.0' },
  json: { type: 'string' },
} as const;

/** The host a run uploads to and how big the upload is. */
export interface SshBenchContext {
  host: TestHost;
  hostIndex: number;
  sizeMiB: number;
  /** qemu+ssh URI of virsh (descriptor.virshUri) and the hosts' ssh_config. */
  virshUri: string;
  sshConfig: string;
}

export function sshBenchContext(values: { 'size-mib': string; host: string }): SshBenchContext {
  const hostIndex = Number(values.host);
  const host = loadTestHosts()[hostIndex]!;
  return {
    host,
    hostIndex,
    sizeMiB: Number(values['size-mib']),
    virshUri: String(host.virshUri),
    sshConfig: String(host.sshConfigPath),
  };
}

/** The `sizeMiB` MiB of random bytes every variant uploads. */
export function makeUploadFile(ctx: SshBenchContext): Promise<string> {
  return makeRandomFile(join(tmpdir(), `ep-bench-ssh-${ctx.sizeMiB}m.bin`), ctx.sizeMiB);
}
