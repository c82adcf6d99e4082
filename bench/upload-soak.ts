/**
 * Soak benchmark: many uploads, failed and good, in one process on one dedicated SSH link, as a
 * worker would run them; prints the process's RSS against its idle RSS (after the dial, before the
 * first upload) as it goes, and the JS heap and external memory. Failed uploads stop their source
 * mid-stream (the source throws after `--fail-after-mib`), so the client aborts the stream and the
 * link lives on. Every upload goes into the same volume (created once, deleted at the end).
 *
 *   node bench/upload-soak.ts [--uploads 200] [--size-mib 32] [--fail-after-mib 8] [--host 0]
 *       [--every 20] [--stock-ssh2]
 *
 * Needs `test/hosts/testhost up`. Not a test: it asserts nothing and prints a table.
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { HostLinks } from '../lib/hostlink/pool.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import { fmtMiB, MiB } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    uploads: { type: 'string', default: '200' },
    'size-mib': { type: 'string', default: '32' },
    'fail-after-mib': { type: 'string', default: '8' },
    host: { type: 'string', default: '0' },
    every: { type: 'string', default: '20' },
    'stock-ssh2': { type: 'boolean', default: false },
  },
});
const uploads = Number(values.uploads);
const sizeMiB = Number(values['size-mib']);
const failAfter = Number(values['fail-after-mib']) * MiB;
const every = Number(values.every);
const h = loadTestHosts()[Number(values.host)]!;
const name = `ep-bench-soak-${process.pid}.raw`;

/** The same 256 KiB of random bytes, `sizeMiB` times over; throws after `failAt` bytes if given. */
const piece = randomBytes(256 * 1024);
async function* source(failAt?: number): AsyncGenerator<Uint8Array> {
  for (let sent = 0; sent < sizeMiB * MiB; sent += piece.length) {
    if (failAt !== undefined && sent >= failAt) throw new Error('source failed on purpose');
    await Promise.resolve();
    yield piece;
  }
}

const links = new HostLinks(hostTarget(h), { dial: { stockSsh2Writes: values['stock-ssh2'] } });
const link = await links.dedicated('bulk');
const pool = await link.client.storagePoolLookupByName(h.pool);
await link.client.storageVolCreateXml(
  pool,
  `<volume><name>${name}</name><capacity unit='bytes'>${sizeMiB * MiB}</capacity><target><format type='raw'/></target></volume>`,
);
const vol = await link.client.storageVolLookupByName(pool, name);
const fmt = (b: number): string => fmtMiB(b, 1);
const mem = (): NodeJS.MemoryUsage => process.memoryUsage();
const idle = mem();
let peak = idle.rss;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
console.log(
  `soak: ${uploads} uploads of ${sizeMiB} MiB to ${h.name} on one link, every other one failing after ` +
    `${values['fail-after-mib']} MiB; node ${process.version}; load ${loadavg()[0]!.toFixed(2)}` +
    (values['stock-ssh2'] ? "; ssh2's stock writes" : ''),
);
console.log('');
console.log(
  '| after uploads | failed / good | RSS MiB | RSS − idle MiB | peak RSS − idle MiB | heap used MiB | external MiB |',
);
console.log('|---|---|---|---|---|---|---|');
const row = (n: number, failed: number, good: number): void => {
  const m = mem();
  console.log(
    `| ${n} | ${failed} / ${good} | ${fmt(m.rss)} | ${fmt(m.rss - idle.rss)} | ${fmt(peak - idle.rss)} | ${fmt(m.heapUsed)} | ${fmt(m.external)} |`,
  );
};
row(0, 0, 0);
let failed = 0;
let good = 0;
const t0 = performance.now();
try {
  for (let i = 1; i <= uploads; i++) {
    if (i % 2 === 1) {
      const err = await link.client.storageVolUpload(vol, source(failAfter)).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (err === undefined) throw new Error('a failing upload succeeded');
      failed++;
    } else {
      const res = await link.client.storageVolUpload(vol, source());
      if (res.bytes !== sizeMiB * MiB) throw new Error(`uploaded ${res.bytes} bytes`);
      good++;
    }
    if (link.isDead) throw new Error(`the link died: ${link.deadReason?.message}`);
    if (i % every === 0 || i === uploads) row(i, failed, good);
  }
} finally {
  clearInterval(sampler);
  await link.client.storageVolDelete(vol).catch(() => undefined);
  await link.close();
  links.close();
}
console.log('');
console.log(
  `${uploads} uploads in ${((performance.now() - t0) / 1000).toFixed(1)} s; idle RSS ${fmt(idle.rss)} MiB, ` +
    `peak ${fmt(peak)} MiB (+${fmt(peak - idle.rss)}); load ${loadavg()[0]!.toFixed(2)}`,
);
