/**
 * The SSH upload benchmark as one command: the rounds (bench/upload-ssh-rounds.ts: ours over SSH
 * and on the local socket against virsh and the ssh pipes) and, with `--blackhole`, the black hole
 * mid-upload after them (bench/upload-ssh-blackhole.ts); `--blackhole-only` runs the black hole
 * alone. One header, the tables of both, one `--json` file.
 */
import { parseArgs } from 'node:util';
import { HELP_OPTION, printUsageIfAsked } from './lib/run.ts';
import { BLACKHOLE_OPTIONS } from './lib/upload-ssh-blackhole.ts';
import { COMMON_OPTIONS } from './lib/upload-ssh-context.ts';
import { ROUNDS_OPTIONS } from './lib/upload-ssh-rounds.ts';
import { runSshBench } from './lib/upload-ssh-run.ts';

const USAGE = `node bench/upload-ssh.ts [--size-mib 400] [--rounds 5] [--host 0] [--chunks 262120]
    [--ciphers aes128-gcm@openssh.com] [--read-bytes 262144] [--only ours,virsh,pipes,local]
    [--stock-ssh2] [--source sync|async] [--cold-start] [--node-flags '--max-semi-space-size=16'] [--blackhole] [--blackhole-only]
    [--virsh-timeout-s 90] [--max-load 1.0] [--json out.json]`;

const { values } = parseArgs({
  options: {
    ...COMMON_OPTIONS,
    ...ROUNDS_OPTIONS,
    ...BLACKHOLE_OPTIONS,
    blackhole: { type: 'boolean', default: false },
    'blackhole-only': { type: 'boolean', default: false },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
await runSshBench(values, {
  rounds: values,
  runRounds: !values['blackhole-only'],
  ...(values.blackhole || values['blackhole-only']
    ? { blackholeVirshTimeoutS: Number(values['virsh-timeout-s']) }
    : {}),
});
