// Provisioning throughput without a guest boot: N proxies (128 MiB, an empty qcow2 base that does
// not boot) started at once through the proxy workflow on the test hosts, with one worker process
// on the dev server. Reports time until all are Running, workflows per second, per-proxy
// control-plane time, where the time goes (activity execution vs waiting for a worker slot vs
// timers), libvirt RPCs per proxy, worker and Temporal server peak RSS; then deletes them all and
// times that too.
//
//   node bench/provision.ts [--n 10] [--n 50] [--n 100] [--hosts 2] [--runs 3] [--virsh]
//                           [--temporal dev] [--temporal cluster] [--starts 1] [--starts 64] [--timeline]
//                           [--worker-log FILE] [--one-at-a-time] [--worker cold|warm]
//
// --runs R repeats the whole set R times (alternating the Ns) and prints medians; --virsh runs
// bench/provision-virsh.sh beside each run (the raw floor: virsh over qemu+ssh://, one proxy at
// a time and ten scripts in parallel). Each run prints the load average before and after.
// --temporal picks the control plane (default dev: the dev server on 7233); `cluster` is
// `scripts/temporal cluster` (the Temporal server on PostgreSQL, mTLS; started here if down); both
// given alternate within each run, so the two are compared on the same machine state.
// --starts C sets every host's maxConcurrentStarts (domain starts at once; default one per host CPU);
// several alternate within each run like the control planes. --timeline prints the first proxy's
// history until Running, one line per event with its time. The bench sees the proxies reach
// Running by counting them by their state search attribute (one visibility call every 250 ms) and
// asks each status once at the end, so that its watching adds no query to the worker and the
// server beside the provisioning it watches. --worker-log appends the worker's log lines (JSON,
// one per line) of every run to FILE. --one-at-a-time adds, after each N, ours one proxy at a time
// (min(N, 10) proxies, each started when the one before is Running, on the dev server): the
// like-for-like figure beside the virsh script one at a time. --worker: `cold` (default) times the
// N proxies on a worker that has just started (each run starts its own), so its first workflow tasks,
// SSH links and code paths are paid for inside the timed burst; `warm` first takes WARM_UP proxies of
// another image through their whole life (Running, deleted) on that worker, as a worker in service
// has, then waits for its CPU to settle before the timed burst (whose base is still fetched and
// uploaded in it). Both given alternate within each run.
//
// Needs (as root): scripts/temporal up, test/hosts/testhost up 2. Leaves nothing behind.
import { execFile } from 'node:child_process';
import { appendFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { IMAGE_JOIN_SIGNAL, imageWorkflowId } from '../contracts/image.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_STATE } from '../contracts/search-attributes.ts';
import { PROXY_DELETE_UPDATE, PROXY_STATUS_QUERY, PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../test/support/fleet.ts';
import { emptyQcow2 } from '../test/support/empty-image.ts';
import { ImageMirror } from '../test/support/mirror.ts';
import { clusterEnv, clusterUp } from '../test/support/temporal-cluster.ts';
import { connectClient, pollUntil, PROJECT_ROOT, uniqueId } from '../test/support/temporal.ts';
import { loadTestHosts, removeEntryLeftovers } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { median, percentile as pct } from './lib/stats.ts';

const pexec = promisify(execFile);
const { values } = parseArgs({
  options: {
    n: { type: 'string', multiple: true, default: ['10'] },
    hosts: { type: 'string', default: '2' },
    runs: { type: 'string', default: '1' },
    virsh: { type: 'boolean', default: false },
    temporal: { type: 'string', multiple: true, default: ['dev'] },
    timeline: { type: 'boolean', default: false },
    starts: { type: 'string', multiple: true },
    'worker-log': { type: 'string' },
    'one-at-a-time': { type: 'boolean', default: false },
    worker: { type: 'string', multiple: true, default: ['cold'] },
  },
});
type WorkerState = 'cold' | 'warm';
for (const w of values.worker) {
  if (w !== 'cold' && w !== 'warm') throw new Error(`--worker must be cold or warm, got ${w}`);
}
const workerStates = values.worker as WorkerState[];
/** Proxies the warm-up takes through their life before a `--worker warm` run: two per test host. */
const WARM_UP = 4;
type Plane = 'dev' | 'cluster';
for (const t of values.temporal) {
  if (t !== 'dev' && t !== 'cluster') throw new Error(`--temporal must be dev or cluster, got ${t}`);
}
const planes = values.temporal as Plane[];
const startsList: (number | undefined)[] = (values.starts ?? []).map((v) => {
  const x = Number(v);
  if (!Number.isInteger(x) || x < 1 || x > 64) throw new Error(`--starts must be an integer from 1 to 64, got ${v}`);
  return x;
});
if (startsList.length === 0) startsList.push(undefined);
const loadavg = async (): Promise<string> => (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');

/** RSS of a process from /proc, in MiB (current and peak). */
async function rss(pid: number): Promise<{ now: number; peak: number }> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { now: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** CPU time of a process (user + system) from /proc, in seconds; 0 when it is gone. */
async function cpuSeconds(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // The fields after the command (which may hold spaces): utime and stime are the 12th and 13th.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11] ?? 0) + Number(f[12] ?? 0)) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

/**
 * CPU seconds of a process's threads by thread name (Node's main thread, the workflow threads,
 * V8's helpers, the SDK core's runtime, libuv's pool), prefixed `thread `. Threads that ended
 * between two snapshots are missed (the worker's are long-lived).
 */
async function threadSeconds(pid: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    const text = await readFile(`/proc/${pid}/task/${t}/stat`, 'utf8').catch(() => '');
    if (text === '') continue;
    const name = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const k = `thread ${name}`;
    out[k] = (out[k] ?? 0) + (Number(f[11] ?? 0) + Number(f[12] ?? 0)) / CLOCK_TICKS;
  }
  return out;
}

/** CPU seconds by who spent them: the machine (all CPUs, busy), every QEMU, the named processes. */
async function cpuSnapshot(named: Record<string, number | undefined>): Promise<Record<string, number>> {
  const stat = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
  const busy = stat.slice(0, 8).reduce((a, b) => a + b, 0) - stat[3]! - stat[4]!;
  let qemu = 0;
  for (const d of await readdir('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const comm = await readFile(`/proc/${d}/comm`, 'utf8').catch(() => '');
    if (comm.startsWith('qemu-system')) qemu += await cpuSeconds(Number(d));
  }
  const out: Record<string, number> = { machine: busy / CLOCK_TICKS, qemu };
  for (const [k, pid] of Object.entries(named)) if (pid !== undefined) out[k] = await cpuSeconds(pid);
  if (named['worker'] !== undefined) Object.assign(out, await threadSeconds(named['worker']));
  return out;
}

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;

/** Activity time from a history: execution (started→closed) and queue wait (scheduled→started), by type. */
async function whereTimeGoes(client: Client, workflowId: string, untilMs = Infinity) {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const first = ms(history.events?.[0]?.eventTime);
  const scheduled = new Map<string, { type: string; at: number }>();
  const started = new Map<string, number>();
  const out: Record<string, { execMs: number; waitMs: number; count: number }> = {};
  let timersMs = 0;
  let joinedAt: number | undefined;
  /** When the proxy had its base from the image workflow: its imageReady signal, or a join that found it. */
  let baseAt: number | undefined;
  let baseByJoin = false;
  let imageWaitMs = 0;
  const timerStart = new Map<string, number>();
  for (const e of history.events ?? []) {
    const at = ms(e.eventTime);
    if (at > untilMs) break;
    const id = String(e.eventId);
    if (e.activityTaskScheduledEventAttributes) {
      scheduled.set(id, { type: e.activityTaskScheduledEventAttributes.activityType?.name ?? '?', at });
    } else if (e.activityTaskStartedEventAttributes) {
      const sid = String(e.activityTaskStartedEventAttributes.scheduledEventId);
      started.set(sid, at);
      const s = scheduled.get(sid)!;
      (out[s.type] ??= { execMs: 0, waitMs: 0, count: 0 }).waitMs += at - s.at;
    } else if (e.activityTaskCompletedEventAttributes || e.activityTaskFailedEventAttributes) {
      const attrs = e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes!;
      const sid = String(attrs.scheduledEventId);
      const s = scheduled.get(sid)!;
      const o = (out[s.type] ??= { execMs: 0, waitMs: 0, count: 0 });
      o.execMs += at - (started.get(sid) ?? at);
      o.count += 1;
      if (s.type === 'joinImage') {
        // A join that found the base in the pool is the proxy's answer (no wait for the signal).
        const data = e.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
        const found = data !== undefined && data !== null && Buffer.from(data).toString('utf8') !== 'null';
        if (found && baseAt === undefined) {
          baseAt = at;
          baseByJoin = true;
        } else if (!found) joinedAt = at;
      }
    } else if (e.workflowExecutionSignaledEventAttributes?.signalName === 'imageReady') {
      baseAt ??= at;
      if (joinedAt !== undefined) imageWaitMs += at - joinedAt;
      joinedAt = undefined;
    } else if (e.timerStartedEventAttributes) {
      timerStart.set(id, at);
    } else if (e.timerFiredEventAttributes) {
      timersMs += at - (timerStart.get(String(e.timerFiredEventAttributes.startedEventId)) ?? at);
    }
  }
  const spanMs = Math.min(untilMs, ms(history.events?.at(-1)?.eventTime)) - first;
  return {
    activities: out,
    timersMs,
    imageWaitMs,
    spanMs,
    events: history.events?.length ?? 0,
    readyAtMs: baseAt,
    readyByJoin: baseByJoin,
  };
}

/**
 * One proxy's history until Running, one line per event: milliseconds since the workflow started,
 * the gap since the event before, the event type and, for activities and signals, what it was.
 */
async function printTimeline(client: Client, workflowId: string, untilMs: number): Promise<void> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const first = ms(events[0]?.eventTime);
  const names = new Map<string, string>();
  let prev = first;
  console.log(`timeline of ${workflowId} until Running (ms since start, +gap):`);
  for (const e of events) {
    const at = ms(e.eventTime);
    if (at > untilMs + 50) break;
    const type = Object.keys(e).find((k) => k.endsWith('EventAttributes') && (e as Record<string, unknown>)[k]) ?? '?';
    const attrs = (e as Record<string, Record<string, unknown> | undefined>)[type] ?? {};
    let what = '';
    if (e.activityTaskScheduledEventAttributes) {
      what = e.activityTaskScheduledEventAttributes.activityType?.name ?? '';
      names.set(String(e.eventId), what);
    } else if ('scheduledEventId' in attrs) what = names.get(String(attrs.scheduledEventId)) ?? '';
    else if (e.workflowExecutionSignaledEventAttributes)
      what = e.workflowExecutionSignaledEventAttributes.signalName ?? '';
    else if (e.markerRecordedEventAttributes) what = e.markerRecordedEventAttributes.markerName ?? '';
    console.log(
      `  ${String(Math.round(at - first)).padStart(6)} +${String(Math.round(at - prev)).padStart(5)}  ${type.replace('EventAttributes', '')} ${what}`,
    );
    prev = at;
  }
}

/**
 * When the ensure-image workflow's upload activity completed (server time, ms), and for each waiter when its join
 * signal is in the history (a signal that arrives during a workflow task is written when that
 * task completes) and whether the activity's broadcast told it.
 */
async function baseReadyAt(
  client: Client,
  workflowId: string,
): Promise<{ doneAt: number; joins: Map<string, number>; told: Set<string> } | undefined> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const done = history.events?.find((e) => e.activityTaskCompletedEventAttributes);
  if (!done) return undefined;
  const joins = new Map<string, number>();
  for (const e of history.events ?? []) {
    const a = e.workflowExecutionSignaledEventAttributes;
    if (a?.signalName !== IMAGE_JOIN_SIGNAL) continue;
    const { waiter } = JSON.parse(Buffer.from(a.input?.payloads?.[0]?.data ?? []).toString('utf8')) as {
      waiter?: string;
    };
    if (waiter !== undefined && !joins.has(waiter)) joins.set(waiter, ms(e.eventTime));
  }
  const data = done.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
  const result = data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { toldWaiters?: string[] }) : {};
  return { doneAt: ms(done.eventTime), joins, told: new Set(result.toldWaiters ?? []) };
}

async function temporalServerPid(plane: Plane): Promise<number | undefined> {
  const dir = plane === 'dev' ? '.data/temporal' : '.data/temporal-cluster';
  try {
    return Number((await readFile(join(PROJECT_ROOT, dir, 'server.pid'), 'utf8')).trim());
  } catch {
    return undefined;
  }
}

interface RunFigures {
  n: number;
  plane: Plane;
  allRunningMs: number;
  perProxyMedianMs: number;
  controlPlaneMs: number;
  readyLagMaxMs: number;
  load: string;
  starts: number | undefined;
  worker: WorkerState;
}

/** A control plane: a client on it and the variables that point a worker process at it. */
interface ControlPlane {
  plane: Plane;
  client: Client;
  workerEnv: Record<string, string>;
}

async function controlPlane(plane: Plane): Promise<ControlPlane> {
  if (plane === 'dev') return { plane, client: await connectClient(), workerEnv: {} };
  const s = await clusterUp();
  return { plane, client: await connectClient(s.address, s.namespace, { tls: s.tls }), workerEnv: clusterEnv(s) };
}

/** A providers file for a fresh entry on the test hosts (the empty image on the mirror) and a worker on it. */
async function benchWorker(
  cp: ControlPlane,
  mirror: ImageMirror,
  image: Buffer,
  tmp: string,
  starts: number | undefined,
) {
  const run = Date.now().toString(36);
  const entry = `bp${run}`;
  const hosts = loadTestHosts().slice(0, Number(values.hosts));
  const url = mirror.serve(`/${entry}/empty.qcow2`, image);
  // The same bytes under another key, for the warm-up's proxies: the timed ones still fetch and upload theirs.
  const warmUrl = mirror.serve(`/${entry}/warm.qcow2`, image);
  const config = fleetConfig({
    entry,
    ownerUid: `bench-${run}`,
    hosts,
    images: { empty: { url }, warm: { url: warmUrl } },
    health: { intervalMs: 15_000 },
  });
  // The guests never boot (an empty base) and each host has 2 CPUs: placement's default vCPU
  // overcommit (4) would hold all but 8 proxies per host in WaitingForCapacity.
  for (const h of config.providers[0]!.hosts) {
    h.cpuOvercommit = 1000;
    if (starts !== undefined) h.maxConcurrentStarts = starts;
  }
  const taskQueue = uniqueId('bench');
  const worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 60_000, cp.workerEnv);
  return { entry, hosts, worker, taskQueue };
}

/** Starts the bench's proxy `name` (128 MiB, image `imageKey`) on the run's task queue. */
function startProxy(client: Client, taskQueue: string, entry: string, name: string, imageKey: string) {
  return client.workflow.start(PROXY_WORKFLOW_TYPE, {
    workflowId: proxyWorkflowId(entry, name),
    taskQueue,
    args: [{ name, entry, imageKey, vm: { memoryMiB: 128 } }],
  });
}

/** Asks `h` for its status every `intervalMs` until it is Running (at most 120 s); a Failed one throws. */
function untilRunning(h: WorkflowHandle, intervalMs: number): Promise<ProxyStatus> {
  return pollUntil(
    async () => {
      const x = await h.query<ProxyStatus>(PROXY_STATUS_QUERY).catch(() => undefined);
      if (x?.state === 'Failed') throw new Error(`${h.workflowId} failed: ${x.reason}`);
      return x?.state === 'Running' ? x : undefined;
    },
    { timeoutMs: 120_000, intervalMs, what: `${h.workflowId} Running` },
  );
}

/** Deletes every proxy of `handles` and waits for their ends, whatever happened before (untimed teardown). */
async function deleteAll(handles: WorkflowHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined)));
  await Promise.all(handles.map((h) => h.result().catch(() => undefined)));
}

/**
 * Removes the run's base and marker (the deletes removed the rest) from each host, and anything a
 * failed run left; says what could not be removed.
 */
async function removeLeftovers(hosts: TestHost[], entry: string): Promise<void> {
  for (const h of hosts) {
    const left = await removeEntryLeftovers(h, entry);
    if (left.length > 0) console.error(`# could not remove from ${h.name}: ${left.join(', ')}`);
  }
}

/**
 * Ours one proxy at a time, as the virsh script one at a time: N proxies on the dev server, each
 * started when the one before it is Running. The first fetches and uploads the base; the figure is
 * the median start→Running of the others (the base in the pool, as the script's is).
 */
async function runOneAtATime(
  cp: ControlPlane,
  mirror: ImageMirror,
  image: Buffer,
  tmp: string,
  n: number,
): Promise<number> {
  const client = cp.client;
  const loadBefore = await loadavg();
  const { entry, hosts, worker, taskQueue } = await benchWorker(cp, mirror, image, tmp, undefined);
  const times: number[] = [];
  const handles: WorkflowHandle[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const h = await startProxy(client, taskQueue, entry, `s${i}`, 'empty');
      handles.push(h);
      const st = await untilRunning(h, 50);
      if (i > 0) times.push(Date.parse(st.runningSince!) - Date.parse(st.createdAt));
    }
  } finally {
    await deleteAll(handles);
    await worker.stop();
    await removeLeftovers(hosts, entry);
  }
  const f = (x: number): string => x.toFixed(0);
  console.log(
    `\n== one at a time, N = ${n} (dev server): start→Running of proxies 2-${n} (base in the pool): ` +
      `median ${f(median(times))} ms (${f(Math.min(...times))}-${f(Math.max(...times))}); load ${loadBefore} before, ${await loadavg()} after`,
  );
  return median(times);
}

/**
 * The warm-up of a `--worker warm` run: WARM_UP proxies of the `warm` image started together,
 * Running, deleted; then until the worker's CPU settles (under 50 ms in a second, at most 20 s).
 */
async function warmUp(client: Client, taskQueue: string, entry: string, workerPid: number): Promise<void> {
  const t0 = performance.now();
  const cpu0 = await cpuSeconds(workerPid);
  const handles = await Promise.all(
    Array.from({ length: WARM_UP }, (_, i) => startProxy(client, taskQueue, entry, `w${i}`, 'warm')),
  );
  try {
    for (const h of handles) await untilRunning(h, 100);
  } finally {
    await deleteAll(handles);
  }
  const lived = performance.now() - t0;
  let prev = await cpuSeconds(workerPid);
  let quiet = false;
  for (let i = 0; i < 20 && !quiet; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await cpuSeconds(workerPid);
    quiet = now - prev < 0.05;
    prev = now;
  }
  console.log(
    `warm-up: ${WARM_UP} proxies of another image Running and deleted in ${(lived / 1000).toFixed(2)} s; ` +
      `worker CPU ${(prev - cpu0).toFixed(2)} s; ${quiet ? 'settled' : 'NOT settled after 20 s'} ` +
      `${((performance.now() - t0 - lived) / 1000).toFixed(1)} s later`,
  );
}

async function runOnce(
  cp: ControlPlane,
  mirror: ImageMirror,
  image: Buffer,
  tmp: string,
  n: number,
  starts: number | undefined,
  workerState: WorkerState,
): Promise<RunFigures> {
  const client = cp.client;
  console.log(
    `\n-- control plane: ${cp.plane === 'dev' ? 'dev server (SQLite)' : 'cluster (PostgreSQL, mTLS)'}` +
      `; domain starts at once per host: ${starts ?? 'one per host CPU (the default)'}; worker ${workerState}`,
  );
  const loadBefore = await loadavg();
  const { entry, hosts, worker, taskQueue } = await benchWorker(cp, mirror, image, tmp, starts);
  if (workerState === 'warm') await warmUp(client, taskQueue, entry, worker.child.pid!);
  const serverPid = await temporalServerPid(cp.plane);
  let serverPeak = 0;
  let workerPeak = 0;
  const sampler = setInterval(() => {
    if (serverPid)
      void rss(serverPid).then(
        (r) => (serverPeak = Math.max(serverPeak, r.now)),
        () => undefined,
      );
    void rss(worker.child.pid!).then(
      (r) => (workerPeak = Math.max(workerPeak, r.now)),
      () => undefined,
    );
  }, 200);
  const workerIdle = await rss(worker.child.pid!);
  const rpcBefore = worker.lines.filter((l) => l.includes('"libvirt call')).length;
  const rpcLinesBefore = worker.lines.length;
  const names = Array.from({ length: n }, (_, i) => `p${i}`);
  // CPU until all Running, by who spent it (QEMU processes that ended meanwhile are not counted).
  const cpuOf = {
    worker: worker.child.pid,
    server: serverPid,
    ...Object.fromEntries(
      hosts.map((h) => [`libvirtd ${h.name}`, (h.pids as { libvirtd?: number } | undefined)?.libvirtd]),
    ),
  };
  const cpu0 = await cpuSnapshot(cpuOf);
  const t0 = performance.now();
  const handles: WorkflowHandle[] = await Promise.all(
    names.map((name) => startProxy(client, taskQueue, entry, name, 'empty')),
  );
  const startedMs = performance.now() - t0;
  const statuses = new Map<string, ProxyStatus>();
  const queryStatus = async (nm: string): Promise<ProxyStatus | undefined> => {
    const st = await handles[names.indexOf(nm)]!.query<ProxyStatus>(PROXY_STATUS_QUERY).catch(() => undefined);
    if (st?.state === 'Running') statuses.set(nm, st);
    if (st?.state === 'Failed') throw new Error(`${nm} failed: ${st.reason}`);
    return st;
  };
  const within = { timeoutMs: 60_000 + n * 6_000, intervalMs: 250, what: `${n} proxies Running` };
  // One visibility count four times a second (the state search attribute); the statuses are asked
  // once, after all are Running (runningSince comes from the status).
  const of = `${SA_PROVIDER_ENTRY} = '${entry}'`;
  await pollUntil(async () => {
    const [ok, failed] = await Promise.all([
      client.workflow.count(`${of} AND ${SA_PROXY_STATE} = 'Running'`),
      client.workflow.count(`${of} AND ${SA_PROXY_STATE} = 'Failed'`),
    ]);
    if (failed.count > 0) await Promise.all(names.map(queryStatus));
    return ok.count === n ? true : undefined;
  }, within);
  const allRunningMs = performance.now() - t0;
  const cpu1 = await cpuSnapshot(cpuOf);
  await Promise.all(names.map(queryStatus));
  const rpcRunning = worker.lines.filter((l) => l.includes('"libvirt call')).length - rpcBefore;
  // Each domain start's own call (QEMU starting, on the host), from the worker's line per libvirt call.
  const domainStarts = worker.lines
    .slice(rpcLinesBefore)
    .filter((l) => l.includes('"DOMAIN_CREATE"'))
    .map((l) => (JSON.parse(l) as { duration_ms?: number }).duration_ms ?? NaN)
    .filter(Number.isFinite);
  // Every libvirt call until all Running, by procedure: how many, and how long each took on the wire
  // and in libvirtd (the worker's line per call; queueing for a call slot is not in it).
  const byProc = new Map<string, number[]>();
  for (const l of worker.lines.slice(rpcLinesBefore)) {
    if (!l.includes('"libvirt call')) continue;
    const { proc, duration_ms: d } = JSON.parse(l) as { proc?: string; duration_ms?: number };
    if (proc !== undefined && d !== undefined) (byProc.get(proc) ?? byProc.set(proc, []).get(proc)!).push(d);
  }

  const perProxy = [...statuses.values()].map((s) => Date.parse(s.runningSince!) - Date.parse(s.createdAt));
  const perHost = new Map<string, number>();
  for (const s of statuses.values()) perHost.set(s.host!, (perHost.get(s.host!) ?? 0) + 1);
  // The transfer itself: the ensureBaseImage activity of each host's image workflow.
  const imageRuns = await Promise.all(
    hosts.map(async (h) => {
      const w = await whereTimeGoes(client, imageWorkflowId(h.name, entry, 'empty')).catch(() => undefined);
      return w?.activities['ensureBaseImage']?.execMs ?? NaN;
    }),
  );
  // How long after that run's upload activity completed each proxy that joined an ensure-image run
  // had the base: its imageReady signal, or its join's own look in the pool (negative: the
  // activity's broadcast came before its completion was recorded).
  const readyAt = new Map<string, Awaited<ReturnType<typeof baseReadyAt>>>();
  for (const h of hosts)
    readyAt.set(h.name, await baseReadyAt(client, imageWorkflowId(h.name, entry, 'empty')).catch(() => undefined));
  const lags: number[] = [];
  let worst: { name: string; lag: number; joinedMs?: number; told: boolean; byJoin: boolean } | undefined;
  let byJoin = 0;
  for (const nm of names) {
    const w = await whereTimeGoes(client, proxyWorkflowId(entry, nm));
    const base = readyAt.get(statuses.get(nm)!.host!);
    if (w.readyAtMs === undefined || base === undefined) continue;
    const lag = w.readyAtMs - base.doneAt;
    lags.push(lag);
    if (w.readyByJoin) byJoin++;
    if (worst === undefined || lag > worst.lag) {
      const id = proxyWorkflowId(entry, nm);
      const joined = base.joins.get(id);
      worst = {
        name: nm,
        lag,
        joinedMs: joined === undefined ? undefined : joined - base.doneAt,
        byJoin: w.readyByJoin,
        told: base.told.has(id),
      };
    }
  }
  const sample = await Promise.all(
    names
      .slice(0, Math.min(5, n))
      .map((nm) => whereTimeGoes(client, proxyWorkflowId(entry, nm), Date.parse(statuses.get(nm)!.runningSince!))),
  );
  // Start to Running of the sampled proxies, split: activities executing, activities waiting for a
  // worker slot, durable timers (boot polls), and the rest (workflow tasks: scheduling, dispatch).
  const split = sample.map((w) => {
    const exec = Object.values(w.activities).reduce((a, v) => a + v.execMs, 0);
    const wait = Object.values(w.activities).reduce((a, v) => a + v.waitMs, 0);
    const image = w.imageWaitMs;
    return {
      total: w.spanMs,
      exec,
      wait,
      timers: w.timersMs,
      image,
      other: w.spanMs - exec - wait - w.timersMs - image,
    };
  });
  const byType: Record<string, { execMs: number[]; waitMs: number[] }> = {};
  for (const s of sample) {
    for (const [t, v] of Object.entries(s.activities)) {
      const b = (byType[t] ??= { execMs: [], waitMs: [] });
      b.execMs.push(v.execMs / Math.max(1, v.count));
      b.waitMs.push(v.waitMs / Math.max(1, v.count));
    }
  }

  if (values.timeline)
    await printTimeline(client, proxyWorkflowId(entry, names[0]!), Date.parse(statuses.get(names[0]!)!.runningSince!));

  const d0 = performance.now();
  await Promise.all(handles.map((h) => h.executeUpdate(PROXY_DELETE_UPDATE)));
  await Promise.all(handles.map((h) => h.result()));
  const deleteMs = performance.now() - d0;
  const rpcTotal = worker.lines.filter((l) => l.includes('"libvirt call')).length - rpcBefore;
  clearInterval(sampler);
  const workerEnd = await rss(worker.child.pid!);
  await worker.stop();
  await removeLeftovers(hosts, entry);
  if (values['worker-log']) await appendFile(values['worker-log'], worker.lines.map((l) => `${l}\n`).join(''));

  const f = (x: number, d = 0): string => x.toFixed(d);
  console.log(
    `\n== N = ${n} proxies on ${hosts.length} host(s) (${[...perHost].map(([h, c]) => `${h}: ${c}`).join(', ')})`,
  );
  console.log(
    `started ${n} workflows in ${f(startedMs)} ms; all Running after ${f(allRunningMs / 1000, 2)} s; ${f(n / (allRunningMs / 1000), 2)} proxies/s`,
  );
  console.log(
    `per proxy, workflow start to Running: median ${f(median(perProxy))} ms, p90 ${f(pct(perProxy, 0.9))} ms, max ${f(Math.max(...perProxy))} ms`,
  );
  console.log(
    `image fetch + upload (${image.length} bytes, once per host, the ensureBaseImage activity): ${imageRuns.map((x) => `${f(x)} ms`).join(', ')}`,
  );
  console.log(
    `control plane per proxy excluding the transfer (median start→Running minus the longest transfer): ${f(median(perProxy) - Math.max(...imageRuns.filter(Number.isFinite)))} ms`,
  );
  console.log(
    `libvirt RPCs: ${rpcRunning} until all Running (${f(rpcRunning / n, 1)} per proxy, host surveys and polls included); ${rpcTotal} with the deletes (${f(rpcTotal / n, 1)} per proxy)`,
  );
  if (domainStarts.length > 0) {
    console.log(
      `domain starts (DOMAIN_CREATE calls, QEMU starting on the host): ${domainStarts.length}, median ${f(median(domainStarts))} ms, ` +
        `max ${f(Math.max(...domainStarts))} ms, sum ${f(domainStarts.reduce((a, b) => a + b, 0) / 1000, 1)} s`,
    );
  }
  console.log(
    `libvirt calls until all Running, by procedure (calls per proxy, median / p90 ms): ` +
      [...byProc]
        .sort((a, b) => b[1].length - a[1].length)
        .map(([p, d]) => `${p} ${f(d.length / n, 1)} ${f(median(d))}/${f(pct(d, 0.9))}`)
        .join(', '),
  );
  {
    const d = (k: string): number => (cpu1[k] ?? NaN) - (cpu0[k] ?? NaN);
    const libvirtd = Object.keys(cpu1)
      .filter((k) => k.startsWith('libvirtd '))
      .reduce((a, k) => a + d(k), 0);
    const known = d('qemu') + libvirtd + d('server') + d('worker');
    console.log(
      `CPU seconds until all Running: machine ${f(d('machine'), 1)} of ${f((allRunningMs / 1000) * cpus().length, 1)} ` +
        `(${cpus().length} CPUs x ${f(allRunningMs / 1000, 2)} s): QEMU ${f(d('qemu'), 1)}, libvirtd ${f(libvirtd, 1)}, ` +
        `Temporal server ${f(d('server'), 1)}, worker ${f(d('worker'), 1)}, the rest (bench, sshd, kernel) ${f(d('machine') - known, 1)}`,
    );
    const threads = Object.keys(cpu1)
      .filter((k) => k.startsWith('thread '))
      .map((k) => [k.slice(7), d(k)] as const)
      .filter(([, v]) => v >= 0.01)
      .sort((a, b) => b[1] - a[1]);
    console.log(`  the worker's by thread: ${threads.map(([k, v]) => `${k} ${f(v, 2)}`).join(', ')}`);
  }
  console.log('where the time goes (sample of 5 proxies, per activity call: execution / waiting for a worker slot):');
  for (const [t, v] of Object.entries(byType)) {
    console.log(
      `  ${t.padEnd(16)} exec median ${f(median(v.execMs)).padStart(6)} ms   queue median ${f(median(v.waitMs)).padStart(6)} ms`,
    );
  }
  console.log(
    `start→Running of the sample, medians: total ${f(median(split.map((x) => x.total)))} ms = activities executing ` +
      `${f(median(split.map((x) => x.exec)))} + waiting for a slot ${f(median(split.map((x) => x.wait)))} + timers ` +
      `${f(median(split.map((x) => x.timers)))} + waiting for the image workflow ${f(median(split.map((x) => x.image)))} + ` +
      `workflow tasks and dispatch ${f(median(split.map((x) => x.other)))}`,
  );
  console.log(
    lags.length === 0
      ? 'base in hand after the base was ready: no proxy joined an ensure-image run'
      : `base in hand after the base was ready (${lags.length} proxies joined; ${byJoin} found it with their join, ` +
          `the rest by imageReady): median ${f(median(lags))} ms, max ${f(Math.max(...lags))} ms` +
          (worst
            ? ` (${worst.name}: its join in the image history ${worst.joinedMs === undefined ? 'not found (a later run)' : `${f(worst.joinedMs)} ms after the upload completed`}; ` +
              `${worst.byJoin ? 'found by its join' : worst.told ? 'told by the broadcast' : 'not in the broadcast, told by the workflow'})`
            : ''),
  );
  console.log(`delete all: ${f(deleteMs / 1000, 2)} s (${f(n / (deleteMs / 1000), 2)} proxies/s)`);
  console.log(
    `worker RSS: idle ${f(workerIdle.now)} MiB, peak ${f(Math.max(workerPeak, workerEnd.peak))} MiB; Temporal server RSS peak ${serverPid ? `${f(serverPeak)} MiB` : 'unknown (no pid file)'}`,
  );
  const load = `${loadBefore} before, ${await loadavg()} after`;
  console.log(`load average (1, 5, 15 min): ${load}`);
  return {
    n,
    plane: cp.plane,
    allRunningMs,
    perProxyMedianMs: median(perProxy),
    controlPlaneMs: median(perProxy) - Math.max(...imageRuns.filter(Number.isFinite)),
    readyLagMaxMs: lags.length ? Math.max(...lags) : NaN,
    load,
    starts,
    worker: workerState,
  };
}

/** bench/provision-virsh.sh: the same steps by virsh over qemu+ssh://, N proxies by `parallel` scripts. */
async function virshFloor(n: number, parallel: number): Promise<{ totalMs: number; perProxyMs: number }> {
  try {
    const { stdout } = await pexec(join(PROJECT_ROOT, 'bench/provision-virsh.sh'), [String(n), String(parallel)], {
      timeout: 30 * 60_000,
    });
    const line = JSON.parse(stdout.trim().split('\n').at(-1)!) as { totalMs: number; perProxyMs: number };
    console.log(
      `virsh floor, N = ${n} by ${parallel} script(s): all started after ${(line.totalMs / 1000).toFixed(2)} s, ${line.perProxyMs} ms per proxy per script (load ${await loadavg()})`,
    );
    return line;
  } catch (err) {
    console.log(`virsh floor, N = ${n} by ${parallel} script(s): FAILED: ${String(err)}`);
    return { totalMs: NaN, perProxyMs: NaN };
  }
}

const cps: ControlPlane[] = [];
for (const p of planes) cps.push(await controlPlane(p));
const mirror = await ImageMirror.start();
const tmp = await mkdtemp(join(tmpdir(), 'ep-bench-'));
try {
  const image = await emptyQcow2(tmp);
  // Alternating: each run does every N on every control plane (and the virsh floor beside it),
  // then the next run.
  const ours = new Map<string, RunFigures[]>();
  const seq = new Map<number, number[]>();
  const par = new Map<number, number[]>();
  const single = new Map<number, number[]>();
  for (let r = 0; r < Number(values.runs); r++) {
    for (const n of values.n.map(Number)) {
      for (const cp of cps) {
        for (const st of startsList) {
          for (const ws of workerStates) {
            const fig = await runOnce(cp, mirror, image, tmp, n, st, ws);
            const key = `${cp.plane}/${n}/${st ?? 'default'}/${ws}`;
            ours.set(key, [...(ours.get(key) ?? []), fig]);
          }
        }
      }
      if (values['one-at-a-time']) {
        const dev = cps.find((c) => c.plane === 'dev') ?? cps[0]!;
        single.set(n, [...(single.get(n) ?? []), await runOneAtATime(dev, mirror, image, tmp, Math.min(n, 10))]);
      }
      if (values.virsh) {
        // One proxy at a time (at most 10 of them: the per-proxy time does not depend on N), and
        // ten scripts in parallel creating all N.
        const one = await virshFloor(Math.min(n, 10), 1);
        seq.set(n, [...(seq.get(n) ?? []), one.perProxyMs]);
        const ten = await virshFloor(n, Math.min(10, n));
        par.set(n, [...(par.get(n) ?? []), ten.totalMs]);
      }
    }
  }
  console.log(`\n== summary over ${values.runs} run(s), medians (min-max)`);
  const mm = (xs: number[]): string =>
    `${(median(xs) / 1000).toFixed(2)} s (${(Math.min(...xs) / 1000).toFixed(2)}-${(Math.max(...xs) / 1000).toFixed(2)})`;
  for (const [, figs] of ours) {
    const n = figs[0]!.n;
    const st =
      (figs[0]!.starts === undefined ? '' : `, maxConcurrentStarts ${figs[0]!.starts}`) +
      (workerStates.length > 1 || figs[0]!.worker === 'warm' ? `, worker ${figs[0]!.worker}` : '');
    console.log(
      `${figs[0]!.plane}${st}, N = ${n}: all Running ${mm(figs.map((x) => x.allRunningMs))}; control plane per proxy ${mm(figs.map((x) => x.controlPlaneMs))}; ` +
        `base in hand after the base, worst ${mm(figs.map((x) => x.readyLagMaxMs).filter(Number.isFinite))}`,
    );
    const s1 = seq.get(n);
    const s10 = par.get(n);
    const o1 = single.get(n);
    if (o1) {
      console.log(
        `  ours one at a time: ${mm(o1)} per proxy` +
          (s1 ? ` (ours / virsh one at a time = ${(median(o1) / median(s1)).toFixed(2)}, like for like)` : ''),
      );
    }
    if (s1 && s10) {
      const cp = median(figs.map((x) => x.controlPlaneMs));
      const all = median(figs.map((x) => x.allRunningMs));
      console.log(
        `  virsh: one at a time ${mm(s1)} per proxy (ours / virsh = ${(cp / median(s1)).toFixed(2)}, goal <= 1.5); ` +
          `ten scripts for all ${n}: ${mm(s10)} (ours / virsh = ${(all / median(s10)).toFixed(2)}, goal <= 1)`,
      );
    }
  }
  if (cps.length === 2) {
    for (const n of values.n.map(Number)) {
      const dev = ours.get(`dev/${n}/${startsList[0] ?? 'default'}/${workerStates[0]}`)!;
      const cl = ours.get(`cluster/${n}/${startsList[0] ?? 'default'}/${workerStates[0]}`)!;
      const ratio = (f: (x: RunFigures) => number): string => (median(cl.map(f)) / median(dev.map(f))).toFixed(2);
      console.log(
        `cluster / dev, N = ${n}: all Running ${ratio((x) => x.allRunningMs)}, control plane per proxy ${ratio((x) => x.controlPlaneMs)}`,
      );
    }
  }
} finally {
  await mirror.close();
  for (const cp of cps) await cp.client.connection.close();
  await rm(tmp, { recursive: true, force: true });
}
