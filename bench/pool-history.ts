/**
 * What a pool's history costs at size: the real pool workflow driven to N members (1,000 and 100 by
 * default) on a Temporal dev server of its own, its members real proxy workflows. Read from the
 * pool's recorded history (every run of its continue-as-new chain), per N: the bytes of an
 * update's events (accepted + completed), of a member's report (one `member` signal event), the
 * continue-as-new input (the carried state) beside the same state in the shape builds before 0.2.1
 * carried it (every member a full record: the anchor), each run's whole history, and the events the
 * pool records at rest. The limits beside them: the SDK's payload warning (512 KiB, the server's
 * `limit.blobSize.warn`) and the server's blob limit (2 MiB).
 *
 * The hosts and guests are SIMULATED (bench/lib/host-double.ts: a VM that runs, an address, a probe
 * that passes, here with an exit IP read through the probe): what the pool records comes from its
 * members' reports, which are the real proxy workflows' (workflows/proxy/pool-member.ts) with every
 * field a real member with an exit IP sends. The pool's activities are the real ones.
 *
 *   node bench/pool-history.ts [--n 1000,100] [--passes 200] [--rest-s 330] [--interval-ms 15000] [--port 7393]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import { createHostMonitorActivities } from '../activities/host-monitor.ts';
import { createMonitorActivities } from '../activities/monitor.ts';
import { createPoolActivities } from '../activities/pool.ts';
import { poolScaleUpdate } from '../contracts/messages.ts';
import { POOL_MEMBER_SIGNAL, POOL_WORKFLOW_TYPE, poolWorkflowId } from '../contracts/pool.ts';
import type { PoolSpec } from '../contracts/pool.ts';
import type { PoolWorkflowInput } from '../contracts/pool-state.ts';
import type { ProbeOutcome, ProxySpec, ResolvedProxy, VmReading } from '../contracts/proxy.ts';
import { poolTaskQueue } from '../contracts/task-queues.ts';
import { uncarried } from '../workflows/pool/carry.ts';
import type { poolWorkflow } from '../workflows/pool/index.ts';
import { benchWorker, cpuSeconds, installQuietRuntime, rssMiB, startDevServer } from './lib/dev-server.ts';
import { hostDouble } from './lib/host-double.ts';
import { HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { median } from './lib/stats.ts';

const USAGE = `node bench/pool-history.ts [options]   (hosts and guests simulated in-process)

  --n N[,N...]        pool sizes, one pool each, in this order (default 1000,100)
  --passes P          the pools' continueAsNewAfterPasses (default 200): after Ready, scale
                      updates (one pass each) until the run continues as new
  --rest-s S          the window at rest after the continue-as-new (default 330: one 5-minute audit)
  --interval-ms MS    the members' health interval (default 15000)
  --port P            the bench's own Temporal dev server (default 7393)`;

const { values } = parseArgs({
  options: {
    ...HELP_OPTION,
    n: { type: 'string', default: '1000,100' },
    passes: { type: 'string', default: '200' },
    'rest-s': { type: 'string', default: '330' },
    'interval-ms': { type: 'string', default: '15000' },
    port: { type: 'string', default: '7393' },
  },
});
printUsageIfAsked(values, USAGE);
const whole = (name: string, v: string): number => {
  const n = Number(v);
  if (!(Number.isInteger(n) && n > 0)) throw new Error(`--${name}: a whole number above 0, got ${v}`);
  return n;
};
const SIZES = values.n.split(',').map((v) => whole('n', v));
const PASSES = whole('passes', values.passes);
const REST_MS = whole('rest-s', values['rest-s']) * 1000;
const INTERVAL_MS = whole('interval-ms', values['interval-ms']);
const PORT = whole('port', values.port);
const ENTRY = 'bench';
const TQ = `pool-history-${Date.now().toString(36)}`;
const KiB = 1024;
const WARN_BYTES = 512 * KiB;
const BLOB_LIMIT_BYTES = 2 * 1024 * KiB;

type Event = proto.temporal.api.history.v1.IHistoryEvent;
const eventBytes = (e: Event): number => proto.temporal.api.history.v1.HistoryEvent.encode(e).finish().length;

/** The host double with an exit IP: the probe answers one when the monitor asks (health.egressIpUrl set). */
function activities(client: Client, hosts: number): object {
  const d = hostDouble(ENTRY, INTERVAL_MS, { hosts, client, taskQueue: TQ, monitor: () => 'host' });
  const readProxyVm = d.readProxyVm as (input: { proxy: ResolvedProxy; host: string }) => Promise<VmReading>;
  const probeProxy = (input: { ip: string; readExitIp?: boolean }): Promise<ProbeOutcome> =>
    Promise.resolve({
      ok: true,
      latencyMs: 1.5,
      ...(input.readExitIp === true ? { exitIp: `198.51.100.${input.ip.split('.').at(-1)}` } : {}),
    });
  return {
    ...d,
    resolveProxy: async (spec: ProxySpec): Promise<ResolvedProxy> => {
      const r = await d.resolveProxy(spec);
      return { ...r, health: { ...r.health, egressIpUrl: 'http://exit-ip.invalid/' } };
    },
    probeProxy,
    ...createMonitorActivities({ readProxyVm, probeProxy }),
    ...createHostMonitorActivities({ readProxyVm, probeProxy }, client, TQ),
    ...createPoolActivities(client, TQ),
  };
}

/** Waits until the pool's memo says Ready with `n` available (bounded); returns the ms it took. */
async function ready(h: WorkflowHandle, n: number): Promise<number> {
  const t0 = Date.now();
  const deadline = t0 + 300_000 + 1_500 * n;
  let memo: Record<string, unknown> | undefined;
  while (Date.now() < deadline) {
    memo = (await h.describe().catch(() => undefined))?.memo;
    if (memo?.['phase'] === 'Ready' && memo['available'] === n) return Date.now() - t0;
    await sleep(2_000);
  }
  throw new Error(`pool of ${n} not Ready in time; memo ${JSON.stringify(memo)}`);
}

interface RunFigures {
  runId: string;
  events: number;
  bytes: number;
  /** The server's own figure (describe's historySizeBytes). */
  serverBytes: number;
  /** Workflow tasks completed (a pass of the reconciler is one, or a few). */
  tasks: number;
  /** The run's bytes less its first event and its continue-as-new event (the carried state, in and out). */
  passBytes: number;
  updates: number[];
  signals: number[];
  /** The continue-as-new input: its bytes, its members, the same state in the full-record shape (the anchor). */
  carried?: { bytes: number; members: number; fullBytes: number };
}

/** Every run of the pool's chain, first to current, measured from its history. */
async function chain(client: Client, workflowId: string, firstRunId: string): Promise<RunFigures[]> {
  const out: RunFigures[] = [];
  for (let runId: string | undefined = firstRunId; runId !== undefined;) {
    const h = client.workflow.getHandle(workflowId, runId);
    const events = (await h.fetchHistory()).events ?? [];
    const serverBytes = Number((await h.describe()).raw.workflowExecutionInfo?.historySizeBytes ?? 0);
    const accepted = new Map<string, number>();
    const updates: number[] = [];
    const signals: number[] = [];
    let carried: RunFigures['carried'];
    let next: string | undefined;
    for (const e of events) {
      const b = eventBytes(e);
      const acc = e.workflowExecutionUpdateAcceptedEventAttributes;
      const done = e.workflowExecutionUpdateCompletedEventAttributes;
      if (acc) accepted.set(acc.acceptedRequest?.meta?.updateId ?? '', b);
      if (done) updates.push(b + (accepted.get(done.meta?.updateId ?? '') ?? 0));
      if (e.workflowExecutionSignaledEventAttributes?.signalName === POOL_MEMBER_SIGNAL) signals.push(b);
      const can = e.workflowExecutionContinuedAsNewEventAttributes;
      if (can) {
        next = can.newExecutionRunId ?? undefined;
        const data = can.input?.payloads?.[0]?.data ?? new Uint8Array();
        const input = JSON.parse(Buffer.from(data).toString('utf8')) as PoolWorkflowInput;
        const state = input.carried === undefined ? undefined : uncarried(input.carried);
        const full = JSON.stringify({ ...input, carried: state }).length;
        carried = { bytes: data.length, members: state?.members.length ?? 0, fullBytes: full };
      }
    }
    const bytes = events.reduce((a, e) => a + eventBytes(e), 0);
    const tasks = events.filter((e) => e.workflowTaskCompletedEventAttributes != null).length;
    // What the passes wrote: the run's first event (its input, the carried state) and its
    // continue-as-new event (the next run's) aside.
    const ends = events.filter((e, i) => i === 0 || e.workflowExecutionContinuedAsNewEventAttributes != null);
    const passBytes = bytes - ends.reduce((a, e) => a + eventBytes(e), 0);
    out.push({
      runId,
      events: events.length,
      bytes,
      serverBytes,
      tasks,
      passBytes,
      updates,
      signals,
      ...(carried ? { carried } : {}),
    });
    runId = next;
  }
  return out;
}

const kib = (b: number): string => (b / KiB).toFixed(1);
const med = (xs: number[]): string =>
  xs.length === 0 ? '—' : `${median(xs).toFixed(0)} (${Math.min(...xs)}-${Math.max(...xs)})`;

async function onePool(client: Client, n: number, serverPid: number): Promise<void> {
  const spec: PoolSpec = { entry: ENTRY, name: `hist${n}`, size: n, template: { imageKey: 'img' } };
  const h = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
    taskQueue: poolTaskQueue(TQ),
    workflowId: poolWorkflowId(ENTRY, spec.name),
    args: [{ spec, continueAsNewAfterPasses: PASSES }],
  });
  const fillMs = await ready(h, n);
  // Updates at rest (a scale to the same size: one pass each) until the run continues as new
  // (bounded by the pass limit).
  const before = (await h.describe()).runId;
  let sent = 0;
  while (sent < PASSES + 5 && (await h.describe()).runId === before) {
    await h.executeUpdate(poolScaleUpdate, { args: [{ size: n }] });
    sent++;
  }
  await sleep(5_000);
  const rest = client.workflow.getHandle(h.workflowId);
  const restRun = (await rest.describe()).runId;
  const e0 = (await rest.describe()).historyLength;
  const cpu0 = cpuSeconds(serverPid);
  await sleep(REST_MS);
  const e1 = (await rest.describe()).historyLength;
  const restCpu = cpuSeconds(serverPid) - cpu0;
  const restEvents = (await client.workflow.getHandle(h.workflowId, restRun).fetchHistory()).events?.slice(e0) ?? [];
  const runs = await chain(client, h.workflowId, h.firstExecutionRunId);

  console.log(
    `\n## N = ${n}: Ready in ${(fillMs / 1000).toFixed(0)} s; ${sent} scale updates after Ready; ${runs.length} runs`,
  );
  console.log(
    '| run | events | history KiB (events encoded) | server historySizeBytes KiB | workflow tasks | B / task (start and continue-as-new events aside) | member signals | updates | carried KiB | carried members | B / member | full-record shape KiB |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const [i, r] of runs.entries()) {
    const c = r.carried;
    console.log(
      `| ${i + 1} | ${r.events} | ${kib(r.bytes)} | ${kib(r.serverBytes)} | ${r.tasks} | ${(r.passBytes / Math.max(1, r.tasks)).toFixed(0)} | ${r.signals.length} | ${r.updates.length} | ${c ? kib(c.bytes) : '—'} | ${c?.members ?? '—'} | ${c && c.members > 0 ? (c.bytes / c.members).toFixed(0) : '—'} | ${c ? kib(c.fullBytes) : '—'} |`,
    );
  }
  const all = <K extends 'updates' | 'signals'>(k: K): number[] => runs.flatMap((r) => r[k]);
  const atRest = runs.filter((r) => r.carried !== undefined).at(-1)?.carried;
  console.log(
    `- bytes per update (accepted + completed events), median (min-max) of ${all('updates').length}: ${med(all('updates'))}`,
  );
  console.log(
    `- bytes per member report (one signal event), median (min-max) of ${all('signals').length}: ${med(all('signals'))}`,
  );
  if (atRest !== undefined) {
    console.log(
      `- the continue-as-new at rest: ${kib(atRest.bytes)} KiB carried (${(atRest.bytes / atRest.members).toFixed(0)} B a member, ${atRest.members} members), ` +
        `${((100 * atRest.bytes) / WARN_BYTES).toFixed(0)} % of the payload warning (512 KiB), ${((100 * atRest.bytes) / BLOB_LIMIT_BYTES).toFixed(0)} % of the blob limit (2 MiB); ` +
        `the full-record shape: ${kib(atRest.fullBytes)} KiB (${((100 * atRest.fullBytes) / WARN_BYTES).toFixed(0)} % of the warning)`,
    );
  }
  const kinds: Record<string, number> = {};
  for (const e of restEvents) {
    const kind = proto.temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType);
    kinds[kind.replace(/^EVENT_TYPE_/, '')] = (kinds[kind.replace(/^EVENT_TYPE_/, '')] ?? 0) + 1;
  }
  console.log(
    `- at rest: ${e1 - e0} events in ${(REST_MS / 1000).toFixed(0)} s (${(((e1 - e0) * 3_600_000) / REST_MS).toFixed(0)} per hour; the 5-minute audit included), ` +
      `server CPU ${restCpu.toFixed(1)} s in the window; events ${JSON.stringify(kinds)}`,
  );
  await h.terminate('bench over').catch(() => undefined);
}

async function main(): Promise<void> {
  console.log(
    `pool-history: N = ${SIZES.join(', ')}, continueAsNewAfterPasses ${PASSES}, rest window ${REST_MS / 1000} s, health interval ${INTERVAL_MS} ms; ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; ${new Date().toISOString()}\n` +
      'HOSTS AND GUESTS ARE SIMULATED (an in-process host double); the members are real proxy workflows, the dev server is one of its own (SQLite)',
  );
  installQuietRuntime();
  const server = await startDevServer(PORT, 'pool-history');
  try {
    const maxN = Math.max(...SIZES);
    const w = await benchWorker(PORT, TQ, (client) => activities(client, Math.max(1, Math.ceil(maxN / 100))), {
      activities: Math.max(200, maxN + 50),
      workflows: 250,
      pools: true,
    });
    const runAll =
      w.pools === undefined
        ? w.worker.runUntil.bind(w.worker)
        : (fn: () => Promise<void>) => w.worker.runUntil(() => w.pools!.runUntil(fn));
    await runAll(async () => {
      for (const n of SIZES) await onePool(w.client, n, server.pid);
    });
    await w.connection.close();
    console.log(
      `\nworker RSS ${rssMiB('self').toFixed(0)} MiB; load average at the end ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; ${new Date().toISOString()}`,
    );
  } finally {
    await server.stop();
  }
}

await main();
process.exit(0);
