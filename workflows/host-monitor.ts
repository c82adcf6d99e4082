// A host's health monitor (docs/health.md "One monitor per host"), ID `health/<entry>/<host>`:
// holds the watches of the proxies on that host that use it (`providers[].health.monitor: host`)
// and runs one long-running activity (activities/host-monitor.ts) that polls and probes them all
// and signals each proxy only on its verdicts. A watch arrives by signal-with-start (the proxy's
// watch activity) and replaces that proxy's earlier one; an unwatch ends it. The activity reads the
// watches by query, so a new watch costs this workflow one signal and no activity restart. The
// activity returns hourly (a new worker build takes it up), when the history grows long (asked
// through the query's answer) or after a minute with nothing to watch; the run then continues as
// new with the watches and their counters, or ends when none are left.
import { allHandlersFinished, condition, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import type { HostMonitorWorkflowInput, HostWatch, WatchState } from '../contracts/host-monitor.ts';
import { hostUnwatchSignal, hostWatchesQuery, hostWatchSignal } from '../contracts/messages.ts';
import { CHECKPOINT_MS, monitorHeartbeatTimeoutMs } from './proxy/monitor-loop.ts';
import { continueOntoCurrentBuild } from './upgrade.ts';

/** The history length past which the activity is asked to return so the run continues as new. */
export const HOST_MONITOR_HISTORY_LIMIT = 4_000;

function monitorStub(intervalMs: number) {
  return proxyActivities<Activities>({
    heartbeatTimeout: monitorHeartbeatTimeoutMs({ intervalMs }),
    startToCloseTimeout: CHECKPOINT_MS + 2 * intervalMs + 60_000,
    // A lost worker's attempt is retried on another at once, for as long as proxies are watched.
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds' },
  });
}

export async function hostMonitorWorkflow(input: HostMonitorWorkflowInput): Promise<void> {
  const { entry, host } = input;
  const watches = new Map<string, HostWatch>((input.watches ?? []).map((w) => [w.workflowId, w]));
  let states: Record<string, WatchState> = input.states ?? {};
  let version = 0;
  const long = (): boolean =>
    workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > HOST_MONITOR_HISTORY_LIMIT;

  setHandler(hostWatchSignal, (w) => {
    watches.set(w.workflowId, w);
    version++;
  });
  setHandler(hostUnwatchSignal, ({ workflowId, token }) => {
    if (watches.get(workflowId)?.token !== token) return;
    watches.delete(workflowId);
    version++;
  });
  setHandler(hostWatchesQuery, (since) =>
    since === version
      ? { version, checkpoint: long() }
      : { version, watches: [...watches.values()], checkpoint: long() },
  );

  for (;;) {
    if (watches.size === 0) {
      // Nothing to watch: the run ends (after the signals handled); the next watch starts a new one.
      await condition(allHandlersFinished);
      if (watches.size === 0) return;
    }
    const intervalMs = Math.max(...[...watches.values()].map((w) => w.input.proxy.health.intervalMs));
    const res = await monitorStub(intervalMs).monitorHost({
      entry,
      host,
      states,
      checkpointAtMs: Date.now() + CHECKPOINT_MS,
      heartbeatEveryMs: intervalMs,
    });
    states = res.states;
    for (const id of res.gone) {
      watches.delete(id);
      delete states[id];
    }
    // Watches the monitor ended (a VM gone, a boot out of time, a checkpoint told) and their proxy did
    // not replace: none will be polled again, so they leave (a proxy's next watch comes by signal).
    for (const [id, st] of Object.entries(states)) {
      if (st.done !== true) continue;
      if (watches.get(id)?.token === st.token) watches.delete(id);
      delete states[id];
    }
    if (res.reason === 'Checkpoint' || long()) {
      await condition(allHandlersFinished);
      await continueOntoCurrentBuild<typeof hostMonitorWorkflow>()({
        entry,
        host,
        watches: [...watches.values()],
        states,
      });
    }
  }
}
