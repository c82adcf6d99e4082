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
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { loadTestHosts, localSocketPath } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { deleteVol, freshVol, inHost } from './lib/host-vols.ts';
import { BENCH_DIR, makeRandomFile, sh } from './lib/run.ts';
import { mbPerS, median, MiB } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    'size-mib': { type: 'string', default: '400' },
    rounds: { type: 'string', default: '5' },
    chunks: { type: 'string', default: String(1024 * 1024) },
    host: { type: 'string', default: '0' },
  },
});
const sizeMiB = Number(values['size-mib']);
const rounds = Number(values.rounds);
const chunks = values.chunks.split(',').map(Number);
const host: TestHost = loadTestHosts()[Number(values.host)]!;
const virsh = (...args: string[]): string => sh(inHost(host, 'virsh', '-q', ...args)).stdout;

const file = await makeRandomFile(join(tmpdir(), `ep-bench-${sizeMiB}m.bin`), sizeMiB);
const vol = `ep-bench-${process.pid}.raw`;
const results: Record<string, { secs: number[]; growth: number[] }> = {};
const record = (key: string, secs: number, growth = NaN): void => {
  (results[key] ??= { secs: [], growth: [] }).secs.push(secs);
  results[key].growth.push(growth);
};
/** One timed upload per variant: ours per chunk size, then virsh. */
const variants: (() => void)[] = [
  ...chunks.map((chunk) => () => {
    const { stdout: out } = sh([
      process.execPath,
      join(BENCH_DIR, 'upload-once.ts'),
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
      freshVol(host, vol, sizeMiB); // and settle: one run's writeback must not land on the next run's clock
      variants[(round + i) % variants.length]!();
    }
  }
} finally {
  deleteVol(host, vol);
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
    `| ${key} | ${m.toFixed(3)} | ${mbPerS(sizeMiB * MiB, m).toFixed(0)} | ${(m / virshMedian).toFixed(2)} | ${growth} |`,
  );
}
