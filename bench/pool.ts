/**
 * Pool benchmark (issue 19): what a pool costs to fill, to keep at rest and to roll, beside the
 * same replacement done by hand through the proxy workflows alone, in one run, alternating, on a
 * Temporal dev server of its own (so its CPU and RSS are the pool's alone).
 *
 * HOSTS AND GUESTS ARE SIMULATED: the in-process host double (bench/lib/host-double.ts) answers
 * every read and probe as a healthy host would; the monitor activity and the pool's activities
 * (createPoolActivities) are the real ones, in one worker with the pool and proxy workflows.
 *
 * Each run, in the order pool, manual (reversed on odd runs):
 * - pool: a pool created at size 0, scaled to N (time to all N Healthy and available, members
 *   started per second), then at rest for a window (history events per member-hour and of the
 *   pool workflow per hour, from describe), then a rollout of a new image key with maxSurge
 *   ceil(10 % of N) and maxUnavailable 0 (time to Ready on the new revision, the fewest members
 *   in discovery at any one-second sample of the status query);
 * - manual (the anchor): N standalone proxies made Healthy, then replaced as an operator would
 *   script it without pools: start N new ones, wait until all are Healthy, delete the N old ones
 *   and wait until their workflows closed.
 * Worker (this process) and server peak RSS are sampled every second in each phase.
 * With --checkpoint, a small pool whose members continue as new every 3 polls measures what a
 * member's hourly checkpoint costs its pool (its first report after continue-as-new).
 *
 *   node bench/pool.ts [--n 100] [--runs 2] [--window-s 60] [--interval-ms 2000] [--min-healthy-ms 1000]
 *                      [--drain-ms 0] [--checkpoint] [--no-anchor] [--port 7392]
 * --spare-trials K: K alternating trials of a scale-up by one from a warm spare and without one.
 * --no-anchor leaves the manual replacement out (to fit N = 1,000 in a bounded run); --no-rollout
 *   the pool's rollout (its figures then describe a pool already Ready: no replacement).
 * --shared-queue runs the pools on the members' task queue (as before pools had their own:
 *   contracts/task-queues.ts), to show what the queue of their own changes.
 * --temporal cluster runs on `scripts/temporal cluster` (the Temporal server on PostgreSQL, mTLS;
 *   started if down) instead of a dev server of its own; "server" RSS and CPU are then the
 *   Temporal server process's alone (PostgreSQL not counted).
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { StartMemberInput } from '../activities/pool.ts';
import { createPoolActivities } from '../activities/pool.ts';
import { requestProxyDelete } from '../client/proxies.ts';
import { poolScaleUpdate, poolSpecUpdate, poolStatusQuery, proxyStatusQuery } from '../contracts/messages.ts';
import type { PoolSpec, PoolStatus } from '../contracts/pool.ts';
import { POOL_WORKFLOW_TYPE, poolAddresses, poolWorkflowId } from '../contracts/pool.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import { poolTaskQueue } from '../contracts/task-queues.ts';
import type { PoolWorkflowInput } from '../workflows/pool/index.ts';
import type { ProxyWorkflowInput } from '../workflows/proxy/state.ts';
import { benchWorker, cpuSeconds, installQuietRuntime, rssMiB, startDevServer } from './lib/dev-server.ts';
import { hostDouble } from './lib/host-double.ts';
import { chainEvents, eventMs, tallyPoolSignals, tellTimes } from './lib/pool-signals.ts';
import { fmtLoad, HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, median, percentile as pct, ratio, spread } from './lib/stats.ts';
import { clusterUp } from '../test/support/temporal-cluster.ts';
import { PROJECT_ROOT } from '../test/support/temporal.ts';

const USAGE =
  'node bench/pool.ts [--n 100] [--runs 2] [--window-s 60] [--interval-ms 2000] [--min-healthy-ms 1000] [--drain-ms 0] [--checkpoint] [--no-anchor] [--spare-trials 0] [--shared-queue] [--no-rollout] [--port 7392] [--temporal dev|cluster]';
const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '100' },
    runs: { type: 'string', default: '2' },
    'window-s': { type: 'string', default: '60' },
    'interval-ms': { type: 'string', default: '2000' },
    'min-healthy-ms': { type: 'string', default: '1000' },
    'drain-ms': { type: 'string', default: '0' },
    'phase-timeout-s': { type: 'string', default: '600' },
    checkpoint: { type: 'boolean', default: false },
    'no-anchor': { type: 'boolean', default: false },
    'spare-trials': { type: 'string', default: '0' },
    port: { type: 'string', default: '7392' },
    'shared-queue': { type: 'boolean', default: false },
    'no-rollout': { type: 'boolean', default: false },
    temporal: { type: 'string', default: 'dev' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
if (values.temporal !== 'dev' && values.temporal !== 'cluster')
  throw new Error(`--temporal must be dev or cluster, got ${JSON.stringify(values.temporal)}: ${USAGE}`);
const N = Number(values.n);
const RUNS = Number(values.runs);
const WINDOW_MS = Number(values['window-s']) * 1000;
const INTERVAL_MS = Number(values['interval-ms']);
const MIN_HEALTHY_MS = Number(values['min-healthy-ms']);
const DRAIN_MS = Number(values['drain-ms']);
const PHASE_TIMEOUT_MS = Number(values['phase-timeout-s']) * 1000;
const PORT = Number(values.port);
const SURGE = Math.ceil(N / 10);
const ENTRY = 'bench';
const TQ = 'pool-bench';
/** Where the bench's pools run: their own queue (as the worker runs them) or, to compare, the members'. */
const POOL_TQ = values['shared-queue'] ? TQ : poolTaskQueue(TQ);
const BATCH = 50;

for (const [flag, v] of Object.entries({ n: N, runs: RUNS, 'window-s': WINDOW_MS, 'interval-ms': INTERVAL_MS })) {
  if (!Number.isInteger(v) || v < 1)
    throw new Error(`--${flag} must be a whole number of at least 1, got ${String(v)}`);
}
if (N > 1000) throw new Error(`--n must be at most 1000 (a pool's largest size), got ${N}`);

/** Runs `f` over `xs` in batches of BATCH at a time. */
async function batched<T, R>(xs: readonly T[], f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < xs.length; i += BATCH) out.push(...(await Promise.all(xs.slice(i, i + BATCH).map(f))));
  return out;
}

/** Peak RSS of the worker (this process) and the server, sampled every second while it runs. */
class Peaks {
  worker = 0;
  server = 0;
  private timer: NodeJS.Timeout;
  constructor(serverPid: number) {
    const take = (): void => {
      this.worker = Math.max(this.worker, rssMiB('self'));
      this.server = Math.max(this.server, rssMiB(serverPid));
    };
    take();
    this.timer = setInterval(take, 1_000);
  }
  stop(): this {
    clearInterval(this.timer);
    return this;
  }
}

/** Calls `f` every second until it returns a value, for at most PHASE_TIMEOUT_MS. */
async function everySecond<T>(what: string, f: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  for (;;) {
    const t = performance.now();
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not done within ${PHASE_TIMEOUT_MS / 1000} s`);
    await sleep(Math.max(0, 1_000 - (performance.now() - t)));
  }
}

async function historyLengths(client: Client, ids: readonly string[]): Promise<number> {
  const ls = await batched(ids, async (id) => (await client.workflow.getHandle(id).describe()).historyLength);
  return ls.reduce((a, b) => a + b, 0);
}

/** Status queries that failed (the worker too busy to answer within the server's query timeout), per phase. */
let missedQueries = 0;

/** The pool's status, or undefined (counted in missedQueries) when the query failed. */
async function statusOf(h: WorkflowHandle): Promise<PoolStatus | undefined> {
  try {
    return await h.query(poolStatusQuery);
  } catch {
    missedQueries++;
    return undefined;
  }
}

/** When each startPoolMember call of the worker completed (ms, performance.now()). */
const memberStarts: number[] = [];

interface PoolRow {
  load: number[];
  /** Scale-up: seconds from the scale update to all N Healthy, and to all N available. */
  healthyS: number;
  availableS: number;
  startsPerS: number;
  scaleWorkerPeak: number;
  scaleServerPeak: number;
  memberEventsPerHour: number;
  poolEventsPerHour: number;
  restServerCpuPerMin: number;
  restWorkerCpuPerMin: number;
  /** Rollout: seconds from the spec update to Ready on the new revision; fewest in discovery. */
  rolloutS: number;
  minInDiscovery: number;
  /** 1 s samples lost to a status query that timed out (scale-up, rollout). */
  scaleMissedSamples: number;
  rolloutMissedSamples: number;
  maxMembers: number;
  rolloutWorkerPeak: number;
  rolloutServerPeak: number;
  /** Member reports (signals) the pool received per member, and its history events per member: scale-up, rollout; at rest in all. */
  scaleReportsPerMember: number;
  scalePoolEventsPerMember: number;
  /** The members' own history events once all are available (their runs so far). */
  scaleMemberEventsPerMember: number;
  restReports: number;
  rolloutReportsPerMember: number;
  rolloutPoolEventsPerMember: number;
}

function poolSpec(name: string, imageKey: string, size: number): PoolSpec {
  return {
    entry: ENTRY,
    name,
    size,
    template: { imageKey },
    rollout: { maxSurge: SURGE, maxUnavailable: 0, minHealthyMs: MIN_HEALTHY_MS },
    drainDelayMs: DRAIN_MS,
  };
}

async function endPool(client: Client, h: WorkflowHandle, st: PoolStatus | undefined): Promise<void> {
  const names = st?.members.map((m) => m.name) ?? [];
  await h.terminate('bench phase over').catch(() => undefined);
  await batched(names, (n) =>
    client.workflow
      .getHandle(proxyWorkflowId(ENTRY, n))
      .terminate('bench phase over')
      .catch(() => undefined),
  );
}

async function poolPhase(client: Client, serverPid: number, run: number): Promise<PoolRow> {
  const load = loadavg();
  const name = `bp${run}`;
  const input: PoolWorkflowInput = { spec: poolSpec(name, 'img-a', 0) };
  const h = await client.workflow.start(POOL_WORKFLOW_TYPE, {
    taskQueue: POOL_TQ,
    workflowId: poolWorkflowId(ENTRY, name),
    args: [input],
  });
  let last: PoolStatus | undefined;
  try {
    // 1. Scale 0 → N.
    memberStarts.length = 0;
    const e0 = Date.now();
    const scale = new Peaks(serverPid);
    const t0 = performance.now();
    await h.executeUpdate(poolScaleUpdate, { args: [{ size: N }] });
    let healthyAt = NaN;
    missedQueries = 0;
    let nextNote = t0 + 60_000;
    try {
      last = await everySecond('scale-up', async () => {
        const st = await statusOf(h);
        if (st === undefined) return undefined;
        if (Number.isNaN(healthyAt) && st.healthy >= N) healthyAt = performance.now();
        if (performance.now() >= nextNote) {
          nextNote += 60_000;
          console.log(
            `    scale-up +${r((performance.now() - t0) / 1000, 0)} s: ${st.members.length} members, ${st.healthy} Healthy, ` +
              `${st.available} available, ${memberStarts.length} starts done (load ${fmtLoad(loadavg())})`,
          );
        }
        return st.available >= N ? st : undefined;
      });
    } catch (err) {
      // Not finished: what the pool received so far, then the failure.
      const [so] = tallyPoolSignals(await chainEvents(client, h.workflowId, h.firstExecutionRunId), [e0]);
      console.log(
        `    scale-up NOT finished: ${so!.reports} reports from ${so!.members} members, ${so!.events} pool events; ` +
          `fields changed ${JSON.stringify(so!.changed)}`,
      );
      throw err;
    }
    const availableAt = performance.now();
    if (Number.isNaN(healthyAt)) healthyAt = availableAt;
    scale.stop();
    const scaleMissed = missedQueries;
    const lastStart = Math.max(...memberStarts);
    const startsPerS = memberStarts.length / ((lastStart - t0) / 1000);

    console.log(
      `    scale-up: all Healthy ${r((healthyAt - t0) / 1000)} s, all available ${r((availableAt - t0) / 1000)} s, ` +
        `${r(startsPerS)} started/s, peak RSS worker ${r(scale.worker, 0)} server ${r(scale.server, 0)} MiB (load ${fmtLoad(loadavg())})`,
    );
    // 2. At rest.
    await sleep(2_000);
    const ids = last.members.map((m) => proxyWorkflowId(ENTRY, m.name));
    const m0 = await historyLengths(client, ids);
    console.log(`    members' own history events after the scale-up: ${r(m0 / N)} / member`);
    const p0 = (await h.describe()).historyLength;
    const e1 = Date.now();
    const c0 = { server: cpuSeconds(serverPid), worker: process.cpuUsage() };
    await sleep(WINDOW_MS);
    const c1 = { server: cpuSeconds(serverPid), worker: process.cpuUsage(c0.worker) };
    const m1 = await historyLengths(client, ids);
    const p1 = (await h.describe()).historyLength;
    const hours = WINDOW_MS / 3_600_000;

    console.log(`    at rest: ${r((m1 - m0) / N / hours)} events / member-hour, pool ${r((p1 - p0) / hours)} / hour`);
    // 3. Rollout of a new image key (unless --no-rollout).
    const e2 = Date.now();
    const roll = new Peaks(serverPid);
    const r0 = performance.now();
    let minIn = Infinity;
    let maxMembers = 0;
    missedQueries = 0;
    const revision = values['no-rollout']
      ? last.revision
      : (await h.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: 'img-b' } }] })).revision;
    last = await everySecond('rollout', async () => {
      const st = await statusOf(h);
      if (st === undefined) return undefined;
      minIn = Math.min(minIn, poolAddresses(st).length);
      maxMembers = Math.max(maxMembers, st.members.length);
      return st.phase === 'Ready' && st.revision === revision ? st : undefined;
    });
    const rolloutS = (performance.now() - r0) / 1000;
    roll.stop();
    const e3 = Date.now();
    const events = await chainEvents(client, h.workflowId, h.firstExecutionRunId);
    const tallies = tallyPoolSignals(events, [e0, e1, e2, e3]);
    const inRange = (a: number, b: number) => events.filter((e) => eventMs(e) >= a && eventMs(e) < b);
    for (const [phase, evs] of [
      ['scale-up', inRange(e0, e1)],
      ['rollout', inRange(e2, e3)],
    ] as const) {
      const tt = tellTimes(evs);
      const q = (xs: number[]): string =>
        xs.length === 0 ? '-' : `${r(median(xs) / 1000)} / ${r(pct(xs, 0.9) / 1000)} / ${r(Math.max(...xs) / 1000)} s`;
      console.log(
        `    role signals, ${phase}: ${tt.tells} sent; delivery (initiated -> confirmed) median / p90 / max ${q(tt.deliveryMs)}; ` +
          `first Healthy report -> told to serve (minHealthyMs ${MIN_HEALTHY_MS} included) ${q(tt.promotionMs)} over ${tt.promotionMs.length} members`,
      );
    }
    const [ts, tr, tro] = [tallies[0]!, tallies[1]!, tallies[2]!];
    console.log(
      `    pool signals, scale-up: ${ts.reports} reports from ${ts.members} members (${r(ts.reports / N)} / member), ` +
        `${ts.events} pool events (${r(ts.events / N)} / member); fields changed ${JSON.stringify(ts.changed)}; steps ${JSON.stringify(ts.steps)}`,
    );
    console.log(`    pool signals, at rest: ${tr.reports} reports, ${tr.events} pool events`);
    console.log(
      `    pool signals, rollout: ${tro.reports} reports from ${tro.members} members (${r(tro.reports / N)} / member of N), ` +
        `${tro.events} pool events (${r(tro.events / N)} / member of N); fields changed ${JSON.stringify(tro.changed)}; steps ${JSON.stringify(tro.steps)}`,
    );
    return {
      load,
      healthyS: (healthyAt - t0) / 1000,
      availableS: (availableAt - t0) / 1000,
      startsPerS,
      scaleWorkerPeak: scale.worker,
      scaleServerPeak: scale.server,
      memberEventsPerHour: (m1 - m0) / N / hours,
      poolEventsPerHour: (p1 - p0) / hours,
      restServerCpuPerMin: (c1.server - c0.server) / (WINDOW_MS / 60_000),
      restWorkerCpuPerMin: (c1.worker.user + c1.worker.system) / 1e6 / (WINDOW_MS / 60_000),
      rolloutS,
      minInDiscovery: minIn,
      scaleMissedSamples: scaleMissed,
      rolloutMissedSamples: missedQueries,
      maxMembers,
      rolloutWorkerPeak: roll.worker,
      rolloutServerPeak: roll.server,
      scaleReportsPerMember: ts.reports / N,
      scaleMemberEventsPerMember: m0 / N,
      scalePoolEventsPerMember: ts.events / N,
      restReports: tr.reports,
      rolloutReportsPerMember: tro.reports / N,
      rolloutPoolEventsPerMember: tro.events / N,
    };
  } finally {
    await endPool(client, h, last ?? (await h.query(poolStatusQuery).catch(() => undefined)));
    await sleep(3_000);
  }
}

function startProxies(client: Client, names: readonly string[]): Promise<WorkflowHandle[]> {
  return batched(names, (name) => {
    const input: ProxyWorkflowInput = { name, entry: ENTRY, imageKey: 'img-b' };
    return client.workflow.start(PROXY_WORKFLOW_TYPE, {
      taskQueue: TQ,
      workflowId: proxyWorkflowId(ENTRY, name),
      args: [input],
    });
  });
}

async function allHealthy(hs: readonly WorkflowHandle[], what: string): Promise<void> {
  let pending = [...hs];
  await everySecond(what, async () => {
    const st = await batched(pending, (h) => h.query(proxyStatusQuery).catch(() => undefined));
    pending = pending.filter((_, i) => st[i]?.conditions.Healthy.status !== 'True');
    return pending.length === 0 ? true : undefined;
  });
}

/** The operator's delete, tried again (5 times at most) when Temporal did not answer in time. */
async function deleteProxy(client: Client, name: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await requestProxyDelete(client, ENTRY, name);
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(1_000);
    }
  }
}

interface ManualRow {
  load: number[];
  replaceS: number;
  workerPeak: number;
  serverPeak: number;
}

async function manualPhase(client: Client, serverPid: number, run: number): Promise<ManualRow> {
  const load = loadavg();
  const oldNames = Array.from({ length: N }, (_, i) => `bm${run}-old-${i}`);
  const newNames = Array.from({ length: N }, (_, i) => `bm${run}-new-${i}`);
  const old = await startProxies(client, oldNames);
  let fresh: WorkflowHandle[] = [];
  try {
    await allHealthy(old, 'manual: the old proxies');
    const peaks = new Peaks(serverPid);
    const t0 = performance.now();
    fresh = await startProxies(client, newNames);
    await allHealthy(fresh, 'manual: the new proxies');
    await batched(oldNames, (n) => deleteProxy(client, n));
    let open = [...old];
    await everySecond('manual: the old proxies deleted', async () => {
      const ds = await batched(open, (h) => h.describe().catch(() => undefined));
      open = open.filter((_, i) => ds[i]?.status.name === 'RUNNING');
      return open.length === 0 ? true : undefined;
    });
    const replaceS = (performance.now() - t0) / 1000;
    peaks.stop();
    return { load, replaceS, workerPeak: peaks.worker, serverPeak: peaks.server };
  } finally {
    await batched([...old, ...fresh], (h) => h.terminate('bench phase over').catch(() => undefined));
    await sleep(3_000);
  }
}

interface CheckpointRow {
  /** Events the pool records per member checkpoint (the member's first report of its new run). */
  poolEventsPerCheckpoint: number;
  checkpoints: number;
  /** The most members in discovery at any 1 s sample, and at the window's end (after their checkpoints). */
  availablePeak: number;
  availableAfter: number;
  /** Members whose own status says they are out of discovery at the end. */
  notServingAfter: number;
}

/**
 * What a member's hourly checkpoint costs its pool: a pool of 5 whose members continue as new
 * every 3 polls, watched over a window: the pool's events per member checkpoint, and whether the
 * members are still in discovery after their checkpoints.
 */
async function checkpointCost(client: Client): Promise<CheckpointRow> {
  const size = 5;
  const spec = poolSpec('bpck', 'img-c', size);
  // The template is spread into each member's proxy input: the bench's way to shorten the hourly checkpoint.
  (spec.template as unknown as Record<string, unknown>).continueAsNewAfterPolls = 3;
  const h = await client.workflow.start(POOL_WORKFLOW_TYPE, {
    taskQueue: POOL_TQ,
    workflowId: poolWorkflowId(ENTRY, 'bpck'),
    args: [{ spec } satisfies PoolWorkflowInput],
  });
  let last: PoolStatus | undefined;
  try {
    // All Healthy (not all available: a member whose checkpoint lost its role never becomes so).
    let peak = 0;
    last = await everySecond('checkpoint pool', async () => {
      const st = await statusOf(h);
      if (st === undefined) return undefined;
      peak = Math.max(peak, st.available);
      return st.healthy >= size ? st : undefined;
    });
    const q = `ExecutionStatus = "ContinuedAsNew" AND ProxyPool = "${ENTRY}/bpck"`;
    const c0 = (await client.workflow.count(q)).count;
    const p0 = (await h.describe()).historyLength;
    const windowEnd = Date.now() + Math.max(30_000, 8 * INTERVAL_MS);
    while (Date.now() < windowEnd) {
      peak = Math.max(peak, (await statusOf(h))?.available ?? 0);
      await sleep(1_000);
    }
    const p1 = (await h.describe()).historyLength;
    last = await everySecond('checkpoint status', () => statusOf(h));
    const own = await batched(last.members, (m) =>
      client.workflow.getHandle(proxyWorkflowId(ENTRY, m.name)).query(proxyStatusQuery),
    );
    await sleep(3_000); // visibility catches up
    const c1 = (await client.workflow.count(q)).count;
    return {
      poolEventsPerCheckpoint: (p1 - p0) / Math.max(1, c1 - c0),
      checkpoints: c1 - c0,
      availablePeak: peak,
      availableAfter: last.available,
      notServingAfter: own.filter((st) => st.pool?.serving !== true).length,
    };
  } finally {
    await endPool(client, h, last);
  }
}

/**
 * Seconds from a scale-up by one to the new member available in discovery (status sampled every
 * 100 ms): from a warm spare (spares 1) or from a new member (spares 0).
 */
async function spareTrial(client: Client, withSpare: boolean, k: number): Promise<number> {
  const name = `bs${withSpare ? 'w' : 'n'}${k}`;
  const spares = withSpare ? 1 : 0;
  const spec = { ...poolSpec(name, 'img-s', 2), spares };
  const h = await client.workflow.start(POOL_WORKFLOW_TYPE, {
    taskQueue: POOL_TQ,
    workflowId: poolWorkflowId(ENTRY, name),
    args: [{ spec } satisfies PoolWorkflowInput],
  });
  let last: PoolStatus | undefined;
  try {
    last = await everySecond(`spare trial ${name}`, async () => {
      const st = await statusOf(h);
      return st?.phase === 'Ready' ? st : undefined;
    });
    const t0 = performance.now();
    await h.executeUpdate(poolScaleUpdate, { args: [{ size: 3, spares }] });
    const deadline = Date.now() + 120_000;
    for (;;) {
      last = (await statusOf(h)) ?? last;
      if (last.available >= 3) return (performance.now() - t0) / 1000;
      if (Date.now() > deadline) throw new Error(`spare trial ${name}: not 3 available within 120 s`);
      await sleep(100);
    }
  } finally {
    await endPool(client, h, last);
  }
}

const r = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;

async function main(): Promise<void> {
  console.log(
    `pool: N=${N}, maxSurge ${SURGE} (10 % rounded up), maxUnavailable 0, minHealthyMs ${MIN_HEALTHY_MS}, drainDelayMs ${DRAIN_MS}, ` +
      `health interval ${INTERVAL_MS} ms, window ${WINDOW_MS / 1000} s, ${RUNS} alternating runs (pool, manual / manual, pool)\n` +
      `HOSTS AND GUESTS ARE SIMULATED (an in-process host double answers reads and probes); the server is ${values.temporal === 'cluster' ? 'scripts/temporal cluster (PostgreSQL; server figures: the Temporal server process alone)' : 'a dev server of its own (SQLite)'}\n` +
      `load average at start ${fmtLoad(loadavg())}`,
  );
  installQuietRuntime();
  const server =
    values.temporal === 'cluster'
      ? await (async () => {
          const settings = await clusterUp();
          const pidFile = join(PROJECT_ROOT, '.data/temporal-cluster/server.pid');
          return { settings, pid: Number(readFileSync(pidFile, 'utf8').trim()), stop: () => Promise.resolve() };
        })()
      : { settings: PORT, ...(await startDevServer(PORT, 'pool-bench')) };
  try {
    const {
      connection,
      client,
      worker,
      pools: poolsWorker,
    } = await benchWorker(
      server.settings,
      TQ,
      (c: Client) => {
        const pool = createPoolActivities(c, TQ);
        return {
          ...hostDouble(ENTRY, INTERVAL_MS),
          ...pool,
          startPoolMember: async (input: StartMemberInput) => {
            const out = await pool.startPoolMember(input);
            memberStarts.push(performance.now());
            return out;
          },
        };
      },
      // The pools' own worker, as runtime/worker-set.ts runs it beside the main one (few task slots).
      { activities: 2 * N + 100, workflows: 2 * N + 100, pools: !values['shared-queue'] },
    );
    const pools: PoolRow[] = [];
    const manuals: ManualRow[] = [];
    let ck: CheckpointRow | undefined;
    const spareS: { warm: number[]; cold: number[] } = { warm: [], cold: [] };
    const body = async (): Promise<void> => {
      for (let k = 0; k < Number(values['spare-trials']); k++) {
        for (const warm of k % 2 === 0 ? [true, false] : [false, true]) {
          const secs = await spareTrial(client, warm, k);
          (warm ? spareS.warm : spareS.cold).push(secs);
          console.log(
            `  spare trial ${k + 1} ${warm ? 'warm spare' : 'no spare'}: ${secs.toFixed(2)} s to in discovery`,
          );
        }
      }
      if (values.checkpoint) {
        ck = await checkpointCost(client);
        console.log(`  checkpoint: ${JSON.stringify(ck)}`);
      }
      for (let run = 0; run < RUNS; run++) {
        const order = run % 2 === 0 ? (['pool', 'manual'] as const) : (['manual', 'pool'] as const);
        for (const kind of order) {
          if (kind === 'manual' && values['no-anchor']) continue;
          const row =
            kind === 'pool' ? await poolPhase(client, server.pid, run) : await manualPhase(client, server.pid, run);
          (kind === 'pool' ? pools : manuals).push(row as PoolRow & ManualRow);
          console.log(
            `  run ${run + 1} ${kind}: ${JSON.stringify(row, (k, v: unknown) => (k === 'load' ? fmtLoad(v as number[]) : typeof v === 'number' ? r(v) : v))}`,
          );
        }
      }
    };
    await worker.runUntil(poolsWorker ? () => poolsWorker.runUntil(body) : body);
    await connection.close();
    // A phase the run skipped (--no-anchor: no manual runs; --no-rollout: no rollout) has no rows: "not run".
    const f = <T>(rows: T[], k: keyof T, d: number): string =>
      rows.length === 0 ? 'not run' : fmtRange(spread(rows.map((x) => x[k] as number)), d);
    const rolled = values['no-rollout'] ? [] : pools;
    console.log(`\nmedian (min-max) of ${RUNS} run(s), N = ${N}, load average at end ${fmtLoad(loadavg())}\n`);
    console.log('| measure | pool | by hand (proxies alone) |');
    console.log('|---|---|---|');
    console.log(`| scale 0 → N: s to all Healthy | ${f(pools, 'healthyS', 1)} | |`);
    console.log(
      `| scale 0 → N: s to all available (Healthy ${MIN_HEALTHY_MS} ms, in discovery) | ${f(pools, 'availableS', 1)} | |`,
    );
    console.log(`| scale 0 → N: members started / s | ${f(pools, 'startsPerS', 1)} | |`);
    console.log(`| scale 0 → N: worker peak RSS MiB | ${f(pools, 'scaleWorkerPeak', 0)} | |`);
    console.log(`| scale 0 → N: server peak RSS MiB | ${f(pools, 'scaleServerPeak', 0)} | |`);
    console.log(
      `| scale 0 → N: member reports the pool received / member | ${f(pools, 'scaleReportsPerMember', 2)} | |`,
    );
    console.log(`| scale 0 → N: pool history events / member | ${f(pools, 'scalePoolEventsPerMember', 2)} | |`);
    console.log(`| scale 0 → N: the member's own history events | ${f(pools, 'scaleMemberEventsPerMember', 1)} | |`);
    console.log(`| at rest: member reports the pool received (window) | ${f(pools, 'restReports', 0)} | |`);
    console.log(
      `| rollout: member reports the pool received / member of N | ${f(rolled, 'rolloutReportsPerMember', 2)} | |`,
    );
    console.log(`| rollout: pool history events / member of N | ${f(rolled, 'rolloutPoolEventsPerMember', 2)} | |`);
    console.log(`| at rest: events / member-hour (window) | ${f(pools, 'memberEventsPerHour', 1)} | |`);
    console.log(`| at rest: pool workflow events / hour (window) | ${f(pools, 'poolEventsPerHour', 1)} | |`);
    console.log(`| at rest: server CPU-s / min | ${f(pools, 'restServerCpuPerMin', 2)} | |`);
    console.log(`| at rest: worker CPU-s / min | ${f(pools, 'restWorkerCpuPerMin', 2)} | |`);
    console.log(`| replace all N: s | ${f(rolled, 'rolloutS', 1)} | ${f(manuals, 'replaceS', 1)} |`);
    console.log(
      `| replace all N: fewest in discovery at a 1 s sample | ${f(rolled, 'minInDiscovery', 0)} | (N: old kept until all new Healthy) |`,
    );
    console.log(
      `| replace all N: most members listed at once (leaving ones included) | ${f(rolled, 'maxMembers', 0)} | ${manuals.length === 0 ? 'not run' : 2 * N} |`,
    );
    console.log(
      `| replace all N: worker peak RSS MiB | ${f(rolled, 'rolloutWorkerPeak', 0)} | ${f(manuals, 'workerPeak', 0)} |`,
    );
    console.log(
      `| replace all N: server peak RSS MiB | ${f(rolled, 'rolloutServerPeak', 0)} | ${f(manuals, 'serverPeak', 0)} |`,
    );
    const roll = median(pools.map((x) => x.rolloutS));
    const hand = median(manuals.map((x) => x.replaceS));
    if (manuals.length > 0) console.log(`\nrollout / by hand (medians): ${ratio(roll, hand).toFixed(2)}`);
    const minIn = Math.min(...pools.map((x) => x.minInDiscovery));
    console.log(
      values['no-rollout']
        ? `never below N = ${N} in discovery during the rollout: not run (--no-rollout)`
        : `never below N = ${N} in discovery during the rollout: ${minIn >= N ? 'MET' : 'NOT MET'} (fewest ${minIn})`,
    );
    if (spareS.warm.length > 0) {
      console.log(
        `scale-up by one to in discovery (s, ${spareS.warm.length} trials): warm spare ${fmtRange(spread(spareS.warm), 2)}, ` +
          `no spare ${fmtRange(spread(spareS.cold), 2)}; goal with a spare <= 3 s median: ${median(spareS.warm) <= 3 ? 'MET' : 'NOT MET'} (simulated hosts)`,
      );
    }
    if (ck !== undefined) {
      const perHour = median(pools.map((x) => x.poolEventsPerHour)) + N * ck.poolEventsPerCheckpoint;
      console.log(
        `pool events per member checkpoint (hourly): ${ck.poolEventsPerCheckpoint.toFixed(1)} over ${ck.checkpoints} checkpoints; ` +
          `the pool at rest with N=${N}, checkpoints included: ${perHour.toFixed(0)} events / hour`,
      );
      console.log(
        `members in discovery after their checkpoints: ${ck.availableAfter} of 5 (at most ${ck.availablePeak} at any sample; ` +
          `${ck.notServingAfter} say they are out of discovery): ${ck.availableAfter >= 5 ? 'KEPT' : 'LOST'}`,
      );
    }
  } finally {
    await server.stop();
  }
}

await main();
process.exit(0);
