/**
 * Running the commands a benchmark times: a command that must succeed, a command under GNU time
 * and bench/reap (whole process tree), waiting for a quiet machine, the random file to upload.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { MiB } from './stats.ts';

/** The bench/ folder (where reap and the upload children are). */
export const BENCH_DIR = join(new URL('.', import.meta.url).pathname, '..');

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Runs `argv` to completion; throws with its stderr unless it exits 0. */
export function sh(argv: string[], timeoutMs = 600_000): { stdout: string; stderr: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', maxBuffer: 64 * MiB, timeout: timeoutMs });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

/** One timed command: wall seconds, user+system CPU seconds of its whole process tree, peak RSS (KiB), stdout. */
export interface Timed {
  secs: number;
  cpu: number;
  maxRssKiB: number;
  stdout: string;
}

/** Runs `argv` under GNU time and bench/reap: wall seconds, user+system CPU seconds of the whole process tree, peak RSS. */
export function timed(argv: string[], env: NodeJS.ProcessEnv = process.env): Timed {
  const t0 = performance.now();
  // bench/reap waits for the command's orphans, so that their CPU is counted (virsh's ssh).
  const r = spawnSync('/usr/bin/time', ['-f', 'EPTIME %U %S %M', join(BENCH_DIR, 'reap'), ...argv], {
    env,
    encoding: 'utf8',
    maxBuffer: 64 * MiB,
    timeout: 600_000,
  });
  const secs = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr}`);
  const m = /EPTIME ([\d.]+) ([\d.]+) (\d+)/.exec(r.stderr);
  return { secs, cpu: m ? Number(m[1]) + Number(m[2]) : NaN, maxRssKiB: m ? Number(m[3]) : NaN, stdout: r.stdout };
}

/** Waits (at most 5 minutes) for the 1-minute load average to drop below `max`. */
export async function waitForQuiet(max: number): Promise<void> {
  for (let i = 0; i < 60 && loadavg()[0]! > max; i++) {
    if (i === 0) console.error(`# load ${loadavg()[0]!.toFixed(2)} > ${max}: waiting (at most 5 min)`);
    await sleep(5_000);
  }
}

/** The 1/5/15-minute load averages as printed in the benchmarks' headers. */
export const fmtLoad = (l: number[]): string => l.map((x) => x.toFixed(2)).join(' / ');

/** Writes `sizeMiB` MiB of random bytes to `path` and returns it. */
export async function makeRandomFile(path: string, sizeMiB: number): Promise<string> {
  const out = createWriteStream(path);
  for (let i = 0; i < sizeMiB; i++) {
    if (!out.write(randomBytes(MiB))) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r) => out.end(r));
  return path;
}

/** `--help`: prints `usage` and exits 0. */
export const HELP_OPTION = { help: { type: 'boolean', short: 'h', default: false } } as const;
export function printUsageIfAsked(values: { help: boolean }, usage: string): void {
  if (!values.help) return;
  console.log(usage);
  process.exit(0);
}
