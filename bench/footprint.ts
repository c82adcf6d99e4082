/**
 * Footprint and start-up benchmark: what each layer of a worker costs at rest, and what an
 * operator waits for.
 *
 * 1. Layers, each in a fresh process that loads them and then idles 1 s: Node alone; one small
 *    `.ts` file (Node's type stripping); our libvirt client; our SSH transport (ssh2); the kvm2
 *    provider; the activities (all our code a worker loads); the Temporal client; the Temporal
 *    worker package; the worker package plus its native runtime connected to the dev server; the
 *    workflow bundle (webpack, which `Worker.create({ workflowsPath })` runs at every start). For
 *    each: wall time to loaded, CPU seconds, RSS, JS heap used and external memory (medians).
 * 2. Start-up of the commands: `--help` of egressctl and the worker, whole process (GNU
 *    time), as `node workers/X.ts` with no compile cache and as `bin/X` (the launchers, which turn
 *    the compile cache on; it also keeps the stripped TypeScript) with the cache warm.
 * 3. The worker: `bin/worker` on a task queue of its own (no schedules), with a providers file for
 *    the local test hosts: time to "worker running", time from spawn to the result of a
 *    `providerHealthWorkflow` it runs (its first libvirt RPCs), RSS then and after `--idle-s` at
 *    rest. The first run starts with empty caches (compile cache, workflow bundle), the rest warm.
 *
 *   node bench/footprint.ts [--runs 3] [--idle-s 20] [--skip-worker]
 *
 * Needs the Temporal dev server (scripts/temporal up) for the runtime and worker rows, and
 * `test/hosts/testhost up` for the worker's first RPC. Not a test: it prints tables.
 */
import { temporalSettings } from '../client/connection.ts';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { fmtRange, median, spread } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    'idle-s': { type: 'string', default: '20' },
    'skip-worker': { type: 'boolean', default: false },
  },
});
const runs = Number(values.runs);
const root = new URL('..', import.meta.url).pathname;
const MiB = 1024 * 1024;
const address = temporalSettings().address;

/** The code a layer's process runs (an ES module; `ROOT` is the repository). */
const layers: [string, string][] = [
  ['Node alone', ''],
  ['+ one small .ts file (type stripping)', `await import(ROOT + 'lib/errors.ts');`],
  ['+ libvirt client (lib/libvirt)', `await import(ROOT + 'lib/libvirt/client.ts');`],
  ['+ SSH transport (lib/ssh, ssh2)', `await import(ROOT + 'lib/hostlink/pool.ts');`],
  ['+ kvm2 provider (lib/kvm2)', `await import(ROOT + 'lib/kvm2/index.ts');`],
  ['+ activities (all our code a worker loads)', `await import(ROOT + 'activities/index.ts');`],
  ['Temporal client alone (@temporalio/client)', `await import('@temporalio/client');`],
  ['Temporal worker package alone (@temporalio/worker)', `await import('@temporalio/worker');`],
  [
    'Temporal worker package + native runtime connected',
    `const w = await import('@temporalio/worker');
     globalThis.keep = await w.NativeConnection.connect({ address: ${JSON.stringify(address)} });`,
  ],
  [
    'Worker.create({ workflowsPath }) as workers/worker.ts (bundles at start; no activities)',
    `const w = await import('@temporalio/worker');
     const connection = await w.NativeConnection.connect({ address: ${JSON.stringify(address)} });
     globalThis.keep = await w.Worker.create({ connection, taskQueue: 'ep-bench-footprint-' + process.pid, workflowsPath: ROOT + 'workflows/index.ts' });`,
  ],
  [
    'Worker.create({ workflowBundle }) with a bundle built beforehand (no activities)',
    `const w = await import('@temporalio/worker');
     const connection = await w.NativeConnection.connect({ address: ${JSON.stringify(address)} });
     const code = (await import('node:fs')).readFileSync(BUNDLE, 'utf8');
     globalThis.keep = await w.Worker.create({ connection, taskQueue: 'ep-bench-footprint-' + process.pid, workflowBundle: { code } });`,
  ],
  [
    'workflow bundle (webpack, as Worker.create does at start)',
    `const w = await import('@temporalio/worker');
     globalThis.keep = await w.bundleWorkflowCode({ workflowsPath: ROOT + 'workflows/index.ts', logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });`,
  ],
];

/** A workflow bundle built once, for the prebuilt-bundle row. */
const bundleDir = mkdtempSync(join(tmpdir(), 'ep-bench-bundle-'));
const bundlePath = join(bundleDir, 'workflows.js');
{
  const r = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const w = await import('@temporalio/worker');
       const { code } = await w.bundleWorkflowCode({ workflowsPath: ${JSON.stringify(join(root, 'workflows/index.ts'))}, logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
       (await import('node:fs')).writeFileSync(${JSON.stringify(bundlePath)}, code);`,
    ],
    { cwd: root, encoding: 'utf8', timeout: 120_000 },
  );
  if (r.status !== 0) throw new Error(`bundling failed: ${r.stderr}`);
}
process.on('exit', () => rmSync(bundleDir, { recursive: true, force: true }));

interface Figures {
  loadS: number;
  cpuS: number;
  rss: number;
  heapUsed: number;
  external: number;
}

function runLayer(code: string, env: NodeJS.ProcessEnv = process.env): Figures {
  const script = `
    const ROOT = ${JSON.stringify(root)};
    const BUNDLE = ${JSON.stringify(bundlePath)};
    ${code}
    const loadS = Date.now() / 1000 - START;
    await new Promise((r) => setTimeout(r, 1000));
    const c = process.cpuUsage();
    const m = process.memoryUsage();
    process.stdout.write(JSON.stringify({ loadS, cpuS: (c.user + c.system) / 1e6, rss: m.rss, heapUsed: m.heapUsed, external: m.external }));
    process.exit(0);
  `;
  const start = Date.now() / 1000;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script.replaceAll('START', String(start))], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
    env,
  });
  if (r.status !== 0) throw new Error(`layer failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Figures;
}

function timedCommand(argv: string[], env: NodeJS.ProcessEnv): { secs: number; cpu: number; rssKiB: number } {
  const t0 = performance.now();
  const r = spawnSync('/usr/bin/time', ['-f', 'EPTIME %U %S %M', ...argv], { cwd: root, encoding: 'utf8', env });
  const secs = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed: ${r.stderr}`);
  const m = /EPTIME ([\d.]+) ([\d.]+) (\d+)/.exec(r.stderr)!;
  return { secs, cpu: Number(m[1]) + Number(m[2]), rssKiB: Number(m[3]) };
}

console.log(
  `footprint on node ${process.version}, ${runs} runs each, load ${loadavg()[0]!.toFixed(2)}; started ${new Date().toISOString()}`,
);
console.log('');
console.log(
  '| layer | spawn to loaded s | CPU s (incl. 1 s idle) | RSS MiB | heap used MiB | external MiB | with a warm NODE_COMPILE_CACHE: loaded s / RSS MiB |',
);
console.log('|---|---|---|---|---|---|---|');
const layerCache = mkdtempSync(join(tmpdir(), 'ep-bench-ncc-'));
process.on('exit', () => rmSync(layerCache, { recursive: true, force: true }));
for (const [label, code] of layers) {
  const xs: Figures[] = [];
  const cached: Figures[] = [];
  const cacheEnv = { ...process.env, NODE_COMPILE_CACHE: layerCache };
  try {
    runLayer(code, cacheEnv); // fill the cache
    for (let i = 0; i < runs; i++) {
      xs.push(runLayer(code));
      cached.push(runLayer(code, cacheEnv));
    }
  } catch (err) {
    console.error(`# ${label}: ${(err as Error).message.slice(0, 300)}`);
    continue;
  }
  const m = (from: Figures[], pick: (f: Figures) => number): number => median(from.map(pick));
  console.log(
    `| ${label} | ${m(xs, (f) => f.loadS).toFixed(2)} | ${m(xs, (f) => f.cpuS).toFixed(2)} | ${(m(xs, (f) => f.rss) / MiB).toFixed(0)} | ` +
      `${(m(xs, (f) => f.heapUsed) / MiB).toFixed(1)} | ${(m(xs, (f) => f.external) / MiB).toFixed(1)} | ` +
      `${m(cached, (f) => f.loadS).toFixed(2)} / ${(m(cached, (f) => f.rss) / MiB).toFixed(0)} |`,
  );
}

console.log('');
console.log('| start-up of a command | wall s (median, min-max) | CPU s | peak RSS MiB |');
console.log('|---|---|---|---|');
const cacheHome = mkdtempSync(join(tmpdir(), 'ep-bench-cache-'));
try {
  const bare: NodeJS.ProcessEnv = { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1' };
  delete bare['NODE_COMPILE_CACHE'];
  const viaBin: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: cacheHome };
  delete viaBin['NODE_COMPILE_CACHE'];
  for (const [label, argv, env] of [
    [
      '`node workers/egressctl.ts --help` (no compile cache)',
      [process.execPath, 'workers/egressctl.ts', '--help'],
      bare,
    ],
    ['`bin/egressctl --help` (compile cache warm)', ['bin/egressctl', '--help'], viaBin],
    ['`node workers/worker.ts --help` (no compile cache)', [process.execPath, 'workers/worker.ts', '--help'], bare],
    ['`bin/worker --help` (compile cache warm)', ['bin/worker', '--help'], viaBin],
  ] as const) {
    if (env === viaBin) timedCommand([...argv], env); // fill the cache
    const xs = Array.from({ length: Math.max(runs, 5) }, () => timedCommand([...argv], env));
    const secs = xs.map((x) => x.secs);
    console.log(
      `| ${label} | ${fmtRange(spread(secs), 2)} | ` +
        `${median(xs.map((x) => x.cpu)).toFixed(2)} | ${(median(xs.map((x) => x.rssKiB)) / 1024).toFixed(0)} |`,
    );
  }
} finally {
  rmSync(cacheHome, { recursive: true, force: true });
}

if (!values['skip-worker']) await workerRuns();

/** Starts the real worker on a queue of its own, runs one provider-health workflow, idles, stops. */
async function workerRuns(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ep-bench-worker-'));
  const providers = join(dir, 'providers.yaml');
  const made = spawnSync(process.execPath, ['dev/providers.ts', '--out', providers], {
    cwd: root,
    encoding: 'utf8',
  });
  if (made.status !== 0) throw new Error(`dev-providers failed: ${made.stderr}`);
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  console.log('');
  console.log(
    '| worker run (`bin/worker`) | caches | spawn to "worker running" s | spawn to first RPCs done s | RSS then MiB | RSS after idle MiB | CPU s to idle end |',
  );
  console.log('|---|---|---|---|---|---|---|');
  // The first run starts with empty caches (compile cache and workflow bundle: a first start after
  // an install or upgrade), the others find them warm.
  const cacheHome = mkdtempSync(join(tmpdir(), 'ep-bench-worker-cache-'));
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info', XDG_CACHE_HOME: cacheHome };
  delete env['NODE_COMPILE_CACHE'];
  delete env['EP_WORKFLOW_BUNDLE_CACHE'];
  try {
    for (let i = 0; i < runs; i++) {
      const taskQueue = `ep-bench-footprint-${process.pid}-${i}`;
      const t0 = performance.now();
      const child = spawn(
        join(root, 'bin/worker'),
        ['--providers', providers, '--task-queue', taskQueue, '--no-schedules'],
        { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env },
      );
      let out = '';
      child.stdout.setEncoding('utf8');
      const running = new Promise<number>((resolve, reject) => {
        child.stdout.on('data', (d: string) => {
          out += d;
          if (out.includes('worker running')) resolve(performance.now());
        });
        child.once('exit', (code) => reject(new Error(`worker exited (${code}): ${out.slice(-500)}`)));
      });
      try {
        const tRunning = (await running) - t0;
        await client.workflow.execute('providerHealthWorkflow', {
          taskQueue,
          workflowId: `ep-bench-footprint-${process.pid}-${i}`,
          workflowExecutionTimeout: '2 minutes',
        });
        const tRpc = performance.now() - t0;
        const rssThen = rssOf(child.pid!);
        await new Promise((r) => setTimeout(r, Number(values['idle-s']) * 1000));
        const rssIdle = rssOf(child.pid!);
        const cpu = cpuOf(child.pid!);
        console.log(
          `| ${i + 1} | ${i === 0 ? 'cold' : 'warm'} | ${(tRunning / 1000).toFixed(2)} | ${(tRpc / 1000).toFixed(2)} | ${(rssThen / MiB).toFixed(0)} | ` +
            `${(rssIdle / MiB).toFixed(0)} | ${cpu.toFixed(2)} |`,
        );
      } finally {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    }
  } finally {
    await connection.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(cacheHome, { recursive: true, force: true });
  }
}

function rssOf(pid: number): number {
  const r = spawnSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' });
  return Number(r.stdout.trim()) * 1024;
}
function cpuOf(pid: number): number {
  const r = spawnSync('ps', ['-o', 'cputimes=', '-p', String(pid)], { encoding: 'utf8' });
  return Number(r.stdout.trim());
}
