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
 * then the ratios of medians against the anchors with the goals. `--json FILE` writes the figures.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { clearFaultRules } from '../test/support/host-faults.ts';
import { fmtLoad, HELP_OPTION, printUsageIfAsked, waitForQuiet } from './lib/run.ts';
import { COMMON_OPTIONS, makeUploadFile, sshBenchContext } from './lib/upload-ssh-context.ts';
import { printRounds } from './lib/upload-ssh-report.ts';
import { ROUNDS_OPTIONS, runRounds } from './lib/upload-ssh-rounds.ts';
import type { RoundsResult } from './lib/upload-ssh-rounds.ts';

const USAGE = `node bench/upload-ssh.ts [--size-mib 400] [--rounds 5] [--host 0] [--chunks 262120]
    [--ciphers aes128-gcm@openssh.com] [--read-bytes 262144] [--only ours,virsh,pipes,local]
    [--stock-ssh2] [--cold-start] [--node-flags '--max-semi-space-size=16']
    [--max-load 1.0] [--json out.json]`;

const { values } = parseArgs({ options: { ...COMMON_OPTIONS, ...ROUNDS_OPTIONS, ...HELP_OPTION } });
printUsageIfAsked(values, USAGE);

const ctx = sshBenchContext(values);
const { host, sizeMiB } = ctx;
await waitForQuiet(Number(values['max-load']));
const loadBefore = loadavg();
const file = await makeUploadFile(ctx);
let rounds: RoundsResult = { results: {}, loadDuring: [] };
const started = new Date().toISOString();
try {
  // A fault rule left by an interrupted test would black-hole the uploads.
  await clearFaultRules(host);
  rounds = runRounds(ctx, values, file);
} finally {
  rmSync(file, { force: true });
}
const loadAfter = loadavg();
const children = values['cold-start']
  ? 'cold (no compile cache)'
  : 'started as bin/ starts our entry points (warm compile cache)';
console.log(
  `upload of ${sizeMiB} MiB to ${host.name} over SSH, ${values.rounds} rounds, alternating; ` +
    `node ${process.version}, ${cpus().length} CPUs, our children ${children}, ` +
    `load (1/5/15 min) before ${fmtLoad(loadBefore)}, after ${fmtLoad(loadAfter)}, ` +
    `after each round ${rounds.loadDuring.map((x) => x.toFixed(2)).join(' ')}; started ${started}`,
);
printRounds(rounds.results, sizeMiB);
if (values.json !== undefined) {
  writeFileSync(
    values.json,
    JSON.stringify(
      {
        started,
        loadBefore,
        loadAfter,
        sizeMiB,
        rounds: Number(values.rounds),
        results: rounds.results,
        loadDuring: rounds.loadDuring,
      },
      null,
      2,
    ),
  );
}
