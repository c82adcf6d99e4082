/**
 * Steady state on the REAL test hosts: what N healthy proxies (real VMs booted from the e2e image,
 * a real Squid, probed by a real CONNECT to a real health target) cost while nothing happens,
 * under the older health loop (`poll`), the health monitor (`monitor`, docs/health.md) and the
 * host monitor (`host`: a second entry on the same host with `health.monitor: host`; its host
 * monitor's history is counted with the proxies'), side by side in one run, alternating (poll,
 * monitor, monitor, poll, ...). Nothing is simulated: the
 * worker is a process of its own (`bin/worker`, as operators run it) with the real activities, on
 * a Temporal dev server of the bench's own (so its CPU and RSS are the proxies' alone).
 *
 * Each phase starts N proxy workflows on the test host, waits until all are Healthy, lets them
 * settle two intervals, then samples `describe` (history events, state transitions) and the CPU
 * of the server and worker processes, waits the window, samples again, then for two intervals
 * reads every proxy's fresh status each second (bench/lib/freshness.ts: the status query with the
 * monitor's last heartbeat, as the API shows it) and notes how old its last probe is, then deletes
 * them all (the delete update) and waits until their workflows end. The worker's heartbeat
 * throttle is its own (runtime/worker-set.ts). The hourly checkpoint of the monitor falls outside a short window; its
 * cost is measured by bench/steady-state.ts (17-19 events) and is not added here.
 *
 *   flock /tmp/ep-integration.lock bash -c 'test/hosts/testhost up 2 >/dev/null && \
 *     EP_E2E_IMAGE=$(CI=true test/e2e/image/build </dev/null | tail -n1) \
 *     node bench/steady-state-hosts.ts --n 4 --window-s 300 --runs 2'
 *
 * Needs root and the test hosts; the Temporal server is the bench's own (`--port`). Every wait is
 * bounded; every proxy the bench started is deleted on every path (SIGINT and SIGTERM included),
 * then the entry's base and marker volumes.
 */
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { ensureSearchAttributes } from '../client/search-attributes.ts';
import { freshProxyStatus } from '../client/health.ts';
import { hostMonitorWorkflowId } from '../contracts/host-monitor.ts';
import { proxyStatusQuery } from '../contracts/messages.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';
import { deleteAll, fleetConfig, spawnWorker, writeProvidersFile } from '../test/support/fleet.ts';
import type { WorkerProcess } from '../test/support/fleet.ts';
import { ImageMirror, sha256Hex } from '../test/support/mirror.ts';
import { startTarget } from '../test/support/target.ts';
import type { Target } from '../test/support/target.ts';
import { domainsOf, loadTestHosts, virsh, volumesOf } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { cpuSeconds, rssMiB, startDevServer } from './lib/dev-server.ts';
import type { DevServer } from './lib/dev-server.ts';
import { probeAges } from './lib/freshness.ts';
import { historySample } from './lib/history-sample.ts';
import { HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, median, spread } from './lib/stats.ts';

const USAGE = `node bench/steady-state-hosts.ts [options]   (root; test/hosts/testhost up; EP_E2E_IMAGE or --image)

  --n N               proxies per phase, 1-20 (default 4)
  --window-s S        the measured window after every proxy is Healthy (default 300)
  --interval-ms MS    providers[].health.intervalMs (default 15000, the default of an entry)
  --runs R            rounds; each runs every loop once, the order alternating (default 2)
  --loops L           poll,monitor (default), host, or any of them
  --host NAME         the test host the proxies run on (default ep-h1)
  --image PATH        the qcow2 to boot (default: $EP_E2E_IMAGE)
  --memory-mib M      each VM's memory (default 512)
  --port P            the bench's own Temporal dev server (default 7397)`;

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '4' },
    'window-s': { type: 'string', default: '300' },
    'interval-ms': { type: 'string', default: '15000' },
    runs: { type: 'string', default: '2' },
    loops: { type: 'string', default: 'poll,monitor' },
    host: { type: 'string', default: 'ep-h1' },
    image: { type: 'string', default: process.env['EP_E2E_IMAGE'] ?? '' },
    'memory-mib': { type: 'string', default: '512' },
    port: { type: 'string', default: '7397' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);

/** A whole number within [min, max], or exits naming the option and what it takes. */
function intOption(name: string, raw: string, min: number, max: number): number {
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    console.error(`--${name}: a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}\n\n${USAGE}`);
    process.exit(2);
  }
  return v;
}
const N = intOption('n', values.n, 1, 20);
const WINDOW_MS = intOption('window-s', values['window-s'], 10, 3_600) * 1000;
const INTERVAL_MS = intOption('interval-ms', values['interval-ms'], 1_000, 600_000);
const RUNS = intOption('runs', values.runs, 1, 10);
const MEMORY_MIB = intOption('memory-mib', values['memory-mib'], 128, 4_096);
const PORT = intOption('port', values.port, 1_024, 65_535);
type Loop = 'poll' | 'monitor' | 'host';
const LOOPS = values.loops.split(',') as Loop[];
for (const l of LOOPS as string[]) {
  if (l !== 'poll' && l !== 'monitor' && l !== 'host') {
    console.error(`--loops: poll, monitor, host or some of them (comma-separated), got ${JSON.stringify(l)}`);
    process.exit(2);
  }
}
if (values.image === '') {
  console.error(
    '--image: the qcow2 to boot is needed: set EP_E2E_IMAGE=$(CI=true test/e2e/image/build </dev/null | tail -n1) or pass --image',
  );
  process.exit(2);
}

const RUN_ID = Date.now().toString(36);
const ENTRY = `ss${RUN_ID}`;
/** The entry of the host monitor's phases: the same host, `health.monitor: host`. */
const HOST_ENTRY = `ss${RUN_ID}h`;
const KEY = `img${RUN_ID}`;
const TQ = `steady-hosts-${RUN_ID}`;
const HEALTH = { intervalMs: INTERVAL_MS, probeTimeoutMs: 5_000, healthyAfter: 2, unhealthyAfter: 3 };
/** N guests booting at once under TCG share the machine's cores: 5 min, and 1 min more per guest. */
const HEALTHY_BOUND_MS = 5 * 60_000 + N * 60_000;
const DELETE_BOUND_MS = 180_000;

interface Row {
  loop: string;
  healthyS: number;
  eventsPerHour: number;
  transitionsPerHour: number;
  serverCpuPerMin: number;
  workerCpuPerMin: number;
  serverRss: number;
  workerRss: number;
  /** Ages (s) of the last probe in the proxies' fresh statuses, sampled after the window: median and oldest. */
  probeAgeMedianS: number;
  probeAgeMaxS: number;
  deleteS: number;
}

/** Waits until every proxy's status says Healthy True; fails naming those that are not (and how). */
async function allHealthy(hs: WorkflowHandle[]): Promise<void> {
  const deadline = Date.now() + HEALTHY_BOUND_MS;
  for (;;) {
    const st = await Promise.all(hs.map((h) => h.query(proxyStatusQuery).catch(() => undefined)));
    if (st.every((s) => s?.conditions.Healthy.status === 'True')) return;
    const failed = st.find((s) => s?.state === 'Failed');
    if (failed || Date.now() > deadline) {
      const seen = st
        .map((s, i) => (s?.conditions.Healthy.status === 'True' ? '' : `${hs[i]!.workflowId}: ${describeStatus(s)}`))
        .filter((x) => x !== '');
      throw new Error(
        `${failed ? 'a proxy failed' : `not every proxy Healthy within ${HEALTHY_BOUND_MS / 1000} s`}: ${seen.join('; ')}`,
      );
    }
    await sleep(2_000);
  }
}

function describeStatus(s: ProxyStatus | undefined): string {
  if (s === undefined) return 'no answer';
  const err = s.lastError ? `, ${s.lastError.code}: ${s.lastError.message}` : '';
  return `${s.state}${s.reason ? ` (${s.reason})` : ''}, Healthy ${s.conditions.Healthy.status}${err}`;
}

async function phase(
  client: Client,
  server: DevServer,
  worker: WorkerProcess,
  loop: Loop,
  run: number,
  started: WorkflowHandle[],
  hostName: string,
): Promise<Row> {
  const t0 = performance.now();
  const entry = loop === 'host' ? HOST_ENTRY : ENTRY;
  const hs: WorkflowHandle[] = [];
  for (let i = 0; i < N; i++) {
    const name = `${loop}-${run}-${i}`;
    const h = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      taskQueue: TQ,
      workflowId: proxyWorkflowId(entry, name),
      args: [
        {
          name,
          entry,
          imageKey: KEY,
          vm: { vcpus: 1, memoryMiB: MEMORY_MIB, diskGiB: 4 },
          healthLoop: loop === 'poll' ? 'poll' : 'monitor',
        },
      ],
    });
    hs.push(h);
    started.push(h);
  }
  await allHealthy(hs);
  const healthyS = (performance.now() - t0) / 1000;
  // The Healthy transition's workflow task and upserts settle; the poll loop is at its pace.
  await sleep(2 * INTERVAL_MS);
  const wpid = worker.child.pid!;
  const sampled = loop === 'host' ? [...hs, client.workflow.getHandle(hostMonitorWorkflowId(entry, hostName))] : hs;
  const s0 = await historySample(sampled);
  const c0 = { server: cpuSeconds(server.pid), worker: cpuSeconds(wpid) };
  await sleep(WINDOW_MS);
  const c1 = { server: cpuSeconds(server.pid), worker: cpuSeconds(wpid) };
  const s1 = await historySample(sampled);
  const ages = await probeAges(hs, 2 * INTERVAL_MS);
  const fresh = await Promise.all(hs.map((h) => freshProxyStatus(h)));
  const unhealthy = fresh.filter((s) => s.conditions.Healthy.status !== 'True');
  if (unhealthy.length > 0) {
    throw new Error(
      `${unhealthy.length} proxies left Healthy during the window (${unhealthy.map(describeStatus).join('; ')}): the window is not a steady state`,
    );
  }
  const hours = WINDOW_MS / 3_600_000;
  const min = WINDOW_MS / 60_000;
  const row: Row = {
    loop,
    healthyS,
    eventsPerHour: (s1.events - s0.events) / N / hours,
    transitionsPerHour: (s1.transitions - s0.transitions) / N / hours,
    serverCpuPerMin: (c1.server - c0.server) / min,
    workerCpuPerMin: (c1.worker - c0.worker) / min,
    serverRss: rssMiB(server.pid),
    workerRss: rssMiB(wpid),
    probeAgeMedianS: median(ages),
    probeAgeMaxS: Math.max(...ages),
    deleteS: 0,
  };
  const d0 = performance.now();
  await deleteAll(client, hs, DELETE_BOUND_MS);
  row.deleteS = (performance.now() - d0) / 1000;
  return row;
}

/** Whatever the bench made on the host: its proxies (through their workflows), then stray domains and the entry's volumes. */
async function cleanUp(
  client: Client | undefined,
  started: WorkflowHandle[],
  host: TestHost | undefined,
): Promise<void> {
  if (client) await deleteAll(client, started, DELETE_BOUND_MS);
  if (!host) return;
  for (const e of [ENTRY, HOST_ENTRY]) {
    for (const d of await domainsOf(host, e).catch(() => [])) {
      await virsh(host, 'destroy', d).catch(() => '');
      await virsh(host, 'undefine', d).catch(() => '');
    }
  }
  for (const v of [
    ...(await volumesOf(host, ENTRY).catch(() => [])),
    ...(await volumesOf(host, KEY).catch(() => [])),
  ]) {
    await virsh(host, 'vol-delete', '--pool', host.pool, v).catch(() => '');
  }
}

async function main(): Promise<void> {
  const host = loadTestHosts().find((h) => h.name === values.host);
  if (!host) throw new Error(`--host: no test host ${values.host} is described: run test/hosts/testhost up 2`);
  console.log(
    `steady-state on the real test host ${host.name}: N=${N} proxies per loop (real VMs, ${MEMORY_MIB} MiB each, Squid probed by a real CONNECT), ` +
      `interval ${INTERVAL_MS} ms, window ${WINDOW_MS / 1000} s, ${RUNS} alternating rounds of ${LOOPS.join(', ')}\n` +
      `image ${values.image}; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' ',
        )}\nNOTHING SIMULATED: the worker is bin/worker with the real activities; the dev server is the bench's own (SQLite)`,
  );
  const image = await readFile(values.image);
  const tmp = await mkdtemp(join(tmpdir(), 'ep-steady-hosts-'));
  const started: WorkflowHandle[] = [];
  let server: DevServer | undefined;
  let mirror: ImageMirror | undefined;
  let target: Target | undefined;
  let worker: WorkerProcess | undefined;
  let client: Client | undefined;
  let connection: Connection | undefined;
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await cleanUp(client, started, host).catch((err: unknown) => console.error(`cleanup: ${String(err)}`));
    await worker?.stop().catch(() => worker?.kill());
    await connection?.close().catch(() => undefined);
    await server?.stop();
    await target?.close();
    await mirror?.close();
    await rm(tmp, { recursive: true, force: true });
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      console.error(`${sig}: deleting the bench's proxies`);
      void stop().finally(() => process.exit(130));
    });
  }
  try {
    server = await startDevServer(PORT, 'steady-hosts');
    connection = await Connection.connect({ address: `127.0.0.1:${PORT}` });
    await ensureSearchAttributes(connection, 'default');
    client = new Client({ connection, namespace: 'default' });
    mirror = await ImageMirror.start();
    target = await startTarget(host.rootSideAddress, 'hello from the steady-state target\n');
    const config = fleetConfig({
      entry: ENTRY,
      ownerUid: `bench-${RUN_ID}`,
      hosts: [host],
      images: { [KEY]: { url: mirror.serve(`/${ENTRY}/proxy.qcow2`, image), sha256: sha256Hex(image) } },
      health: HEALTH,
      timeouts: { rpcMs: 60_000, downloadBodyIdleMs: 30_000, downloadTotalMs: 600_000, bootMs: HEALTHY_BOUND_MS },
    });
    // The health target is on the host's root-side (private) address: the entry allows it, as an operator's would.
    const entry = config.providers[0]!;
    entry.health.target = `${host.rootSideAddress}:${target.port}`;
    entry.squid.allowDestinations = [`${host.rootSideAddress}/32`];
    if (LOOPS.includes('host')) {
      config.providers.push({
        ...structuredClone(entry),
        name: HOST_ENTRY,
        health: { ...entry.health, monitor: 'host' },
      });
    }
    const providersFile = await writeProvidersFile(tmp, config);
    worker = await spawnWorker(providersFile, TQ, 120_000, { TEMPORAL_ADDRESS: `127.0.0.1:${PORT}` });
    const rows: Row[] = [];
    for (let run = 0; run < RUNS; run++) {
      const order = run % 2 === 0 ? LOOPS : [...LOOPS].reverse();
      for (const loop of order) {
        const row = await phase(client, server, worker, loop, run, started, host.name);
        rows.push(row);
        console.log(
          `  run ${run + 1} ${loop}: ${JSON.stringify(row, (_, v: unknown) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v))}`,
        );
      }
    }
    console.log(
      '\n| loop | events / proxy-hour | state transitions / proxy-hour | server CPU-s / min | worker CPU-s / min | server RSS MiB | worker RSS MiB | last probe age s (median) | last probe age s (oldest) | start to all Healthy s |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const loop of LOOPS) {
      const rs = rows.filter((r) => r.loop === loop);
      const f = (k: keyof Row, d: number) => fmtRange(spread(rs.map((r) => r[k] as number)), d);
      console.log(
        `| ${loop} | ${f('eventsPerHour', 0)} | ${f('transitionsPerHour', 0)} | ${f('serverCpuPerMin', 2)} | ${f('workerCpuPerMin', 2)} | ${f('serverRss', 0)} | ${f('workerRss', 0)} | ${f('probeAgeMedianS', 1)} | ${f('probeAgeMaxS', 1)} | ${f('healthyS', 0)} |`,
      );
    }
    for (const l of ['monitor', 'host'] as const) {
      const mon = rows.filter((r) => r.loop === l);
      if (mon.length === 0) continue;
      const ev = median(mon.map((r) => r.eventsPerHour));
      console.log(
        `\n${l}: goal <= 60 events per healthy proxy-hour (between transitions; the hourly checkpoint's 17-19 not included): ${ev <= 60 ? 'MET' : 'NOT MET'} (${ev.toFixed(1)})`,
      );
      const age = Math.max(...mon.map((r) => r.probeAgeMaxS));
      console.log(
        `${l}: last probe no older than one interval (${INTERVAL_MS / 1000} s) in the fresh status, plus up to 1 s for the probe and the query themselves: ${age <= INTERVAL_MS / 1000 + 1 ? 'MET' : 'NOT MET'} (oldest ${age.toFixed(1)} s)`,
      );
    }
    console.log(
      `\nload average at the end: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    await stop();
  }
}

await main();
process.exit(0);
