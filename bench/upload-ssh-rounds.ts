/**
 * Benchmark: upload the same file into a test host's storage pool, in one run, alternating,
 * several rounds:
 *
 * - ours over SSH: a `dedicated('bulk')` link (lib/ssh) in a child process per upload
 *   (bench/upload-ssh-once.ts), so its RSS and CPU are its own; one row per chunk size × cipher
 *   (and, with `--stock-ssh2`, one with ssh2's stock per-packet buffers and writes);
 * - the anchor: `virsh -c <descriptor.virshUri> vol-upload` (qemu+ssh through the OpenSSH client,
 *   its default cipher);
 * - the ceiling: `cat FILE | ssh -F <sshConfigPath> <host> 'cat >/dev/null'`, with OpenSSH's
 *   default cipher and with `-c aes128-gcm@openssh.com`;
 * - the local socket: ours (bench/upload-once.ts) and `virsh vol-upload` inside the host's
 *   namespaces, both on the host's unix socket.
 *
 * Each round rotates the order of the variants (on this machine an upload's speed depends on which
 * one ran before it), and before each upload `sync` writes back the dirty pages of the last one.
 * For every variant it prints the whole process (wall, CPU user+system of the command and its
 * children, orphans included (bench/reap), peak RSS: GNU time) and, for ours, the in-process figures (dial or connect to the
 * confirmed finish: seconds, `process.cpuUsage`, RSS growth = peak minus idle), each as median
 * (min-max, max/min); then where our whole-process time goes (start to the dial, the upload, the
 * close, exit and wrapper; beside `node -e 0` started the same way, the floor of any Node command);
 * then the ratios of medians against the anchors with the issue's goals.
 * bench/upload-ssh.ts runs this and, with `--blackhole`, bench/upload-ssh-blackhole.ts after it.
 */
import { parseArgs } from 'node:util';
import { HELP_OPTION, printUsageIfAsked } from './lib/run.ts';
import { COMMON_OPTIONS } from './lib/upload-ssh-context.ts';
import { ROUNDS_OPTIONS } from './lib/upload-ssh-rounds.ts';
import { runSshBench } from './lib/upload-ssh-run.ts';

const USAGE = `node bench/upload-ssh-rounds.ts [--size-mib 400] [--rounds 5] [--host 0] [--chunks 262120]
    [--ciphers aes128-gcm@openssh.com] [--read-bytes 262144] [--only ours,virsh,pipes,local]
    [--stock-ssh2] [--source sync|async] [--cold-start] [--node-flags '--max-semi-space-size=16']
    [--max-load 1.0] [--json out.json]`;

const { values } = parseArgs({ options: { ...COMMON_OPTIONS, ...ROUNDS_OPTIONS, ...HELP_OPTION } });
printUsageIfAsked(values, USAGE);
await runSshBench(values, { rounds: values, runRounds: true });
