/**
 * Steady-state benchmark: what N healthy proxies cost while nothing happens, under the older
 * health loop (`poll`: two activities and a timer per interval) and the health monitor
 * (`monitor`, docs/health.md), side by side in one run, alternating, on a Temporal dev server of
 * its own (so its CPU and RSS are the proxies' alone).
 *
 * The hosts and guests are SIMULATED: an in-process host double (bench/lib/host-double.ts)
 * answers every read and probe as a healthy host would. The monitor activity itself is the real
 * one. What is measured is the control plane: history events and state transitions per healthy
 * proxy-hour (from `describe`, between two samples after every proxy is Healthy), server and
 * worker CPU-seconds per minute in that window, their RSS at its end (the worker is this process).
 * The hourly checkpoint of the monitor (continue-as-new) falls outside a short window: its cost is
 * measured once on a proxy that checkpoints after 3 polls and added to the monitor's rate.
 *
 *   node bench/steady-state.ts [--n 100] [--window-s 60] [--interval-ms 15000] [--runs 2] [--loops poll,monitor]
 */
import { parseArgs } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { proxyStatusQuery } from '../contracts/messages.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import type { ProxyWorkflowInput } from '../workflows/proxy/state.ts';
import { benchWorker, cpuSeconds, installQuietRuntime, rssMiB, startDevServer } from './lib/dev-server.ts';
import { hostDouble } from './lib/host-double.ts';
import { sleep } from './lib/run.ts';
import { fmtRange, median, spread } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '100' },
    'window-s': { type: 'string', default: '60' },
    'interval-ms': { type: 'string', default: '15000' },
    runs: { type: 'string', default: '2' },
    loops: { type: 'string', default: 'poll,monitor' },
    port: { type: 'string', default: '7391' },
  },
});
const N = Number(values.n);
const WINDOW_MS = Number(values['window-s']) * 1000;
const INTERVAL_MS = Number(values['interval-ms']);
const RUNS = Number(values.runs);
const LOOPS = values.loops.split(',') as ('poll' | 'monitor')[];
const PORT = Number(values.port);
const ENTRY = 'bench';
const TQ = 'steady-state';

interface Sample {
  events: number;
  transitions: number;
}
async function sample(hs: WorkflowHandle[]): Promise<Sample> {
  let events = 0;
  let transitions = 0;
  for (let i = 0; i < hs.length; i += 50) {
    const ds = await Promise.all(hs.slice(i, i + 50).map((h) => h.describe()));
    for (const d of ds) {
      events += d.historyLength;
      transitions += Number(d.raw.workflowExecutionInfo?.stateTransitionCount ?? 0);
    }
  }
  return { events, transitions };
}

async function allHealthy(hs: WorkflowHandle[], what: string): Promise<void> {
  const deadline = Date.now() + 10 * INTERVAL_MS + 120_000;
  let pending = hs;
  while (pending.length > 0) {
    if (Date.now() > deadline)
      throw new Error(`${pending.length} of ${hs.length} proxies (${what}) not Healthy in time`);
    const st = await Promise.all(pending.map((h) => h.query(proxyStatusQuery).catch(() => undefined)));
    pending = pending.filter((_, i) => st[i]?.conditions.Healthy.status !== 'True');
    if (pending.length > 0) await sleep(1_000);
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
}

async function phase(client: Client, serverPid: number, loop: 'poll' | 'monitor', run: number): Promise<Row> {
  const rss0 = rssMiB('self');
  const hs: WorkflowHandle[] = [];
  for (let i = 0; i < N; i += 50) {
    const batch = Array.from({ length: Math.min(50, N - i) }, (_, k) => {
      const input: ProxyWorkflowInput = {
        name: `ss-${loop}-${run}-${i + k}`,
        entry: ENTRY,
        imageKey: 'img',
        healthLoop: loop,
      };
      return client.workflow.start(PROXY_WORKFLOW_TYPE, {
        taskQueue: TQ,
        workflowId: proxyWorkflowId(ENTRY, input.name),
        args: [input],
      });
    });
    hs.push(...(await Promise.all(batch)));
  }
  await allHealthy(hs, loop);
  await sleep(2_000);
  const s0 = await sample(hs);
  const c0 = { server: cpuSeconds(serverPid), worker: process.cpuUsage() };
  await sleep(WINDOW_MS);
  const c1 = { server: cpuSeconds(serverPid), worker: process.cpuUsage(c0.worker) };
  const s1 = await sample(hs);
  const hours = WINDOW_MS / 3_600_000;
  const min = WINDOW_MS / 60_000;
  const row: Row = {
    loop,
    eventsPerHour: (s1.events - s0.events) / N / hours,
    transitionsPerHour: (s1.transitions - s0.transitions) / N / hours,
    serverCpuPerMin: (c1.server - c0.server) / min,
    workerCpuPerMin: (c1.worker.user + c1.worker.system) / 1e6 / min,
    serverRss: rssMiB(serverPid),
    workerRss: rssMiB('self'),
    workerRssPerProxyKiB: ((rssMiB('self') - rss0) * 1024) / N,
  };
  for (let i = 0; i < hs.length; i += 50) {
    await Promise.all(hs.slice(i, i + 50).map((h) => h.terminate('bench phase over').catch(() => undefined)));
  }
  await sleep(3_000);
  return row;
}

/** Events of one monitor checkpoint: the old run's tail after its last monitor was scheduled, and the new run up to its monitor. */
async function checkpointEvents(client: Client): Promise<number> {
  const input: ProxyWorkflowInput = {
    name: 'ss-checkpoint',
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
  while ((await cur.describe()).runId === first) {
    if (Date.now() > deadline) throw new Error('the checkpoint proxy did not continue as new in time');
    await sleep(500);
  }
  await sleep(2_000);
  const old = (await client.workflow.getHandle(h.workflowId, first).fetchHistory()).events ?? [];
  const lastScheduled = old.findLastIndex((e) => e.activityTaskScheduledEventAttributes != null);
  const tail = old.length - lastScheduled - 1;
  const fresh = (await cur.describe()).historyLength;
  await cur.terminate('bench over').catch(() => undefined);
  return tail + fresh;
}

async function main(): Promise<void> {
  console.log(
    `steady-state: N=${N} proxies per loop, interval ${INTERVAL_MS} ms, window ${WINDOW_MS / 1000} s, ${RUNS} alternating runs\n` +
      'HOSTS AND GUESTS ARE SIMULATED (an in-process host double answers reads and probes); the server is a dev server of its own (SQLite)',
  );
  installQuietRuntime();
  const server = await startDevServer(PORT, 'steady-state');
  try {
    const { connection, client, worker } = await benchWorker(PORT, TQ, () => hostDouble(ENTRY, INTERVAL_MS), {
      activities: Math.max(200, 2 * N + 50),
      workflows: Math.max(1000, 2 * N + 50),
    });
    const rows: Row[] = [];
    let checkpoint = 0;
    await worker.runUntil(async () => {
      if (LOOPS.includes('monitor')) checkpoint = await checkpointEvents(client);
      for (let run = 0; run < RUNS; run++) {
        const order = run % 2 === 0 ? LOOPS : [...LOOPS].reverse();
        for (const loop of order) {
          const row = await phase(client, server.pid, loop, run);
          rows.push(row);
          console.log(
            `  run ${run + 1} ${loop}: ${JSON.stringify(row, (_, v: unknown) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v))}`,
          );
        }
      }
    });
    await connection.close();
    console.log(
      `\nmonitor checkpoint (continue-as-new, hourly): ${checkpoint} events, added once per proxy-hour below\n`,
    );
    console.log(
      '| loop | events / proxy-hour | state transitions / proxy-hour | server CPU-s / min | worker CPU-s / min | server RSS MiB | worker RSS MiB | worker KiB / proxy |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const loop of LOOPS) {
      const rs = rows.filter((r) => r.loop === loop);
      const add = loop === 'monitor' ? checkpoint : 0;
      const f = (k: keyof Row, d: number, plus = 0) => fmtRange(spread(rs.map((r) => (r[k] as number) + plus)), d);
      console.log(
        `| ${loop} | ${f('eventsPerHour', 0, add)} | ${f('transitionsPerHour', 0)} | ${f('serverCpuPerMin', 2)} | ${f('workerCpuPerMin', 2)} | ${f('serverRss', 0)} | ${f('workerRss', 0)} | ${f('workerRssPerProxyKiB', 0)} |`,
      );
    }
    const mon = rows.filter((r) => r.loop === 'monitor');
    if (mon.length > 0) {
      const ev = median(mon.map((r) => r.eventsPerHour)) + checkpoint;
      console.log(
        `\ngoal <= 60 events per healthy proxy-hour (monitor, checkpoint included): ${ev <= 60 ? 'MET' : 'NOT MET'} (${ev.toFixed(1)})`,
      );
      const cpu = median(mon.map((r) => r.serverCpuPerMin)) / 60;
      console.log(`server under half a core with N=${N}: ${cpu < 0.5 ? 'MET' : 'NOT MET'} (${cpu.toFixed(3)} cores)`);
    }
  } finally {
    await server.stop();
  }
}

await main();
process.exit(0);
