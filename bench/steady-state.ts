/**
 * Steady-state benchmark: what N healthy proxies cost while nothing happens, under the older
 * health loop (`poll`: two activities and a timer per interval) and the health monitor
 * (`monitor`, docs/health.md), side by side in one run, alternating, on a Temporal dev server of
 * its own (so its CPU and RSS are the proxies' alone) and, with `--temporal dev,cluster`, on
 * `scripts/temporal cluster` too (the Temporal server on PostgreSQL, mTLS; started if down; its
 * server CPU and RSS are the Temporal server's plus PostgreSQL's processes', and it reports the rows
 * PostgreSQL wrote and its WAL per second in the window: bench/lib/pg-writes.ts).
 *
 * The hosts and guests are SIMULATED: an in-process host double (bench/lib/host-double.ts)
 * answers every read and probe as a healthy host would. The monitor activity itself is the real
 * one. What is measured is the control plane: history events and state transitions per healthy
 * proxy-hour (from `describe`, between two samples after every proxy is Healthy), server and
 * worker CPU-seconds per minute in that window, their RSS at its end (the worker is this process).
 * The hourly checkpoint of the monitor (continue-as-new) falls outside a short window: its cost is
 * measured once on a proxy that checkpoints after 3 polls and added to the monitor's rate.
 *
 * The worker's memory growth over a phase is split (bench/lib/memory.ts) into the main thread's
 * heap (the activities: every monitor), the workflow thread's heap (the cached workflows) and
 * native memory (the SDK's core, V8's code, malloc).
 *
 *   node bench/steady-state.ts [--n 100] [--window-s 60] [--interval-ms 15000] [--runs 2] [--loops poll,monitor]
 *                              [--max-cached-workflows N|all] [--port 7391] [--temporal dev,cluster]
 *                              [--heartbeat-throttle-ms MS|sdk]
 *
 * Freshness: after the window, for two intervals, every second, the fresh status (client/health.ts
 * freshProxyStatus: the status query with the monitor's last heartbeat as the server holds it, what
 * the API and the Web UI show) of the phase's first 10 proxies; "last probe age" is now less its
 * `lastProbeAt` (bench/lib/freshness.ts).
 * --heartbeat-throttle-ms: the worker's cap on the SDK's heartbeat throttle; default the worker's
 * (runtime/worker-set.ts HEARTBEAT_THROTTLE_MS), `sdk` the SDK's own (60 s, and 0.8 x the timeout).
 *
 * --max-cached-workflows: the bench worker's workflow cache; default the worker's
 * (runtime/workflow-cache.ts, DEFAULT_MAX_CACHED_WORKFLOWS), `all` every proxy of a phase (as the
 * SDK's own default, sized from the heap, does up to about 2,400 workflows).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Client, Connection, WorkflowHandle } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { proxyStatusQuery } from '../contracts/messages.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import { SA_PROXY_HEALTHY } from '../contracts/search-attributes.ts';
import type { ProxyWorkflowInput } from '../contracts/proxy-run.ts';
import { benchWorker, cpuSeconds, installQuietRuntime, rssMiB, startDevServer } from './lib/dev-server.ts';
import { workflowCacheOptions } from '../runtime/workflow-cache.ts';
import { HEARTBEAT_THROTTLE_MS } from '../runtime/worker-set.ts';
import { hostDouble } from './lib/host-double.ts';
import { hostMonitorWorkflowId } from '../contracts/host-monitor.ts';
import type { HealthMonitor } from '../contracts/proxy.ts';
import { clusterUp } from '../test/support/temporal-cluster.ts';
import { PROJECT_ROOT } from '../test/support/temporal.ts';
import { probeAges } from './lib/freshness.ts';
import { historySample } from './lib/history-sample.ts';
import { pgWrites } from './lib/pg-writes.ts';
import type { PgWrites } from './lib/pg-writes.ts';
import { memorySample, perItemKiB } from './lib/memory.ts';
import { HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, median, spread } from './lib/stats.ts';

const USAGE = `node bench/steady-state.ts [options]   (hosts and guests simulated in-process)

  --n N                        proxies per phase (default 100)
  --window-s S                 the measured window after every proxy is Healthy (default 60)
  --interval-ms MS             providers[].health.intervalMs (default 15000)
  --runs R                     rounds; each runs every loop once, the order alternating (default 2)
  --loops L                    poll,monitor (default), host, or any of them: poll (two activities and a
                               timer per interval), monitor (one monitor activity per proxy), host (one
                               host monitor per simulated host: providers[].health.monitor host)
  --hosts K                    simulated hosts the proxies spread over (default ceil(N / 100))
  --port P                     the bench's own Temporal dev server (default 7391)
  --max-cached-workflows N|all the bench worker's workflow cache (default the worker's, 250)
  --temporal dev,cluster       the planes to run on: dev (default), cluster (scripts/temporal cluster), or both
  --heartbeat-throttle-ms MS|sdk
                               the cap on the SDK's heartbeat throttle (default the worker's, 1000; sdk: none)`;

const { values } = parseArgs({
  options: {
    ...HELP_OPTION,
    n: { type: 'string', default: '100' },
    'window-s': { type: 'string', default: '60' },
    'interval-ms': { type: 'string', default: '15000' },
    runs: { type: 'string', default: '2' },
    loops: { type: 'string', default: 'poll,monitor' },
    hosts: { type: 'string' },
    port: { type: 'string', default: '7391' },
    'max-cached-workflows': { type: 'string' },
    temporal: { type: 'string', default: 'dev' },
    'heartbeat-throttle-ms': { type: 'string' },
  },
});
printUsageIfAsked(values, USAGE);
const THROTTLE_RAW = values['heartbeat-throttle-ms'];
const THROTTLE: number | 'sdk' | undefined =
  THROTTLE_RAW === undefined || THROTTLE_RAW === 'sdk' ? THROTTLE_RAW : Number(THROTTLE_RAW);
if (typeof THROTTLE === 'number' && !(Number.isInteger(THROTTLE) && THROTTLE > 0)) {
  throw new Error(`--heartbeat-throttle-ms: a whole number of ms above 0, or sdk; got ${THROTTLE_RAW}`);
}
type Plane = 'dev' | 'cluster';
const PLANES = values.temporal.split(',') as Plane[];
for (const p of PLANES as string[]) {
  if (p !== 'dev' && p !== 'cluster') throw new Error(`--temporal: dev or cluster, got ${p}`);
}
const N = Number(values.n);
const WINDOW_MS = Number(values['window-s']) * 1000;
const INTERVAL_MS = Number(values['interval-ms']);
const RUNS = Number(values.runs);
type Loop = 'poll' | 'monitor' | 'host';
const LOOPS = values.loops.split(',') as Loop[];
for (const l of LOOPS as string[]) {
  if (l !== 'poll' && l !== 'monitor' && l !== 'host') throw new Error(`--loops: poll, monitor or host, got ${l}`);
}
const HOSTS = values.hosts === undefined ? Math.max(1, Math.ceil(Number(values.n) / 100)) : Number(values.hosts);
if (!(Number.isInteger(HOSTS) && HOSTS > 0)) throw new Error(`--hosts: a whole number above 0, got ${values.hosts}`);
const HOST_MONITORS = Array.from({ length: HOSTS }, (_, i) => hostMonitorWorkflowId('bench', `sim-${i + 1}`)); // ENTRY
/** Who monitors the proxies the double resolves next (switched per phase). */
let monitorMode: HealthMonitor = 'proxy';
const PORT = Number(values.port);
const CACHE = values['max-cached-workflows'];
/** The SDK's default workflow tasks at once (the worker's --max-workflow-tasks is 40 too). */
const WORKFLOW_TASKS = 40;
/** `--max-cached-workflows all`: every proxy of a phase cached, as the SDK's heap-sized default does up to about 2,400. */
const ALL = Math.max(1000, 2 * N + 50);
const ENTRY = 'bench';
/** Of this run only: the cluster's namespace outlives runs and holds other tests' workflows. */
const RUN_ID = Date.now().toString(36);
const TQ = `steady-state-${RUN_ID}`;

/**
 * Waits until every proxy of the phase is Healthy, counted through visibility (the ProxyHealthy
 * search attribute; earlier phases' proxies are terminated): N status queries a second would each
 * replay a workflow the cache no longer holds. On time out, the states of those not Healthy.
 */
async function allHealthy(client: Client, hs: WorkflowHandle[], what: string): Promise<void> {
  // Starting N proxies takes their creation activities and workflow tasks first: up to 1 s each more on a loaded machine.
  const deadline = Date.now() + 10 * INTERVAL_MS + 120_000 + 1_000 * hs.length;
  const query = `WorkflowType = '${PROXY_WORKFLOW_TYPE}' AND TaskQueue = '${TQ}' AND ExecutionStatus = 'Running' AND ${SA_PROXY_HEALTHY} = true`;
  for (;;) {
    // A loaded dev server sometimes fails a count (even as "namespace not found"): try again.
    const count = await client.workflow.count(query).then(
      (c) => c.count,
      () => 0,
    );
    if (count >= hs.length) return;
    if (Date.now() > deadline) {
      const st = await Promise.all(hs.map((h) => h.query(proxyStatusQuery).catch(() => undefined)));
      const seen: Record<string, number> = {};
      for (const s of st) {
        if (s?.conditions.Healthy.status === 'True') continue;
        const k = s === undefined ? 'no answer' : `${s.state}${s.reason ? ` (${s.reason})` : ''}`;
        seen[k] = (seen[k] ?? 0) + 1;
      }
      throw new Error(
        `${hs.length - count} of ${hs.length} proxies (${what}) not Healthy in time: ${JSON.stringify(seen)}`,
      );
    }
    await sleep(2_000);
  }
}

interface Row {
  loop: string;
  eventsPerHour: number;
  transitionsPerHour: number;
  serverCpuPerMin: number;
  workerCpuPerMin: number;
  serverRss: number;
  workerRss: number;
  workerRssPerProxyKiB: number;
  /** The growth split (bench/lib/memory.ts): main-thread heap, workflow-thread heap, native. */
  mainHeapPerProxyKiB: number;
  threadHeapPerProxyKiB: number;
  nativePerProxyKiB: number;
  /** Ages (s) of the last probe in the fresh status, sampled through the window: median and oldest. */
  probeAgeMedianS: number;
  probeAgeMaxS: number;
  /** The cluster's PostgreSQL in the window (bench/lib/pg-writes.ts): rows written and WAL KiB per second; absent on the dev server. */
  pgRowsPerS?: number;
  pgWalKiBPerS?: number;
}

/** How many proxies' fresh statuses are sampled after the window (bench/lib/freshness.ts), for two intervals. */
const FRESH_SAMPLED = 10;

/** CPU-seconds and resident memory (MiB) of a control plane's processes, summed. */
type PlaneUsage = () => { cpu: number; rss: number };
/** The plane's database writes, where it has a database to ask (the cluster's PostgreSQL). */
type PlaneWrites = (() => Promise<PgWrites>) | undefined;

/** Proportional set size of `pid` in MiB: shared pages split among the processes sharing them. */
function pssMiB(pid: number): number {
  const m = /^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

/**
 * The Temporal server of `scripts/temporal cluster` and PostgreSQL's postmaster with its children;
 * memory as PSS, so PostgreSQL's shared buffers count once, not once per backend.
 */
function clusterUsage(): { cpu: number; rss: number } {
  const dir = join(PROJECT_ROOT, '.data/temporal-cluster');
  const pids = [Number(readFileSync(join(dir, 'server.pid'), 'utf8').trim())];
  const postmaster = Number(readFileSync(join(dir, 'pg/postmaster.pid'), 'utf8').split('\n')[0]);
  pids.push(postmaster);
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      if (ppid === postmaster) pids.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  let cpu = 0;
  let rss = 0;
  for (const pid of pids) {
    try {
      cpu += cpuSeconds(pid);
      rss += pssMiB(pid);
    } catch {
      // a backend that ended meanwhile
    }
  }
  return { cpu, rss };
}

async function phase(
  client: Client,
  usage: PlaneUsage,
  writes: PlaneWrites,
  label: string,
  loop: Loop,
  run: number,
): Promise<Row> {
  monitorMode = loop === 'host' ? 'host' : 'proxy';
  const m0 = memorySample();
  const hs: WorkflowHandle[] = [];
  for (let i = 0; i < N; i += 50) {
    const batch = Array.from({ length: Math.min(50, N - i) }, (_, k) => {
      const input: ProxyWorkflowInput = {
        name: `ss-${RUN_ID}-${label.replace('/', '-')}-${run}-${i + k}`,
        entry: ENTRY,
        imageKey: 'img',
        healthLoop: loop === 'poll' ? 'poll' : 'monitor',
      };
      return client.workflow.start(PROXY_WORKFLOW_TYPE, {
        taskQueue: TQ,
        workflowId: proxyWorkflowId(ENTRY, input.name),
        args: [input],
      });
    });
    hs.push(...(await Promise.all(batch)));
  }
  await allHealthy(client, hs, label);
  await sleep(2_000);
  // The host monitors' own histories count too (their watches' signals, their checkpoints).
  const sampled = loop === 'host' ? [...hs, ...HOST_MONITORS.map((id) => client.workflow.getHandle(id))] : hs;
  const s0 = await historySample(sampled);
  const w0 = await writes?.();
  const c0 = { server: usage().cpu, worker: process.cpuUsage() };
  const t0 = performance.now();
  await sleep(WINDOW_MS);
  const c1 = { server: usage().cpu, worker: process.cpuUsage(c0.worker) };
  const seconds = (performance.now() - t0) / 1000;
  const w1 = await writes?.();
  const m1 = memorySample();
  const grown = perItemKiB(m0, m1, N);
  const s1 = await historySample(sampled);
  const ages = await probeAges(hs.slice(0, FRESH_SAMPLED), 2 * INTERVAL_MS);
  const hours = WINDOW_MS / 3_600_000;
  const min = WINDOW_MS / 60_000;
  const row: Row = {
    loop: label,
    eventsPerHour: (s1.events - s0.events) / N / hours,
    transitionsPerHour: (s1.transitions - s0.transitions) / N / hours,
    serverCpuPerMin: (c1.server - c0.server) / min,
    workerCpuPerMin: (c1.worker.user + c1.worker.system) / 1e6 / min,
    serverRss: usage().rss,
    workerRss: m1.rssMiB,
    workerRssPerProxyKiB: grown.rssMiB,
    mainHeapPerProxyKiB: grown.mainHeapMiB,
    threadHeapPerProxyKiB: grown.threadHeapMiB,
    nativePerProxyKiB: grown.nativeMiB,
    probeAgeMedianS: median(ages),
    probeAgeMaxS: Math.max(...ages),
  };
  if (w0 && w1) {
    row.pgRowsPerS = (w1.rows - w0.rows) / seconds;
    row.pgWalKiBPerS = (w1.walBytes - w0.walBytes) / 1024 / seconds;
  }
  for (let i = 0; i < hs.length; i += 50) {
    await Promise.all(hs.slice(i, i + 50).map((h) => h.terminate('bench phase over').catch(() => undefined)));
  }
  if (loop === 'host') {
    const monitors = HOST_MONITORS.map((id) => client.workflow.getHandle(id));
    await Promise.all(monitors.map((h) => h.terminate('bench phase over').catch(() => undefined)));
  }
  await sleep(3_000);
  return row;
}

/**
 * Events of one monitor checkpoint: the old run's tail after its last monitor was scheduled (its
 * watch recorded, with the host monitor), and the new run up to its monitor (or watch); with the
 * host monitor also what the new run's watch added to the host monitor's history.
 */
async function checkpointEvents(client: Client, loop: 'monitor' | 'host'): Promise<number> {
  monitorMode = loop === 'host' ? 'host' : 'proxy';
  const input: ProxyWorkflowInput = {
    name: `ss-${RUN_ID}-checkpoint-${loop}`,
    entry: ENTRY,
    imageKey: 'img',
    healthLoop: 'monitor',
    continueAsNewAfterPolls: 3,
  };
  const h = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
    taskQueue: TQ,
    workflowId: proxyWorkflowId(ENTRY, input.name),
    args: [input],
  });
  const first = h.firstExecutionRunId;
  const deadline = Date.now() + 6 * INTERVAL_MS + 60_000;
  const cur = client.workflow.getHandle(h.workflowId);
  // The host monitor of the host it lands on.
  const placed = await sleepUntil(async () => (await h.query(proxyStatusQuery).catch(() => undefined))?.host, 60_000);
  const hostMonitor = client.workflow.getHandle(hostMonitorWorkflowId(ENTRY, placed));
  let monitorBefore = 0;
  for (;;) {
    const d = await cur.describe();
    if (d.runId !== first) break;
    if (loop === 'host')
      monitorBefore = await hostMonitor.describe().then(
        (m) => m.historyLength,
        () => 0,
      );
    if (Date.now() > deadline) {
      const d = await cur.describe();
      const pending = (d.raw.pendingActivities ?? []).map(
        (a) => `${a.activityType?.name} attempt ${a.attempt}: ${a.lastFailure?.message ?? 'no failure'}`,
      );
      const history = (await cur.fetchHistory()).events ?? [];
      const failed = history.findLast((e) => e.workflowTaskFailedEventAttributes != null);
      const events = history.slice(-6).map((e) => String(e.eventType));
      if (failed) events.push(`workflow task failed: ${failed.workflowTaskFailedEventAttributes?.failure?.message}`);
      throw new Error(
        `the checkpoint proxy did not continue as new in time: ${d.status.name}, pending [${pending.join('; ')}], last events ${events.join(', ')}`,
      );
    }
    await sleep(500);
  }
  await sleep(2_000);
  const old = (await client.workflow.getHandle(h.workflowId, first).fetchHistory()).events ?? [];
  const lastScheduled = old.findLastIndex((e) =>
    loop === 'host' ? e.markerRecordedEventAttributes != null : e.activityTaskScheduledEventAttributes != null,
  );
  const tail = old.length - lastScheduled - 1;
  const fresh = (await cur.describe()).historyLength;
  const monitorAdded = loop === 'host' ? (await hostMonitor.describe()).historyLength - monitorBefore : 0;
  await cur.terminate('bench over').catch(() => undefined);
  if (loop === 'host') await hostMonitor.terminate('bench over').catch(() => undefined);
  return tail + fresh + monitorAdded;
}

async function main(): Promise<void> {
  console.log(
    `steady-state: N=${N} proxies per loop, interval ${INTERVAL_MS} ms, window ${WINDOW_MS / 1000} s, ${RUNS} alternating runs\n` +
      `heartbeat throttle cap ${THROTTLE === 'sdk' ? "the SDK's own (60 s; 0.8 x the heartbeat timeout below it)" : `${THROTTLE ?? HEARTBEAT_THROTTLE_MS} ms`}; ` +
      `workflow cache (maxCachedWorkflows) ${CACHE === 'all' ? `${ALL} (every proxy)` : workflowCacheOptions(CACHE, WORKFLOW_TASKS).maxCachedWorkflows}; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}\n` +
      'HOSTS AND GUESTS ARE SIMULATED (an in-process host double answers reads and probes); the dev server is one of its own (SQLite); the cluster is scripts/temporal cluster (PostgreSQL)',
  );
  installQuietRuntime();
  const caps = {
    activities: Math.max(200, 2 * N + 50),
    workflows:
      CACHE === 'all'
        ? { maxCachedWorkflows: ALL, maxConcurrentWorkflowTaskExecutions: WORKFLOW_TASKS }
        : workflowCacheOptions(CACHE, WORKFLOW_TASKS),
  };
  const planes: {
    plane: Plane;
    client: Client;
    connection: Connection;
    worker: Worker;
    usage: PlaneUsage;
    writes: PlaneWrites;
  }[] = [];
  let server: Awaited<ReturnType<typeof startDevServer>> | undefined;
  for (const plane of PLANES) {
    let usage: PlaneUsage;
    let writes: PlaneWrites;
    let target: Parameters<typeof benchWorker>[0];
    if (plane === 'dev') {
      server = await startDevServer(PORT, 'steady-state');
      const pid = server.pid;
      usage = () => ({ cpu: cpuSeconds(pid), rss: rssMiB(pid) });
      target = PORT;
    } else {
      target = await clusterUp();
      usage = clusterUsage;
      writes = pgWrites;
    }
    const w = await benchWorker(
      target,
      TQ,
      (client) => hostDouble(ENTRY, INTERVAL_MS, { hosts: HOSTS, client, taskQueue: TQ, monitor: () => monitorMode }),
      {
        ...caps,
        heartbeatThrottle: THROTTLE,
      },
    );
    planes.push({ plane, ...w, usage, writes });
  }
  const labels = PLANES.flatMap((p) => LOOPS.map((l) => (PLANES.length > 1 ? `${p}/${l}` : l)));
  try {
    const rows: Row[] = [];
    /** Events of one hourly checkpoint, per loop (poll has none). */
    const checkpoint: Partial<Record<Loop, number>> = {};
    // Every plane's worker runs for the whole bench (an idle one costs its plane little).
    const runAll = (ws: Worker[], fn: () => Promise<void>): Promise<void> =>
      ws.length === 0 ? fn() : ws[0]!.runUntil(() => runAll(ws.slice(1), fn));
    await runAll(
      planes.map((p) => p.worker),
      async () => {
        for (const l of ['monitor', 'host'] as const) {
          if (LOOPS.includes(l)) checkpoint[l] = await checkpointEvents(planes[0]!.client, l);
        }
        for (let run = 0; run < RUNS; run++) {
          const order = run % 2 === 0 ? labels : [...labels].reverse();
          for (const label of order) {
            const loop = label.split('/').at(-1) as Loop;
            const p = PLANES.length > 1 ? planes.find((x) => x.plane === label.split('/')[0])! : planes[0]!;
            const row = await phase(p.client, p.usage, p.writes, label, loop, run);
            rows.push(row);
            console.log(
              `  run ${run + 1} ${label}: ${JSON.stringify(row, (_, v: unknown) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v))}`,
            );
          }
        }
      },
    );
    for (const p of planes) await p.connection.close();
    console.log(
      `\nthe hourly checkpoint (continue-as-new): ${Object.entries(checkpoint)
        .map(([l, n]) => `${l} ${n} events`)
        .join(', ')}, added once per proxy-hour below\n`,
    );
    console.log(
      '| loop | events / proxy-hour | state transitions / proxy-hour | server CPU-s / min | worker CPU-s / min | server RSS MiB | worker RSS MiB | worker KiB / proxy | last probe age s (median) | last probe age s (oldest) |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const loop of labels) {
      const rs = rows.filter((r) => r.loop === loop);
      const add = checkpoint[loop.split('/').at(-1) as Loop] ?? 0;
      const f = (k: keyof Row, d: number, plus = 0) => fmtRange(spread(rs.map((r) => (r[k] as number) + plus)), d);
      console.log(
        `| ${loop} | ${f('eventsPerHour', 0, add)} | ${f('transitionsPerHour', 0)} | ${f('serverCpuPerMin', 2)} | ${f('workerCpuPerMin', 2)} | ${f('serverRss', 0)} | ${f('workerRss', 0)} | ${f('workerRssPerProxyKiB', 0)} | ${f('probeAgeMedianS', 1)} | ${f('probeAgeMaxS', 1)} |`,
      );
    }
    console.log(
      '\nworker growth per proxy, split (KiB): RSS = main-thread heap used + workflow-thread heap used + native + the heaps free committed pages\n',
    );
    console.log('| loop | RSS | main-thread heap (activities) | workflow-thread heap (cached workflows) | native |');
    console.log('|---|---|---|---|---|');
    for (const loop of labels) {
      const rs = rows.filter((r) => r.loop === loop);
      const f = (k: keyof Row) => fmtRange(spread(rs.map((r) => r[k] as number)), 0);
      console.log(
        `| ${loop} | ${f('workerRssPerProxyKiB')} | ${f('mainHeapPerProxyKiB')} | ${f('threadHeapPerProxyKiB')} | ${f('nativePerProxyKiB')} |`,
      );
    }
    const pgLabels = labels.filter((l) => rows.some((r) => r.loop === l && r.pgRowsPerS !== undefined));
    if (pgLabels.length > 0) {
      console.log(
        "\nthe cluster's PostgreSQL in the window (pg_stat_database over temporal and temporal_visibility; pg_stat_wal)\n",
      );
      console.log('| loop | rows written / s | rows written / proxy-hour | WAL KiB / s |');
      console.log('|---|---|---|---|');
      for (const loop of pgLabels) {
        const rs = rows.filter((r) => r.loop === loop && r.pgRowsPerS !== undefined);
        const f = (v: number[], d: number) => fmtRange(spread(v), d);
        console.log(
          `| ${loop} | ${f(
            rs.map((r) => r.pgRowsPerS!),
            1,
          )} | ${f(
            rs.map((r) => (r.pgRowsPerS! * 3600) / N),
            0,
          )} | ${f(
            rs.map((r) => r.pgWalKiBPerS!),
            1,
          )} |`,
        );
      }
    }
    console.log(
      `\nload average at the end: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    for (const l of ['monitor', 'host'] as const) {
      const mon = rows.filter((r) => r.loop === labels.find((x) => x.endsWith(l)));
      if (mon.length === 0) continue;
      const ev = median(mon.map((r) => r.eventsPerHour)) + (checkpoint[l] ?? 0);
      console.log(
        `\n${l}: goal <= 60 events per healthy proxy-hour (checkpoint included): ${ev <= 60 ? 'MET' : 'NOT MET'} (${ev.toFixed(1)})`,
      );
      const cpu = median(mon.map((r) => r.serverCpuPerMin)) / 60;
      console.log(
        `${l}: server under half a core with N=${N}: ${cpu < 0.5 ? 'MET' : 'NOT MET'} (${cpu.toFixed(3)} cores)`,
      );
    }
  } finally {
    await server?.stop();
  }
}

await main();
process.exit(0);

/** Polls `probe` every 500 ms until it gives a value; throws after `timeoutMs`. */
async function sleepUntil<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await sleep(500);
  }
}
