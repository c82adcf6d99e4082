/**
 * Boot to Healthy on the product's own path, against the library path of bench/boot.ts in the
 * same run. Each product boot is a fresh proxy created as the README's main command creates one:
 * `bin/egressctl proxy up NAME` (the lifecycle workflow started through Temporal, then its status
 * followed until Healthy) served by a real worker process (`bin/worker`) on the running dev server,
 * with the embedded default's providers entry (`node dev/providers.ts`: the test hosts, their routed
 * network, direct probes, `intervalMs` 3000, an exit-IP URL) under an entry name of the run's own,
 * its image served by the bench's loopback mirror and its target (`/` and `/ip`, as
 * dev/services.ts) on the first host's root-side address. Each phase is read from the workflow's
 * own history and the monitor's returns in it: start, domain running (the create returned),
 * address and first probe (the monitor's fold times), Healthy (the monitor's fold, the return
 * recorded, the search attributes upserted), in discovery (the visibility list that unfiltered
 * discovery reads, polled every 250 ms), egressctl's exit. Then the proxy is deleted through its
 * workflow, and the next one starts.
 *
 * Between product boots, alternating which goes first, `node bench/boot.ts --boots 1` runs the
 * library path once on the host the product boot was placed on, on the run's base there (`--base`:
 * no upload of its own; its NAT network and probes over the host's SSH, as that bench does). The table gives each phase's median (min-max), the ratio of medians, the load, the
 * whole-process wall time, CPU and peak RSS of egressctl and of bench/boot.ts, and the worker's CPU
 * per boot and peak RSS (in process: it runs all the product boots).
 *
 *   flock /tmp/ep-integration.lock bash -c 'scripts/temporal up >/dev/null && test/hosts/testhost up 2 >/dev/null && \
 *     node bench/boot-product.ts --image "$(test/e2e/image/build | tail -n1)" --boots 5'
 *
 * Every wait is bounded (--bound-s per boot); every proxy (through its workflow, then by name on
 * every host), base and marker volume, the worker, the mirror and the target are removed on every
 * path, SIGINT and SIGTERM included.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import { parse as parseYaml, stringify } from 'yaml';
import { listQuery } from '../client/store.ts';
import type { MonitorResult } from '../contracts/health.ts';
import { PROXY_DELETE_UPDATE, proxyWorkflowId } from '../contracts/proxy.ts';
import { HostLinks } from '../lib/hostlink/pool.ts';
import { deleteProxy, ensureImage, markerVolumeName } from '../lib/kvm2/index.ts';
import { spawnWorker } from '../test/support/fleet.ts';
import type { WorkerProcess } from '../test/support/fleet.ts';
import { ImageMirror } from '../test/support/mirror.ts';
import { connectClient, PROJECT_ROOT, withTimeout } from '../test/support/temporal.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { BENCH_DIR, fmtLoad, HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, ratio, spread } from './lib/stats.ts';

const USAGE =
  'node bench/boot-product.ts [--image proxy.qcow2] [--boots 5] [--bound-s 180] [--no-library] [--record FILE]';
const { values } = parseArgs({
  options: {
    image: { type: 'string' },
    boots: { type: 'string', default: '5' },
    'bound-s': { type: 'string', default: '180' },
    'no-library': { type: 'boolean', default: false },
    record: { type: 'string' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
const IMAGE = values.image ?? process.env['EP_E2E_IMAGE'];
if (IMAGE === undefined) throw new Error(`--image must name a proxy.qcow2 (with its .sha256 beside it): ${USAGE}`);
const BOOTS = Number(values.boots);
const BOUND_MS = Number(values['bound-s']) * 1000;
for (const [flag, v] of Object.entries({ boots: BOOTS, 'bound-s': BOUND_MS })) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} must be a whole number of at least 1, got ${v}`);
}

const run = Date.now().toString(36);
const ENTRY = `bp${run}`;
const TASK_QUEUE = `bench-boot-product-${run}`;
/** The owner UID of the embedded default (the providers file's default). */
const OWNER_UID = 'egress-proxies';
const VISIBILITY_POLL_MS = 250;
const say = (line: string): void => void process.stdout.write(`boot-product: ${line}\n`);
const s = (ms: number | undefined): string => (ms === undefined || Number.isNaN(ms) ? '—' : (ms / 1000).toFixed(1));

/** One product boot: ms from the workflow's start (its first event) to each phase. */
interface ProductBoot {
  kind: 'product';
  name: string;
  host?: string;
  load: number;
  /** The worker's first workflow task started. */
  firstTaskMs?: number;
  /** createProxyVm scheduled (the reads, placement and the base found before it). */
  createScheduledMs?: number;
  /** createProxyVm completed: the domain runs. */
  runningMs?: number;
  /** The first monitor activity started. */
  monitorStartedMs?: number;
  /** The poll that read the address (the monitor's fold time). */
  addressMs?: number;
  /** That return recorded in history. */
  addressRecordedMs?: number;
  /** The first probe (the fold time of the first probe outcome). */
  firstProbeMs?: number;
  /** The probe that made Healthy True (the monitor's fold). */
  healthyMs?: number;
  /** That return recorded (ActivityTaskCompleted). */
  healthyRecordedMs?: number;
  /** The workflow task after it completed (status and search attributes published). */
  healthyPublishedMs?: number;
  /** First seen Healthy in the visibility list unfiltered discovery reads. */
  discoveryMs?: number;
  /** egressctl proxy up exited 0 (its own start is about the workflow's). */
  egressctlMs?: number;
  probesFailed?: number;
  probesOk?: number;
  /** The last failed probe's error before Healthy (what a booting Squid answered). */
  lastProbeError?: string;
  /** Monitor returns until Healthy. */
  monitorReturns?: number;
  wall: number;
  cpu: number;
  maxRssKiB: number;
  workerCpuS: number;
  failed?: string;
}

/** One library boot, as bench/boot.ts records it (ms from createProxy returning, but createMs). */
interface LibraryBoot {
  kind: 'library';
  host: string;
  load: number;
  createMs: number;
  addressMs: number;
  healthyMs: number;
  monitorHealthyMs?: number;
  wall: number;
  cpu: number;
  maxRssKiB: number;
  failed?: string;
}

let client: Client | undefined;
let worker: WorkerProcess | undefined;
let mirror: ImageMirror | undefined;
let target: http.Server | undefined;
let dir: string | undefined;
const hosts: TestHost[] = loadTestHosts();
const links = new Map<string, HostLinks>();
const live = new Set<string>();
/** The run's base volume on each host (the library path boots on it too: no upload of its own). */
const basePaths = new Map<string, string>();

/** The health target of dev/services.ts: one line to `/`, the caller's address at `/ip`. */
async function startTarget(address: string): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((req, res) => {
    const from = req.socket.remoteAddress ?? '?';
    const body = req.url === '/ip' ? `${from}\n` : `hello from the boot-product target; you came from ${from}\n`;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(body)) }).end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/** Runs `argv` under GNU time (bounded): wall ms, CPU s, peak RSS KiB, exit code, stdout. */
function timedAsync(
  argv: string[],
  env: NodeJS.ProcessEnv,
  boundMs: number,
): Promise<{ wall: number; cpu: number; maxRssKiB: number; code: number | null; stdout: string; stderr: string }> {
  const t0 = performance.now();
  const child = spawn('/usr/bin/time', ['-f', 'EPTIME %U %S %M', join(BENCH_DIR, 'reap'), ...argv], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGTERM'), boundMs);
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      clearTimeout(timer);
      const m = /EPTIME ([\d.]+) ([\d.]+) (\d+)/.exec(stderr);
      resolve({
        wall: performance.now() - t0,
        cpu: m ? Number(m[1]) + Number(m[2]) : NaN,
        maxRssKiB: m ? Number(m[3]) : NaN,
        code,
        stdout,
        stderr,
      });
    });
  });
}

/** user+system CPU seconds of a process so far (/proc). */
async function cpuOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Peak RSS (VmHWM) of a process, KiB. */
async function peakRssKiB(pid: number): Promise<number> {
  const m = /VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

type HistoryEvent = NonNullable<
  Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']
>[number];

const msOf = (t: HistoryEvent['eventTime']): number => {
  if (t == null) return NaN;
  const sec = t.seconds as unknown as { toNumber?: () => number } | number | string | null | undefined;
  const n = typeof sec === 'object' && sec !== null && sec.toNumber ? sec.toNumber() : Number(sec ?? 0);
  return n * 1000 + (t.nanos ?? 0) / 1e6;
};
const payloadJson = (p: { payloads?: { data?: Uint8Array | null }[] | null } | null | undefined): unknown => {
  const data = p?.payloads?.[0]?.data;
  return data == null ? undefined : JSON.parse(Buffer.from(data).toString('utf8'));
};

/** The phases of one proxy's run, from its history (ms from its first event). */
function phasesOf(events: HistoryEvent[]): Partial<ProductBoot> {
  const t0 = msOf(events[0]?.eventTime);
  const rel = (e: HistoryEvent | undefined): number | undefined =>
    e === undefined ? undefined : msOf(e.eventTime) - t0;
  const relIso = (iso: string | undefined): number | undefined =>
    iso === undefined ? undefined : Date.parse(iso) - t0;
  const typeOf = new Map<string, string>();
  const out: Partial<ProductBoot> = {};
  out.firstTaskMs = rel(events.find((e) => e.workflowTaskStartedEventAttributes != null));
  let returns = 0;
  for (const [i, e] of events.entries()) {
    const sch = e.activityTaskScheduledEventAttributes;
    if (sch) {
      const type = sch.activityType?.name ?? '';
      typeOf.set(String(e.eventId), type);
      if (type === 'createProxyVm') out.createScheduledMs ??= rel(e);
    }
    const started = e.activityTaskStartedEventAttributes;
    if (started && typeOf.get(String(started.scheduledEventId)) === 'monitorProxy') out.monitorStartedMs ??= rel(e);
    const done = e.activityTaskCompletedEventAttributes;
    if (!done) continue;
    const type = typeOf.get(String(done.scheduledEventId));
    if (type === 'createProxyVm') out.runningMs ??= rel(e);
    if (type !== 'monitorProxy' || out.healthyMs !== undefined) continue;
    returns++;
    const r = payloadJson(done.result) as MonitorResult | undefined;
    const st = r?.state.status;
    if (st === undefined) continue;
    if (st.ip !== undefined && out.addressMs === undefined) {
      out.addressMs = relIso(st.conditions.AddressAssigned.since);
      out.addressRecordedMs = rel(e);
      // The poll that read the address probed it too: its probe is the first when it is the only one.
      if (st.health.totalOk + st.health.totalFailed === 1) out.firstProbeMs = relIso(st.health.lastProbeAt);
    }
    if (st.conditions.Healthy.status === 'True') {
      out.healthyMs = relIso(st.conditions.Healthy.since);
      out.healthyRecordedMs = rel(e);
      out.healthyPublishedMs = rel(events.slice(i + 1).find((x) => x.workflowTaskCompletedEventAttributes != null));
      out.probesFailed = st.health.totalFailed;
      out.probesOk = st.health.totalOk;
      if (st.health.lastError !== undefined) out.lastProbeError = st.health.lastError;
      out.monitorReturns = returns;
      out.host = st.host;
    }
  }
  return out;
}

/** One fresh proxy through `bin/egressctl proxy up`; deleted through its workflow afterwards. */
async function productBoot(k: number): Promise<ProductBoot> {
  const name = `p${k}`;
  const id = proxyWorkflowId(ENTRY, name);
  const load = loadavg()[0]!;
  const cpu0 = await cpuOf(worker!.child.pid!);
  live.add(name);
  let discoveryAt: number | undefined;
  let watching = true;
  const startedAt = Date.now();
  const query = `${listQuery({ state: 'Running', healthy: true, entry: ENTRY, openOnly: true })} AND WorkflowId = '${id}'`;
  const watcher = (async () => {
    while (watching && Date.now() - startedAt < BOUND_MS) {
      try {
        for await (const _ of client!.workflow.list({ query, pageSize: 1 })) {
          discoveryAt = Date.now();
          break;
        }
      } catch {
        // visibility not answering this time: the next poll
      }
      if (discoveryAt !== undefined) return;
      await sleep(VISIBILITY_POLL_MS);
    }
  })();
  try {
    const up = await timedAsync(
      [
        join(PROJECT_ROOT, 'bin/egressctl'),
        'proxy',
        'up',
        name,
        '--entry',
        ENTRY,
        '--image',
        'proxy',
        '--providers',
        providersFile,
        '--wait-ms',
        String(BOUND_MS),
        '--output',
        'json',
      ],
      { ...process.env, TEMPORAL_TASK_QUEUE: TASK_QUEUE },
      BOUND_MS + 10_000,
    );
    const exitedAt = Date.now();
    await withTimeout(watcher, BOUND_MS, 'the discovery watch');
    const handle = client!.workflow.getHandle(id);
    const history = await withTimeout(handle.fetchHistory(), 30_000, `the history of ${id}`);
    const events = history.events ?? [];
    const wfStart = msOf(events[0]?.eventTime);
    const phases = phasesOf(events);
    const boot: ProductBoot = {
      kind: 'product',
      name,
      load,
      ...phases,
      wall: up.wall,
      cpu: up.cpu,
      maxRssKiB: up.maxRssKiB,
      workerCpuS: (await cpuOf(worker!.child.pid!)) - cpu0,
      egressctlMs: exitedAt - wfStart,
      discoveryMs: discoveryAt === undefined ? undefined : discoveryAt - wfStart,
    };
    if (up.code !== 0)
      boot.failed = `egressctl proxy up exited ${up.code}: ${up.stderr.trim().split('\n').slice(-3).join(' | ')}`;
    else if (phases.healthyMs === undefined) boot.failed = 'no Healthy return in the history';
    return boot;
  } finally {
    watching = false;
    await watcher.catch(() => undefined);
    await deleteThroughWorkflow(name);
  }
}

/** The delete update and the run's end, bounded; the proxy stays in `live` (cleaned by name) if it fails. */
async function deleteThroughWorkflow(name: string): Promise<void> {
  const h = client!.workflow.getHandle(proxyWorkflowId(ENTRY, name));
  try {
    const d = await withTimeout(h.describe(), 15_000, `describe ${name}`);
    if (d.status.name === 'RUNNING') {
      await withTimeout(
        h.executeUpdate(PROXY_DELETE_UPDATE).then(() => h.result()),
        120_000,
        `the delete of ${name}`,
      );
    }
    live.delete(name);
  } catch (err) {
    say(`cleanup: delete ${name} through its workflow: ${String(err)}`);
    await h.terminate('bench cleanup').catch(() => undefined);
  }
}

/** One library boot: `node bench/boot.ts --boots 1` on `host`, its record read back. */
async function libraryBoot(host: string, k: number): Promise<LibraryBoot> {
  const record = join(dir!, `library-${k}.jsonl`);
  const load = loadavg()[0]!;
  const r = await timedAsync(
    [
      process.execPath,
      join(BENCH_DIR, 'boot.ts'),
      '--image',
      IMAGE!,
      '--boots',
      '1',
      '--host',
      host,
      '--bound-s',
      String(BOUND_MS / 1000),
      '--record',
      record,
      '--base',
      basePaths.get(host)!,
    ],
    process.env,
    BOUND_MS + 120_000,
  );
  const text = await readFile(record, 'utf8').catch(() => '');
  const rec = text.trim() === '' ? undefined : (JSON.parse(text.trim().split('\n').at(-1)!) as Partial<LibraryBoot>);
  const failed =
    r.code !== 0
      ? `bench/boot.ts exited ${r.code}: ${r.stderr.split('\n').find((l) => /Error/.test(l)) ?? r.stderr.trim().split('\n').slice(-3).join(' | ')}`
      : (rec?.failed ?? (rec === undefined ? 'no record' : undefined));
  return {
    kind: 'library',
    host,
    load,
    createMs: rec?.createMs ?? NaN,
    addressMs: rec?.addressMs ?? NaN,
    healthyMs: rec?.healthyMs ?? NaN,
    monitorHealthyMs: rec?.monitorHealthyMs,
    wall: r.wall,
    cpu: r.cpu,
    maxRssKiB: r.maxRssKiB,
    ...(failed === undefined ? {} : { failed }),
  };
}

let providersFile = '';

/** The embedded default (dev/providers.ts) under the run's entry name, its image at the mirror's URL. */
async function writeProviders(imageUrl: string, sha256: string, targetHostPort: string): Promise<void> {
  const out = join(dir!, 'embedded-default.yaml');
  const r = await timedAsync(
    [process.execPath, join(PROJECT_ROOT, 'dev/providers.ts'), '--out', out, '--target', targetHostPort],
    process.env,
    60_000,
  );
  if (r.code !== 0) throw new Error(`dev/providers.ts failed: ${r.stderr}`);
  const doc = parseYaml(await readFile(out, 'utf8')) as { providers: Record<string, unknown>[] };
  const entry = doc.providers[0]!;
  entry['name'] = ENTRY;
  entry['images'] = { proxy: { url: imageUrl, sha256, format: 'qcow2' } };
  providersFile = join(dir!, 'providers.yaml');
  await writeFile(providersFile, stringify(doc));
  say(
    `providers: the embedded default as entry ${ENTRY}: ${JSON.stringify({ health: entry['health'], network: entry['network'] })}`,
  );
}

async function cleanUp(): Promise<void> {
  for (const name of [...live]) await deleteThroughWorkflow(name);
  await worker?.stop().catch((err: unknown) => say(`cleanup: worker: ${String(err)}`));
  for (const h of hosts) {
    const l = links.get(h.name);
    if (!l) continue;
    for (const name of [...live]) {
      await deleteProxy({ links: l, ownerUid: OWNER_UID, entry: ENTRY, name, pool: h.pool, shutdownGraceMs: 0 }).catch(
        (err: unknown) => say(`cleanup: deleteProxy ${name} on ${h.name}: ${String(err)}`),
      );
    }
    const names = [`base-${ENTRY}-proxy.qcow2`, markerVolumeName(ENTRY, 'proxy', 'qcow2')];
    await l
      .call(async (c, call) => {
        const pool = await c.storagePoolLookupByName(h.pool, call);
        for (const vol of await c.storagePoolListAllVolumes(pool, call)) {
          if (names.includes(vol.name)) await c.storageVolDelete(vol, 0, call);
        }
      })
      .catch((err: unknown) => say(`cleanup: base volumes on ${h.name}: ${String(err)}`));
    l.close();
  }
  links.clear();
  await client?.connection.close().catch(() => undefined);
  await new Promise<void>((resolve) => (target ? target.close(() => resolve()) : resolve()));
  await mirror?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}

async function main(): Promise<void> {
  if (hosts.length === 0) throw new Error('no test hosts: test/hosts/testhost up 2');
  dir = await mkdtemp(join(tmpdir(), 'boot-product-'));
  const bytes = await readFile(IMAGE!);
  const sha256 = (await readFile(`${IMAGE}.sha256`, 'utf8')).split(/\s+/)[0]!;
  mirror = await ImageMirror.start();
  const url = mirror.serve('/images/proxy.qcow2', bytes);
  const t = await startTarget(hosts[0]!.rootSideAddress);
  target = t.server;
  await writeProviders(url, sha256, `${hosts[0]!.rootSideAddress}:${t.port}`);
  // The base on every host first, as a proxy finds it after the first one fetched it.
  for (const h of hosts) {
    const l = new HostLinks(hostTarget(h), { defaultTimeoutMs: 30_000 });
    links.set(h.name, l);
    const base = await ensureImage({
      entry: ENTRY,
      pool: h.pool,
      image: { key: 'proxy', url, sha256, format: 'qcow2' },
      links: l,
      timeouts: { rpcMs: 30_000, downloadHeadersMs: 10_000, downloadBodyIdleMs: 60_000, downloadTotalMs: 600_000 },
    });
    basePaths.set(h.name, base.path);
  }
  say(`image ${IMAGE} (${(bytes.length / 2 ** 20).toFixed(0)} MiB) on ${hosts.map((h) => h.name).join(', ')}`);
  client = await connectClient();
  worker = await spawnWorker(providersFile, TASK_QUEUE, 120_000);
  say(`worker pid ${worker.child.pid} on task queue ${TASK_QUEUE}`);
  const boots: (ProductBoot | LibraryBoot)[] = [];
  let lastHost = hosts[0]!.name;
  for (let k = 0; k < BOOTS; k++) {
    const order: ('product' | 'library')[] = values['no-library']
      ? ['product']
      : k % 2 === 0
        ? ['product', 'library']
        : ['library', 'product'];
    for (const kind of order) {
      const b = kind === 'product' ? await productBoot(k) : await libraryBoot(lastHost, k);
      if (b.kind === 'product' && b.host !== undefined) lastHost = b.host;
      boots.push(b);
      if (values.record)
        await writeFile(values.record, `${JSON.stringify({ ...b, at: new Date().toISOString() })}\n`, { flag: 'a' });
      say(line(b, k));
    }
  }
  const workerPeak = await peakRssKiB(worker.child.pid!);
  printTable(boots, workerPeak);
}

function line(b: ProductBoot | LibraryBoot, k: number): string {
  const head = `${b.kind} ${k + 1}/${BOOTS} (load ${b.load.toFixed(2)}, on ${b.host ?? '?'})${b.failed ? ` FAILED: ${b.failed}` : ''}`;
  if (b.kind === 'library') {
    return `${head}: define+start ${s(b.createMs)} s, → address ${s(b.addressMs)} s, → 200 ${s(b.healthyMs)} s, → Healthy ${s(b.monitorHealthyMs)} s (from the domain's start); whole ${s(b.wall)} s, ${b.cpu.toFixed(2)} CPU-s, ${(b.maxRssKiB / 1024).toFixed(0)} MiB`;
  }
  return (
    `${head}: from the workflow's start: task ${s(b.firstTaskMs)}, create ${s(b.createScheduledMs)}, running ${s(b.runningMs)}, ` +
    `monitor ${s(b.monitorStartedMs)}, address ${s(b.addressMs)} (recorded ${s(b.addressRecordedMs)}), first probe ${s(b.firstProbeMs)}, ` +
    `Healthy ${s(b.healthyMs)} (recorded ${s(b.healthyRecordedMs)}, published ${s(b.healthyPublishedMs)}), discovery ${s(b.discoveryMs)}, ` +
    `egressctl ${s(b.egressctlMs)} s; probes ${b.probesFailed ?? '?'} failed, ${b.probesOk ?? '?'} ok, ${b.monitorReturns ?? '?'} monitor returns (the last failed probe: ${b.lastProbeError ?? 'none'}); ` +
    `egressctl ${b.cpu.toFixed(2)} CPU-s ${(b.maxRssKiB / 1024).toFixed(0)} MiB; worker ${b.workerCpuS.toFixed(2)} CPU-s`
  );
}

function printTable(boots: readonly (ProductBoot | LibraryBoot)[], workerPeakKiB: number): void {
  const product = boots.filter((b): b is ProductBoot => b.kind === 'product' && !b.failed);
  const library = boots.filter((b): b is LibraryBoot => b.kind === 'library' && !b.failed);
  const cell = (xs: (number | undefined)[], div = 1000, digits = 1): string => {
    const sp = spread(xs.map((x) => (x === undefined || Number.isNaN(x) ? undefined : x / div)));
    return Number.isNaN(sp.med) ? '—' : fmtRange(sp, digits);
  };
  const med = (xs: (number | undefined)[]): number => spread(xs.map((x) => (x === undefined ? undefined : x))).med;
  const fromRunning = (f: (b: ProductBoot) => number | undefined) => (b: ProductBoot) => {
    const v = f(b);
    return v === undefined || b.runningMs === undefined ? undefined : v - b.runningMs;
  };
  const w = (s2: string) => process.stdout.write(`${s2}\n`);
  w(
    `\nseconds, median (min-max); product: ${product.length} of ${boots.filter((b) => b.kind === 'product').length} boots, library: ${library.length} of ${boots.filter((b) => b.kind === 'library').length}; 1-minute load ${cell(
      boots.map((b) => b.load),
      1,
      2,
    )}, now ${fmtLoad(loadavg())}`,
  );
  w('\n| product path (the workflow; from its start) | s |\n|---|---|');
  const rows: [string, (b: ProductBoot) => number | undefined][] = [
    ['first workflow task', (b) => b.firstTaskMs],
    ['createProxyVm scheduled (reads, placement, base found)', (b) => b.createScheduledMs],
    ['domain running (createProxyVm returned)', (b) => b.runningMs],
    ['monitor started', (b) => b.monitorStartedMs],
    ['address read', (b) => b.addressMs],
    ['first probe', (b) => b.firstProbeMs],
    ["Healthy (the monitor's fold)", (b) => b.healthyMs],
    ['Healthy recorded (monitor return)', (b) => b.healthyRecordedMs],
    ['Healthy published (workflow task)', (b) => b.healthyPublishedMs],
    ['in discovery (visibility, 250 ms polls)', (b) => b.discoveryMs],
    ['egressctl proxy up exits', (b) => b.egressctlMs],
    ['domain running → address', fromRunning((b) => b.addressMs)],
    ['domain running → Healthy', fromRunning((b) => b.healthyMs)],
  ];
  for (const [what, f] of rows) w(`| ${what} | ${cell(product.map(f))} |`);
  w(
    `| probes failed before Healthy | ${cell(
      product.map((b) => b.probesFailed),
      1,
      0,
    )} |`,
  );
  w(
    `| monitor returns until Healthy | ${cell(
      product.map((b) => b.monitorReturns),
      1,
      0,
    )} |`,
  );
  w("\n| library path (bench/boot.ts; from the domain's start) | s |\n|---|---|");
  w(`| define + start (createProxy) | ${cell(library.map((b) => b.createMs))} |`);
  w(`| start → address (250 ms polls) | ${cell(library.map((b) => b.addressMs))} |`);
  w(`| start → CONNECT 200 (250 ms probes) | ${cell(library.map((b) => b.healthyMs))} |`);
  w(`| start → Healthy (the monitor's loop) | ${cell(library.map((b) => b.monitorHealthyMs))} |`);
  w(
    `| define + start → Healthy | ${cell(library.map((b) => (b.monitorHealthyMs === undefined ? undefined : b.createMs + b.monitorHealthyMs)))} |`,
  );
  w('\n| whole process | wall s | CPU s | peak RSS MiB |\n|---|---|---|---|');
  w(
    `| bin/egressctl proxy up | ${cell(product.map((b) => b.wall))} | ${cell(
      product.map((b) => b.cpu),
      1,
      2,
    )} | ${cell(
      product.map((b) => b.maxRssKiB),
      1024,
      0,
    )} |`,
  );
  w(
    `| node bench/boot.ts --boots 1 --base (no upload) | ${cell(library.map((b) => b.wall))} | ${cell(
      library.map((b) => b.cpu),
      1,
      2,
    )} | ${cell(
      library.map((b) => b.maxRssKiB),
      1024,
      0,
    )} |`,
  );
  w(
    `| bin/worker (in process: all product boots) | — | ${cell(
      product.map((b) => b.workerCpuS),
      1,
      2,
    )} per boot | ${(workerPeakKiB / 1024).toFixed(0)} (peak) |`,
  );
  if (library.length > 0 && product.length > 0) {
    const pWhole = med(product.map((b) => b.healthyMs));
    const pRun = med(product.map(fromRunning((b) => b.healthyMs)));
    const lMon = med(library.map((b) => b.monitorHealthyMs));
    const lWhole = med(
      library.map((b) => (b.monitorHealthyMs === undefined ? undefined : b.createMs + b.monitorHealthyMs)),
    );
    const pAddr = med(product.map(fromRunning((b) => b.addressMs)));
    const lAddr = med(library.map((b) => b.addressMs));
    w('\nratios of medians, product / library');
    w(
      `  start → Healthy (workflow start / define+start): ${ratio(pWhole, lWhole).toFixed(2)} (${s(pWhole)} / ${s(lWhole)} s)`,
    );
    w(`  domain running → Healthy: ${ratio(pRun, lMon).toFixed(2)} (${s(pRun)} / ${s(lMon)} s)`);
    w(`  domain running → address: ${ratio(pAddr, lAddr).toFixed(2)} (${s(pAddr)} / ${s(lAddr)} s)`);
  }
  const worst = Math.max(...product.map((b) => b.healthyMs ?? NaN));
  const pMed = med(product.map((b) => b.healthyMs));
  w(
    `\ngoal: workflow start → Healthy ≤ 20 s median (${s(pMed)}: ${pMed <= 20_000 ? 'met' : 'NOT met'}), ≤ 25 s worst (${s(worst)}: ${worst <= 25_000 ? 'met' : 'NOT met'})`,
  );
}

const stop = (sig: string): void => {
  say(`${sig}: cleaning up`);
  void cleanUp().finally(() => process.exit(130));
};
process.once('SIGINT', () => stop('SIGINT'));
process.once('SIGTERM', () => stop('SIGTERM'));
try {
  await main();
} finally {
  await cleanUp();
}
