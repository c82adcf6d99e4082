// The health monitor of one Running proxy: a long-running activity that polls the VM (state and
// address) and probes its Squid every health interval, folds each poll into the monitor state
// (contracts/health.ts, the same folds the workflow's older loop uses), heartbeats that state on
// every poll, and returns to the workflow only when something the workflow records changed (Healthy,
// the address, the exit IP: read with a probe at most once per egressIpIntervalMs), the VM is gone, a boot ran out of time, or the checkpoint came. A retry (the worker
// died: the heartbeat timeout) resumes from the last heartbeat's state, so the hysteresis counters
// and the H3 grace count survive it. Cancellation (delete, resize) arrives through the heartbeat.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { FailureDetails } from '../contracts/errors.ts';
import { CODES } from '../contracts/errors.ts';
import { foldProbe, foldReading, monitorKey, pollWaitMs, probeAddress, verdictAfter } from '../contracts/health.ts';
import type { MonitorDetails, MonitorInput, MonitorReason, MonitorResult, MonitorState } from '../contracts/health.ts';
import { exitIpChange, exitIpDue } from '../contracts/exit-ip.ts';
import type { ProbeOutcome, ProxyError, VmReading } from '../contracts/proxy.ts';
import type { WorkerMetrics } from './metrics.ts';

/** What the monitor loop needs from the world (the real one below; the workflow tests' fake). */
export interface MonitorIo {
  read(): Promise<VmReading>;
  /** One probe of `ip`; with `readExitIp`, a passing one also reads the exit IP (contracts/exit-ip.ts). */
  probe(ip: string, readExitIp: boolean): Promise<ProbeOutcome>;
  /** The exit IP was read for the first time (`from` absent) or changed: logged, a change counted. */
  exitIpChanged?(change: { from?: string; to: string }): void;
  /** Epoch ms. */
  now(): number | Promise<number>;
  /** Waits `ms`; rejects when the activity is cancelled. */
  wait(ms: number): Promise<void>;
  heartbeat(details: MonitorDetails): void;
  /** The details of the previous attempt's last heartbeat, if this attempt is a retry. */
  resumed(): MonitorDetails | undefined;
}

/** The details of a retried attempt, when they are a monitor state for this proxy. */
export function resumedDetails(input: MonitorInput, details: unknown): MonitorDetails | undefined {
  const d = details as Partial<MonitorDetails> | undefined;
  const st = d?.state;
  if (st === undefined || st.status?.name !== input.proxy.name || typeof st.missedPolls !== 'number') return undefined;
  return { state: st };
}

/** Polls until a verdict (contracts/health.ts monitorVerdict); returns it with the state. */
export async function runMonitor(input: MonitorInput & { waitFirst?: boolean }, io: MonitorIo): Promise<MonitorResult> {
  const h = input.proxy.health;
  const known = input.state;
  const resumed = io.resumed();
  let state: MonitorState = resumed?.state ?? known;
  io.heartbeat({ state });
  // After a return the workflow starts the next monitor at once: its first poll keeps the cadence
  // of the state it was handed (a booting proxy's fast poll, else the interval), so a return on the
  // address does not hold the first probes of a booting proxy back by an interval.
  if (input.waitFirst === true && resumed === undefined) await io.wait(pollWaitMs(state.status, h));
  const knownKey = monitorKey(known);
  for (;;) {
    const polled = await pollOnce(input, knownKey, state, io);
    state = polled.state;
    if (polled.reason !== undefined) {
      const result: MonitorResult = { reason: polled.reason, state };
      if (polled.vmState !== undefined) result.vmState = polled.vmState;
      return result;
    }
    io.heartbeat({ state });
    await io.wait(pollWaitMs(state.status, h));
  }
}

/**
 * One poll: the VM read, its address folded (H3), the probe when there is an address, and the
 * verdict against the watched values the workflow last heard of (`knownKey`); the per-proxy
 * monitor above and the host monitor (activities/host-monitor.ts) both poll through it.
 */
export async function pollOnce(
  input: MonitorInput,
  knownKey: string,
  before: MonitorState,
  io: Pick<MonitorIo, 'read' | 'probe' | 'exitIpChanged' | 'now'>,
): Promise<{ state: MonitorState; reason?: MonitorReason; vmState?: string }> {
  const h = input.proxy.health;
  let reading: VmReading | undefined;
  let readError: ProxyError | undefined;
  try {
    reading = await io.read();
  } catch (err) {
    if (Context.current().cancellationSignal.aborted) throw err;
    readError = errorOf(err, new Date(await io.now()).toISOString());
  }
  const at = new Date(await io.now()).toISOString();
  const folded = foldReading({ ...before, polls: before.polls + 1 }, { reading, readError }, h, at);
  let state = folded.state;
  const ip = folded.lost === undefined ? probeAddress(state, h) : undefined;
  if (ip !== undefined) {
    const prior = state.status;
    const outcome = await io.probe(ip, exitIpDue(prior, h, await io.now()));
    state = foldProbe(state, outcome, h, new Date(await io.now()).toISOString(), input.proxy.timeouts.bootMs);
    const change = exitIpChange(prior, state.status);
    if (change !== undefined) io.exitIpChanged?.(change);
  }
  const reason = verdictAfter(input, knownKey, state, await io.now(), folded.lost);
  if (reason === undefined) return { state };
  return folded.lost === undefined ? { state, reason } : { state, reason, vmState: folded.lost };
}

/** A failed read as the status's last error (the error table's kind and code). */
function errorOf(err: unknown, at: string): ProxyError {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof ApplicationFailure) {
    const d = err.details?.[0] as Partial<FailureDetails> | undefined;
    return { kind: d?.kind ?? 'Transient', code: d?.code ?? err.type ?? CODES.unclassified, message, at };
  }
  return { kind: 'Transient', code: CODES.unclassified, message, at };
}

/** How often the monitor heartbeats while a read or a probe is in flight (they may take longer than its timeout's margin). */
const BUSY_HEARTBEAT_MS = 2_000;

/** Runs `fn`, heartbeating `last()` every BUSY_HEARTBEAT_MS meanwhile (a slow read or probe must not look like a dead worker). */
export async function heartbeatWhile<T>(ctx: Context, last: () => unknown, fn: () => Promise<T>): Promise<T> {
  const beat = setInterval(() => ctx.heartbeat(last()), BUSY_HEARTBEAT_MS);
  try {
    return await fn();
  } finally {
    clearInterval(beat);
  }
}

/** The exit IP read for the first time (logged) or changed (logged as a warning, counted in `metrics`). */
export function logExitIpChange(
  ctx: Context,
  proxy: { entry: string; name: string } | undefined,
  { from, to }: { from?: string; to: string },
  metrics?: WorkerMetrics,
): void {
  const fields = { entry: proxy?.entry, proxy: proxy?.name, exitIp: to };
  if (from === undefined) {
    ctx.log.info('exit IP recorded', fields);
    return;
  }
  ctx.log.warn('exit IP changed', { ...fields, previousExitIp: from });
  if (proxy !== undefined) metrics?.exitIpChanges.inc({ entry: proxy.entry });
}

/** Heartbeats and waits of the running activity; exit-IP changes logged (and counted in `metrics`). */
export function activityIo(
  read: MonitorIo['read'],
  probe: MonitorIo['probe'],
  proxy?: { entry: string; name: string },
  metrics?: WorkerMetrics,
): MonitorIo {
  const ctx = Context.current();
  let last: MonitorDetails | undefined;
  const busy = <T>(fn: () => Promise<T>): Promise<T> => heartbeatWhile(ctx, () => last, fn);
  return {
    read: () => busy(read),
    probe: (ip, readExitIp) => busy(() => probe(ip, readExitIp)),
    exitIpChanged: (change) => logExitIpChange(ctx, proxy, change, metrics),
    now: () => Date.now(),
    wait: (ms) => ctx.sleep(ms),
    heartbeat: (d) => {
      last = d;
      ctx.heartbeat(d);
    },
    resumed: () => undefined,
  };
}

/** The monitor activity over the proxy activities' own read and probe (one SSH link per host, shared). */
export function createMonitorActivities(
  proxy: {
    readProxyVm(input: { proxy: MonitorInput['proxy']; host: string }): Promise<VmReading>;
    probeProxy(input: {
      proxy: MonitorInput['proxy'];
      host: string;
      ip: string;
      readExitIp?: boolean;
    }): Promise<ProbeOutcome>;
  },
  metrics?: WorkerMetrics,
) {
  return {
    /** Polls and probes one Running proxy until something the workflow records changes (see above). */
    async monitorProxy(input: MonitorInput & { waitFirst?: boolean }): Promise<MonitorResult> {
      const { proxy: p, host } = input;
      const io = activityIo(
        () => proxy.readProxyVm({ proxy: p, host }),
        (ip, readExitIp) => proxy.probeProxy({ proxy: p, host, ip, readExitIp }),
        p,
        metrics,
      );
      const info = Context.current().info;
      const resumed = info.attempt > 1 ? resumedDetails(input, info.heartbeatDetails) : undefined;
      return runMonitor(input, { ...io, resumed: () => resumed });
    },
  };
}
