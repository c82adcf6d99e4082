// The Running phase with the health monitor (docs/health.md): one long-running activity
// (activities/monitor.ts) polls and probes the proxy and returns only when something the workflow
// records changed, so a healthy proxy adds no history between transitions. Here: hand the monitor
// the state, take back what it returns (a transition, a VM gone, a boot out of time, the hourly
// checkpoint), publish only what changed, recreate, resize and move (the monitor is cancelled for
// them, move.ts) and continue-as-new at the checkpoint. Delete cancels the monitor with the
// lifecycle's scope.
import {
  CancellationScope,
  condition,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../../activities/index.ts';
import { CODES } from '../../contracts/errors.ts';
import type { MonitorInput, MonitorResult } from '../../contracts/health.ts';
import type { ProxyOutcome, ResolvedProxy } from '../../contracts/proxy.ts';
import type { ImageWaiter } from '../image-join.ts';
import { continueOntoCurrentBuild } from '../upgrade.ts';
import { unwatchHost } from './host-watch.ts';
import { afterMonitor } from './host-reach.ts';
import { applyMove, mayContinueAsNew, moveAsked } from './move.ts';
import { reportToPool } from './pool-member.ts';
import { applyResize, recreate } from './running.ts';
import { nowIso, publishIfChanged, recordError, setState } from './publish.ts';
import { ProxyFailed } from './state.ts';
import type { ProxyRun } from './state.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';

/** The periodic checkpoint: the monitor returns and the run continues as new (a new worker build takes it up). */
export const CHECKPOINT_MS = 60 * 60 * 1000;
/** How much longer than one interval the monitor may go without a heartbeat before another worker takes it. */
export const HEARTBEAT_MARGIN_MS = 5_000;
/** The least heartbeat timeout. */
const MIN_HEARTBEAT_TIMEOUT_MS = 10_000;

/** The monitor's heartbeat timeout: one interval plus a margin (a dead worker's loop moves on within it). */
export function monitorHeartbeatTimeoutMs(h: Pick<ResolvedProxy['health'], 'intervalMs'>): number {
  return Math.max(h.intervalMs + HEARTBEAT_MARGIN_MS, MIN_HEARTBEAT_TIMEOUT_MS);
}

function monitorStub(h: ResolvedProxy['health']) {
  return proxyActivities<Activities>({
    heartbeatTimeout: monitorHeartbeatTimeoutMs(h),
    // Returns at the checkpoint; the margin covers a last slow poll.
    startToCloseTimeout: CHECKPOINT_MS + 2 * h.intervalMs + 60_000,
    // A lost worker's attempt is retried on another at once, for as long as the proxy runs.
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds' },
  });
}

/** Runs the proxy until it is deleted, cancelled or fails (or continues as new). */
export async function monitorLoop(run: ProxyRun, images: ImageWaiter, proxy: ResolvedProxy): Promise<void> {
  let r = proxy;
  setState(run, 'Running');
  run.status = { ...run.status, runningSince: run.status.runningSince ?? nowIso() };
  publishIfChanged(run);
  const checkpointAtMs = Date.now() + CHECKPOINT_MS;
  let waitFirst = false;
  for (;;) {
    if (moveAsked(run)) {
      await applyMove(run, images, r);
      waitFirst = false;
      continue;
    }
    const host = run.status.host!;
    const beforeError = run.status.lastError;
    const got = await watch(run, r, host, checkpointAtMs, waitFirst);
    waitFirst = true;
    if (got === 'move') continue;
    if (got === 'resize') {
      r = await applyResize(run, r, host);
      waitFirst = false;
      continue;
    }
    if (got === 'failed') {
      await sleep(r.health.intervalMs);
      continue;
    }
    const { state } = got;
    // The monitor started from the status of its start: what the workflow's handlers changed
    // since (a pool's serving signal) is the workflow's, not the monitor's.
    run.status = run.status.pool === undefined ? state.status : { ...state.status, pool: run.status.pool };
    run.missedPolls = state.missedPolls;
    run.addressedOnce = state.addressedOnce;
    run.polls = state.polls;
    const since = run.hostUnreachableSince;
    run.hostUnreachableSince = afterMonitor(since, beforeError, state, got.reason === 'VmLost');
    if (got.reason === 'VmLost') {
      await recreate(run, images, r, host, got.vmState ?? 'Missing', nowIso());
      waitFirst = false;
      continue;
    }
    if (got.reason === 'BootTimeout') {
      throw new ProxyFailed(CODES.bootTimeout, `no address was read within bootMs (${r.timeouts.bootMs} ms)`);
    }
    publishIfChanged(run);
    if (run.hostUnreachableSince !== since) reportToPool(run, nowIso());
    if (got.reason === 'Checkpoint' || workflowInfo().continueAsNewSuggested) {
      if (!(await mayContinueAsNew(run))) {
        // A resize handed over at the checkpoint is applied first (a move: at the loop's top).
        if (!moveAsked(run) && run.pendingResize !== undefined) {
          r = await applyResize(run, r, host);
          waitFirst = false;
        }
        continue;
      }
      await run.lastReport; // a pool member's last report reaches its pool first
      // The memo (the client's spec among it) goes along explicitly.
      await continueOntoCurrentBuild<(input: ProxyWorkflowInput) => Promise<ProxyOutcome>>({
        memo: workflowInfo().memo,
      })({ ...run.input, carried: run.carried(r) });
    }
  }
}

/**
 * One monitor activity, until it returns or a resize or a move is asked for (then it is
 * cancelled); 'failed' when the activity failed for good (recorded as the last error; the loop
 * tries again).
 */
async function watch(
  run: ProxyRun,
  r: ResolvedProxy,
  host: string,
  checkpointAtMs: number,
  waitFirst: boolean,
): Promise<MonitorResult | 'resize' | 'move' | 'failed'> {
  const input: MonitorInput & { waitFirst: boolean } = {
    proxy: r,
    host,
    state: {
      status: run.status,
      missedPolls: run.missedPolls,
      addressedOnce: run.addressedOnce,
      polls: run.polls,
    },
    checkpointAtMs,
    waitFirst,
  };
  if (run.startedAtMs !== undefined && !run.addressedOnce) input.bootDeadlineMs = run.startedAtMs + r.timeouts.bootMs;
  if (run.input.continueAsNewAfterPolls !== undefined) input.checkpointAfterPolls = run.input.continueAsNewAfterPolls;
  if (r.health.monitor === 'host') return watchOnHost(run, r, host, input);
  let result: MonitorResult | undefined;
  let error: Error | undefined;
  const scope = new CancellationScope();
  void scope
    .run(() => monitorStub(r.health).monitorProxy(input))
    .then(
      (res) => {
        result = res;
      },
      (err: unknown) => {
        error = err instanceof Error ? err : new Error(String(err));
      },
    );
  await condition(
    () => result !== undefined || error !== undefined || run.pendingResize !== undefined || moveAsked(run),
  );
  if (result !== undefined) return result;
  if (error !== undefined) {
    if (isCancellation(error)) throw error;
    recordError(run, error);
    return 'failed';
  }
  scope.cancel();
  return run.pendingResize !== undefined ? 'resize' : 'move';
}

/** The proxy's watch activity: a local one (a marker in history, no activity round trip through the server). */
const watchStub = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  localRetryThreshold: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 5 },
});

/**
 * {@link watch} through the host's monitor (`health.monitor: host`, contracts/host-monitor.ts):
 * asks it to watch this proxy (unless the current watch goes on: a transition does not end it),
 * then waits for its next verdict, a resize or a move. A verdict other than a transition ends the
 * watch; a resize, a move, a delete or a boot out of time unwatches it.
 */
async function watchOnHost(
  run: ProxyRun,
  r: ResolvedProxy,
  host: string,
  input: MonitorInput & { waitFirst: boolean },
): Promise<MonitorResult | 'resize' | 'move' | 'failed'> {
  if (run.hostWatch?.host !== host) {
    await unwatchHost(run);
    const token = `${workflowInfo().runId}/${++run.watches}`;
    try {
      await watchStub.watchOnHost({ entry: r.entry, host, workflowId: workflowInfo().workflowId, token, input });
    } catch (err) {
      if (isCancellation(err)) throw err;
      recordError(run, err instanceof Error ? err : new Error(String(err)));
      return 'failed';
    }
    run.hostWatch = { token, host, entry: r.entry, lastSeq: 0, verdicts: [] };
  }
  const w = run.hostWatch;
  // A delete cancels this wait; the way out (cleanup.ts finish) ends the watch.
  await condition(() => w.verdicts.length > 0 || run.pendingResize !== undefined || moveAsked(run));
  const v = w.verdicts.shift();
  if (v === undefined) {
    await unwatchHost(run);
    return run.pendingResize !== undefined ? 'resize' : 'move';
  }
  // The monitor stopped polling it: the next watch (after a recreate or a continue-as-new) replaces
  // it; a boot out of time ends the proxy, and its way out ends the watch.
  if (v.reason === 'VmLost' || v.reason === 'Checkpoint') run.hostWatch = undefined;
  const result: MonitorResult = { reason: v.reason, state: v.state };
  if (v.vmState !== undefined) result.vmState = v.vmState;
  return result;
}
