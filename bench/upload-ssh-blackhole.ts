/**
 * Benchmark: black-holes a test host's SSH port mid-upload (every segment dropped both ways, no
 * RST) for our client (its defaults, and a 2 s keepalive) and for `virsh vol-upload` over
 * qemu+ssh (with and without ssh's own keepalive), and reports when each noticed and gave up;
 * virsh gets a hard timeout (`--virsh-timeout-s`) so that the bench always ends.
 * bench/upload-ssh.ts runs it with `--blackhole` (after the rounds) or `--blackhole-only`.
 */
import { parseArgs } from 'node:util';
import { HELP_OPTION, printUsageIfAsked } from './lib/run.ts';
import { BLACKHOLE_OPTIONS } from './lib/upload-ssh-blackhole.ts';
import { COMMON_OPTIONS } from './lib/upload-ssh-context.ts';
import { runSshBench } from './lib/upload-ssh-run.ts';

const USAGE = `node bench/upload-ssh-blackhole.ts [--size-mib 400] [--host 0] [--virsh-timeout-s 90] [--max-load 1.0]
    [--json out.json]`;

const { values } = parseArgs({ options: { ...COMMON_OPTIONS, ...BLACKHOLE_OPTIONS, ...HELP_OPTION } });
printUsageIfAsked(values, USAGE);
await runSshBench(values, { runRounds: false, blackholeVirshTimeoutS: Number(values['virsh-timeout-s']) });
