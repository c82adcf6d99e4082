// Provisioning throughput without a guest boot: N proxies (128 MiB, an empty qcow2 base that does
// not boot) started at once through the proxy workflow on the test hosts, with one worker process
// on the dev server. Reports time until all are Running, workflows per second, per-proxy
// control-plane time, where the time goes (activity execution vs waiting for a worker slot vs
// timers), libvirt RPCs per proxy, worker and Temporal server peak RSS; then deletes them all and
// times that too.
//
//   node bench/provision.ts [--n 10] [--n 50] [--n 100] [--hosts 2]
//
// Needs (as root): scripts/temporal up, test/hosts/testhost up 2. Leaves nothing behind.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { imageWorkflowId } from '../contracts/image.ts';
import { PROXY_DELETE_UPDATE, PROXY_STATUS_QUERY, PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../test/support/fleet.ts';
import { emptyQcow2 } from '../test/support/empty-image.ts';
import { ImageMirror } from '../test/support/mirror.ts';
import { connectClient, pollUntil, PROJECT_ROOT, uniqueId } from '../test/support/temporal.ts';
import { loadTestHosts } from '../test/support/testhosts.ts';
import { median, percentile as pct } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', multiple: true, default: ['10'] },
    hosts: { type: 'string', default: '2' },
  },
});

/** RSS of a process from /proc, in MiB (current and peak). */
async function rss(pid: number): Promise<{ now: number; peak: number }> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { now: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
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
      if (s.type === 'joinImage') joinedAt = at;
    } else if (e.workflowExecutionSignaledEventAttributes?.signalName === 'imageReady' && joinedAt !== undefined) {
      imageWaitMs += at - joinedAt;
      joinedAt = undefined;
    } else if (e.timerStartedEventAttributes) {
      timerStart.set(id, at);
    } else if (e.timerFiredEventAttributes) {
      timersMs += at - (timerStart.get(String(e.timerFiredEventAttributes.startedEventId)) ?? at);
    }
  }
  const spanMs = Math.min(untilMs, ms(history.events?.at(-1)?.eventTime)) - first;
  return { activities: out, timersMs, imageWaitMs, spanMs, events: history.events?.length ?? 0 };
}

async function temporalServerPid(): Promise<number | undefined> {
  try {
    return Number((await readFile(join(PROJECT_ROOT, '.data/temporal/server.pid'), 'utf8')).trim());
  } catch {
    return undefined;
  }
}

async function runOnce(client: Client, mirror: ImageMirror, image: Buffer, tmp: string, n: number): Promise<void> {
  const run = Date.now().toString(36);
  const entry = `bp${run}`;
  const hosts = loadTestHosts().slice(0, Number(values.hosts));
  const url = mirror.serve(`/${entry}/empty.qcow2`, image);
  const config = fleetConfig({
    entry,
    ownerUid: `bench-${run}`,
    hosts,
    images: { empty: { url } },
    health: { intervalMs: 15_000 },
  });
  const taskQueue = uniqueId('bench');
  const worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue);
  const serverPid = await temporalServerPid();
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
  const names = Array.from({ length: n }, (_, i) => `p${i}`);
  const t0 = performance.now();
  const handles: WorkflowHandle[] = await Promise.all(
    names.map((name) =>
      client.workflow.start(PROXY_WORKFLOW_TYPE, {
        workflowId: proxyWorkflowId(entry, name),
        taskQueue,
        args: [{ name, entry, imageKey: 'empty', vm: { memoryMiB: 128 } }],
      }),
    ),
  );
  const startedMs = performance.now() - t0;
  const running = new Set<string>();
  const statuses = new Map<string, ProxyStatus>();
  await pollUntil(
    async () => {
      await Promise.all(
        names
          .filter((nm) => !running.has(nm))
          .map(async (nm, i) => {
            const st = await handles[names.indexOf(nm)]!.query<ProxyStatus>(PROXY_STATUS_QUERY).catch(() => undefined);
            if (st?.state === 'Running') {
              running.add(nm);
              statuses.set(nm, st);
            }
            if (st?.state === 'Failed') throw new Error(`${nm} failed: ${st.reason}`);
            return i;
          }),
      );
      return running.size === n ? true : undefined;
    },
    { timeoutMs: 60_000 + n * 6_000, intervalMs: 250, what: `${n} proxies Running` },
  );
  const allRunningMs = performance.now() - t0;
  const rpcRunning = worker.lines.filter((l) => l.includes('"libvirt call')).length - rpcBefore;

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

  const d0 = performance.now();
  await Promise.all(handles.map((h) => h.executeUpdate(PROXY_DELETE_UPDATE)));
  await Promise.all(handles.map((h) => h.result()));
  const deleteMs = performance.now() - d0;
  const rpcTotal = worker.lines.filter((l) => l.includes('"libvirt call')).length - rpcBefore;
  clearInterval(sampler);
  const workerEnd = await rss(worker.child.pid!);
  await worker.stop();

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
  console.log(`delete all: ${f(deleteMs / 1000, 2)} s (${f(n / (deleteMs / 1000), 2)} proxies/s)`);
  console.log(
    `worker RSS: idle ${f(workerIdle.now)} MiB, peak ${f(Math.max(workerPeak, workerEnd.peak))} MiB; Temporal server RSS peak ${serverPid ? `${f(serverPeak)} MiB` : 'unknown (no pid file)'}`,
  );
}

const client = await connectClient();
const mirror = await ImageMirror.start();
const tmp = await mkdtemp(join(tmpdir(), 'ep-bench-'));
try {
  const image = await emptyQcow2(tmp);
  for (const n of values.n) await runOnce(client, mirror, image, tmp, Number(n));
} finally {
  await mirror.close();
  await client.connection.close();
  await rm(tmp, { recursive: true, force: true });
}
