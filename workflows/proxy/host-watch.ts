// A proxy's watch at its host's monitor (host-monitor.ts): ending it. A file of its own so the way
// out (cleanup.ts) and the loop that starts watches (monitor-loop.ts) share it without a cycle.
import { CancellationScope, getExternalWorkflowHandle, workflowInfo } from '@temporalio/workflow';
import { hostMonitorWorkflowId } from '../../contracts/host-monitor.ts';
import { hostUnwatchSignal } from '../../contracts/messages.ts';
import type { ProxyRun } from './state.ts';

/**
 * Ends the run's watch at its host's monitor, if it has one (not cancellable); a monitor that is not
 * running has nothing to end. A delete's comes from the way out (cleanup.ts), not from the wait the
 * delete cancelled: there its signal would race the delete update's completion in the history.
 */
export async function unwatchHost(run: ProxyRun): Promise<void> {
  const w = run.hostWatch;
  if (w === undefined) return;
  run.hostWatch = undefined;
  const monitor = getExternalWorkflowHandle(hostMonitorWorkflowId(w.entry, w.host));
  await CancellationScope.nonCancellable(() =>
    monitor.signal(hostUnwatchSignal, { workflowId: workflowInfo().workflowId, token: w.token }),
  ).catch(() => undefined);
}
