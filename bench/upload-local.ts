/**
 * Benchmark: upload the same file into a test host's pool over the local libvirt socket, by our
 * client and by `virsh vol-upload`, alternating, several rounds, in one run. Reports median
 * seconds, MB/s, the ratio ours/virsh, and our process's RSS growth during the upload.
 *
 *   node bench/upload-local.ts [--size-mib 400] [--rounds 5] [--chunks 1048576] [--host 0]
 *   node bench/upload-local.ts --size-mib 400 --rounds 3 --chunks 262144,524288,1048576,2097152,4194304
 *
 * Needs `test/hosts/testhost up`. Not a test: it asserts nothing and prints a table.
 */
import { spawnSync } from 'node:child_process';
import { createWriteStream, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadTestHosts, localSocketPath } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';

const { values } = parseArgs({
  options: {
    'size-mib': { type: 'string', default: '400' },
    rounds: { type: 'string', default: '5' },
    chunks: { type: 'string', default: String(1024 * 1024) },
    host: { type: 'string', default: '0' },
  },
});
const MiB = 1024 * 1024;
const sizeMiB = Number(values['size-mib']);
const rounds = Number(values.rounds);
const chunks = values.chunks.split(',').map(Number);
const host: TestHost = loadTestHosts()[Number(values.host)]!;
const here = new URL('.', import.meta.url).pathname;

function sh(argv: string[]): string {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', maxBuffer: 64 * MiB });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}
const virsh = (...args: string[]): string =>
  sh(['nsenter', '-t', String(host.holderPid), '-m', '-n', '--', 'virsh', '-q', ...args]);

async function makeFile(): Promise<string> {
  const path = join(tmpdir(), `ep-bench-${sizeMiB}m.bin`);
  const out = createWriteStream(path);
  for (let i = 0; i < sizeMiB; i++)
    if (!out.write(randomBytes(MiB))) await new Promise<void>((r) => out.once('drain', () => r()));
  await new Promise<void>((r) => out.end(r));
  return path;
}

/** Writes back dirty pages first, so one run's writeback does not land on the next run's clock. */
function settle(): void {
  spawnSync('sync');
}

/** Deletes a volume if it is there (no error when it is not). */
function deleteVol(name: string): void {
  spawnSync('nsenter', [
    '-t',
    String(host.holderPid),
    '-m',
    '-n',
    '--',
    'virsh',
    '-q',
    'vol-delete',
    '--pool',
    host.pool,
    name,
  ]);
}

function freshVol(name: string): void {
  deleteVol(name);
  virsh('vol-create-as', host.pool, name, `${sizeMiB}M`, '--format', 'raw');
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const file = await makeFile();
const vol = `ep-bench-${process.pid}.raw`;
const results: Record<string, { secs: number[]; growth: number[] }> = {};
const record = (key: string, secs: number, growth = NaN): void => {
  (results[key] ??= { secs: [], growth: [] }).secs.push(secs);
  results[key].growth.push(growth);
};
/** One timed upload per variant: ours per chunk size, then virsh. */
const variants: (() => void)[] = [
  ...chunks.map((chunk) => () => {
    const out = sh([
      process.execPath,
      join(here, 'upload-once.ts'),
      '--socket',
      localSocketPath(host),
      '--pool',
      host.pool,
      '--vol',
      vol,
      '--file',
      file,
      '--chunk',
      String(chunk),
    ]);
    const r = JSON.parse(out) as { seconds: number; idleRss: number; peakRss: number };
    record(`ours chunk=${chunk / 1024}KiB`, r.seconds, r.peakRss - r.idleRss);
  }),
  () => {
    const t0 = performance.now();
    virsh('vol-upload', '--pool', host.pool, vol, file);
    record('virsh vol-upload', (performance.now() - t0) / 1000);
  },
];
try {
  for (let round = 0; round < rounds; round++) {
    // Each round starts one variant later, so no variant always follows the same one.
    for (let i = 0; i < variants.length; i++) {
      freshVol(vol);
      settle();
      variants[(round + i) % variants.length]!();
    }
  }
} finally {
  deleteVol(vol);
  rmSync(file, { force: true });
}

const virshMedian = median(results['virsh vol-upload']!.secs);
console.log(
  `upload of ${sizeMiB} MiB over the local libvirt socket, ${rounds} rounds, alternating (node ${process.version})`,
);
console.log('');
for (const [key, r] of Object.entries(results))
  console.log(`${key}: rounds ${r.secs.map((x) => x.toFixed(3)).join(' ')}`);
console.log('');
console.log('| client | median s | MB/s | ours/virsh (time) | RSS growth, median MiB |');
console.log('|---|---|---|---|---|');
for (const [key, r] of Object.entries(results)) {
  const m = median(r.secs);
  const growth = r.growth.every(Number.isNaN) ? '—' : (median(r.growth) / MiB).toFixed(1);
  console.log(
    `| ${key} | ${m.toFixed(3)} | ${((sizeMiB * MiB) / 1e6 / m).toFixed(0)} | ${(m / virshMedian).toFixed(2)} | ${growth} |`,
  );
}
