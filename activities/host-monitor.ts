// The host monitor's activity (docs/health.md "One monitor per host"): one long-running loop per
// provider entry and host that polls and probes every proxy its workflow watches, through the same
// poll as the per-proxy monitor (activities/monitor.ts pollOnce: the H3 grace, the hysteresis, the
// exit IP), heartbeats once per round for all of them, and signals a proxy's workflow only on a
// verdict (a transition, the VM gone, a boot out of time, the checkpoint). The watches come from
// its workflow's query every WATCHES_POLL_MS (a query writes no history); a retry (the worker
// died) resumes every watch's counters from the last heartbeat.
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { monitorKey, pollWaitMs } from '../contracts/health.ts';
import type {
  HostMonitorActivityInput,
  HostMonitorActivityResult,
  HostMonitorDetails,
  HostVerdict,
  HostWatch,
  HostWatches,
  WatchState,
} from '../contracts/host-monitor.ts';
import { HOST_MONITOR_WORKFLOW_TYPE, hostMonitorWorkflowId } from '../contracts/host-monitor.ts';
import { hostWatchesQuery, hostWatchSignal, proxyMonitorVerdictSignal } from '../contracts/messages.ts';
import type { ProbeOutcome, ResolvedProxy, VmReading } from '../contracts/proxy.ts';
import type { WorkerMetrics } from './metrics.ts';
import { heartbeatWhile, logExitIpChange, pollOnce } from './monitor.ts';

/** How often the activity asks its workflow for the watches (a new one waits at most this long for its first poll). */
export const WATCHES_POLL_MS = 2_000;
/** With nothing to watch for this long the activity returns (the workflow ends unless a watch came meanwhile). */
export const IDLE_RETURN_MS = 60_000;
/** Polls of one round run at most this many at once (the host's one SSH link carries them). */
export const ROUND_CONCURRENCY = 32;
/** Watches due within this much of a round are polled in it (one heartbeat for more of them). */
const DUE_SLACK_MS = 250;

/** What the host loop needs from the world (the real one below; the tests' fakes). */
export interface HostMonitorIo {
  /** The workflow's watches, when they changed since `version` (hostWatchesQuery). */
  watches(version: number): Promise<HostWatches>;
  read(w: HostWatch): Promise<VmReading>;
  probe(w: HostWatch, ip: string, readExitIp: boolean): Promise<ProbeOutcome>;
  /** Signals the verdict to the watch's workflow: `gone` when that workflow is closed or not found. */
  tell(w: HostWatch, v: HostVerdict): Promise<'told' | 'gone'>;
  exitIpChanged?(w: HostWatch, change: { from?: string; to: string }): void;
  /** A poll, a query or a signal that failed (logged; the loop goes on). */
  failed?(what: string, err: unknown, w?: HostWatch): void;
  now(): number;
  /** Waits `ms`; rejects when the activity is cancelled. */
  wait(ms: number): Promise<void>;
  heartbeat(details: HostMonitorDetails): void;
  /** The previous attempt's last heartbeat details, when this attempt is a retry. */
  resumed(): HostMonitorDetails | undefined;
  /** Heartbeats every `ms` while `fn` runs. */
  busy<T>(fn: () => Promise<T>): Promise<T>;
}

/** Runs `fns` at most `limit` at once. */
async function bounded(fns: (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < fns.length) await fns[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(limit, fns.length) }, lane));
}

/**
 * When a watch is polled next: after a wait of one interval, at the host's next round (a point of
 * the grid `anchorMs + k × wait`, no sooner than half a wait from now), so the proxies of a host are
 * polled together and their one heartbeat follows the round; shorter waits (a booting proxy's
 * second) are not snapped.
 */
export function nextDueMs(nowMs: number, waitMs: number, intervalMs: number, anchorMs: number): number {
  if (waitMs < intervalMs) return nowMs + waitMs;
  return anchorMs + Math.ceil((nowMs + waitMs / 2 - anchorMs) / waitMs) * waitMs;
}

/**
 * A new watch's state: from the workflow's last known state; polled at once, or with `waitFirst`
 * after the wait the per-proxy monitor takes (pollWaitMs: a booting proxy's second, else an interval).
 */
function started(w: HostWatch, nowMs: number): WatchState {
  const st = w.input.state;
  const first = w.input.waitFirst === true ? pollWaitMs(st.status, w.input.proxy.health) : 0;
  return { token: w.token, seq: 0, state: st, knownKey: monitorKey(st), dueAtMs: nowMs + first };
}

/** Polls every watched proxy when it is due until the checkpoint, an idle spell, or the workflow asks to return. */
export async function runHostMonitor(
  input: HostMonitorActivityInput,
  io: HostMonitorIo,
): Promise<HostMonitorActivityResult> {
  const { heartbeatEveryMs } = input;
  const states = new Map<string, WatchState>(Object.entries(io.resumed()?.watches ?? input.states ?? {}));
  const watches = new Map<string, HostWatch>();
  const gone = new Set<string>();
  let version = -1;
  let readAtMs = -Infinity;
  let beatAtMs = -Infinity;
  let idleSinceMs: number | undefined;
  const anchorMs = io.now();
  const beat = (): void => {
    io.heartbeat({ watches: Object.fromEntries(states) });
    beatAtMs = io.now();
  };
  const result = (reason: HostMonitorActivityResult['reason']): HostMonitorActivityResult => ({
    reason,
    states: Object.fromEntries(states),
    gone: [...gone],
  });
  const take = (list: HostWatch[], nowMs: number): void => {
    watches.clear();
    for (const w of list) {
      watches.set(w.workflowId, w);
      const s = states.get(w.workflowId);
      if (s === undefined || s.token !== w.token) states.set(w.workflowId, started(w, nowMs));
    }
    for (const id of [...states.keys()]) if (!watches.has(id)) states.delete(id);
  };
  const poll = async (id: string): Promise<void> => {
    const w = watches.get(id)!;
    const s = states.get(id)!;
    const pio = {
      read: () => io.read(w),
      probe: (ip: string, readExitIp: boolean) => io.probe(w, ip, readExitIp),
      exitIpChanged: (c: { from?: string; to: string }) => io.exitIpChanged?.(w, c),
      now: () => io.now(),
    };
    let next: WatchState;
    try {
      const polled = await pollOnce(w.input, s.knownKey, s.state, pio);
      const h = w.input.proxy.health;
      next = {
        ...s,
        state: polled.state,
        dueAtMs: nextDueMs(io.now(), pollWaitMs(polled.state.status, h), h.intervalMs, anchorMs),
      };
      if (polled.reason !== undefined) {
        const v: HostVerdict = { token: s.token, seq: s.seq + 1, reason: polled.reason, state: polled.state };
        if (polled.vmState !== undefined) v.vmState = polled.vmState;
        // Not told (the server did not answer): the watched values stay as the proxy knows them, so
        // the next poll's verdict tells it again.
        const told = await io.tell(w, v).catch((err: unknown) => {
          io.failed?.('verdict signal', err, w);
          return undefined;
        });
        if (told === 'gone') {
          next = { ...next, done: true };
          gone.add(id);
        } else if (told === 'told') {
          next = { ...next, seq: v.seq, knownKey: monitorKey(polled.state) };
          if (polled.reason !== 'Transition') next.done = true;
        }
      }
    } catch (err) {
      if (Context.current().cancellationSignal.aborted) throw err;
      io.failed?.('poll', err, w);
      const i = w.input.proxy.health.intervalMs;
      next = { ...s, dueAtMs: nextDueMs(io.now(), i, i, anchorMs) };
    }
    states.set(id, next);
  };

  beat();
  for (;;) {
    const nowMs = io.now();
    if (nowMs - readAtMs >= WATCHES_POLL_MS) {
      readAtMs = nowMs;
      try {
        const r = await io.watches(version);
        if (r.watches !== undefined) {
          take(r.watches, io.now());
          version = r.version;
        }
        if (r.checkpoint === true) return result('Checkpoint');
      } catch (err) {
        if (Context.current().cancellationSignal.aborted) throw err;
        io.failed?.('watches query', err);
      }
    }
    if (io.now() >= input.checkpointAtMs) return result('Checkpoint');
    const live = [...states].filter(([id, s]) => s.done !== true && watches.has(id));
    if (live.length === 0 && version >= 0) {
      idleSinceMs ??= nowMs;
      if (nowMs - idleSinceMs >= IDLE_RETURN_MS) return result('Idle');
    } else idleSinceMs = undefined;
    const due = live.filter(([, s]) => s.dueAtMs <= io.now() + DUE_SLACK_MS).map(([id]) => id);
    if (due.length > 0) {
      await io.busy(() =>
        bounded(
          due.map((id) => () => poll(id)),
          ROUND_CONCURRENCY,
        ),
      );
      beat();
    } else if (io.now() - beatAtMs >= heartbeatEveryMs) beat();
    const wakes = [readAtMs + WATCHES_POLL_MS, beatAtMs + heartbeatEveryMs, input.checkpointAtMs];
    for (const [id, s] of states) if (s.done !== true && watches.has(id)) wakes.push(s.dueAtMs);
    await io.wait(Math.max(50, Math.min(...wakes) - io.now()));
  }
}

/** The previous attempt's details, when they are a host monitor's. */
export function resumedHostDetails(details: unknown): HostMonitorDetails | undefined {
  const d = details as Partial<HostMonitorDetails> | undefined;
  return d !== undefined && d !== null && typeof d.watches === 'object' && d.watches !== null
    ? { watches: d.watches }
    : undefined;
}

type ProxyReads = {
  readProxyVm(input: { proxy: ResolvedProxy; host: string }): Promise<VmReading>;
  probeProxy(input: { proxy: ResolvedProxy; host: string; ip: string; readExitIp?: boolean }): Promise<ProbeOutcome>;
};

/** The host monitor activity and the proxy's watch activity, over the proxy activities' own read and probe. */
export function createHostMonitorActivities(
  proxy: ProxyReads,
  client: Client,
  taskQueue: string,
  metrics?: WorkerMetrics,
) {
  return {
    /** Polls and probes every proxy the host's monitor workflow watches (see above). */
    async monitorHost(input: HostMonitorActivityInput): Promise<HostMonitorActivityResult> {
      const ctx = Context.current();
      const own = client.workflow.getHandle(hostMonitorWorkflowId(input.entry, input.host));
      let last: HostMonitorDetails | undefined;
      const resumed = ctx.info.attempt > 1 ? resumedHostDetails(ctx.info.heartbeatDetails) : undefined;
      const io: HostMonitorIo = {
        watches: (version) => own.query(hostWatchesQuery, version),
        read: (w) => proxy.readProxyVm({ proxy: w.input.proxy, host: input.host }),
        probe: (w, ip, readExitIp) => proxy.probeProxy({ proxy: w.input.proxy, host: input.host, ip, readExitIp }),
        tell: async (w, v) => {
          try {
            await client.workflow.getHandle(w.workflowId).signal(proxyMonitorVerdictSignal, v);
            return 'told';
          } catch (err) {
            if (err instanceof WorkflowNotFoundError) return 'gone';
            throw err;
          }
        },
        exitIpChanged: (w, change) => logExitIpChange(ctx, w.input.proxy, change, metrics),
        failed: (what, err, w) => {
          ctx.log.warn(`host monitor: ${what} failed`, {
            host: input.host,
            ...(w ? { proxy: w.input.proxy.name } : {}),
            err: err instanceof Error ? err.message : String(err),
          });
        },
        now: () => Date.now(),
        wait: (ms) => ctx.sleep(ms),
        heartbeat: (d) => {
          last = d;
          ctx.heartbeat(d);
        },
        resumed: () => resumed,
        busy: (fn) => heartbeatWhile(ctx, () => last, fn),
      };
      return runHostMonitor(input, io);
    },

    /** Asks the host's monitor to watch a proxy: signal-with-start of its workflow (one per entry and host). */
    async watchOnHost(w: HostWatch & { entry: string; host: string }): Promise<void> {
      const { entry, host, ...watch } = w;
      await client.workflow.signalWithStart(HOST_MONITOR_WORKFLOW_TYPE, {
        workflowId: hostMonitorWorkflowId(entry, host),
        taskQueue,
        args: [{ entry, host }],
        signal: hostWatchSignal,
        signalArgs: [watch],
      });
    },
  };
}
