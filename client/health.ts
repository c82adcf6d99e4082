// A proxy's status as fresh as its health monitor: the status query (the workflow's state at the
// last transition) with the counters and last probe of the monitor activity's last heartbeat,
// which `describe` returns among the pending activities (docs/health.md); for a proxy its host's
// monitor watches (`health.monitor: host`), that monitor's heartbeat holds its entry among all of
// the host's. No history is read.
import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { withMonitorDetails } from '../contracts/health.ts';
import type { MonitorDetails } from '../contracts/health.ts';
import { HOST_MONITOR_ACTIVITY, hostMonitorWorkflowId } from '../contracts/host-monitor.ts';
import type { HostMonitorDetails } from '../contracts/host-monitor.ts';
import { proxyStatusQuery } from '../contracts/messages.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';

/** The activity type of the health monitor (activities/monitor.ts). */
export const MONITOR_ACTIVITY = 'monitorProxy';

/** The monitor's last heartbeat details and when the server got them, or undefined (no monitor pending). */
export async function monitorHeartbeat(
  handle: WorkflowHandle,
  activityType: string = MONITOR_ACTIVITY,
): Promise<{ details: unknown; at?: Date; attempt: number } | undefined> {
  const d = await handle.describe();
  for (const a of d.raw.pendingActivities ?? []) {
    if (a.activityType?.name !== activityType) continue;
    const p = a.heartbeatDetails?.payloads?.[0];
    if (!p) return undefined;
    const secs = a.lastHeartbeatTime?.seconds;
    const at = secs == null ? undefined : new Date(Number(secs) * 1000 + (a.lastHeartbeatTime?.nanos ?? 0) / 1e6);
    return { details: defaultPayloadConverter.fromPayload(p), at, attempt: a.attempt ?? 1 };
  }
  return undefined;
}

/** The proxy's entry in its host monitor's last heartbeat (as the proxy's own monitor's details), or undefined. */
export async function hostMonitorHeartbeat(
  handle: WorkflowHandle,
  st: Pick<ProxyStatus, 'entry' | 'host'>,
): Promise<{ details: MonitorDetails; at?: Date } | undefined> {
  if (st.host === undefined) return undefined;
  const monitor = handle.client.getHandle(hostMonitorWorkflowId(st.entry, st.host));
  const beat = await monitorHeartbeat(monitor, HOST_MONITOR_ACTIVITY);
  const mine = (beat?.details as Partial<HostMonitorDetails> | undefined)?.watches?.[handle.workflowId];
  return mine === undefined ? undefined : { details: { state: mine.state }, at: beat?.at };
}

/** The status query's answer with the monitor's fresher counters merged in (contracts/health.ts). */
export async function freshProxyStatus(handle: WorkflowHandle): Promise<ProxyStatus> {
  const [st, beat] = await Promise.all([
    handle.query(proxyStatusQuery),
    monitorHeartbeat(handle).catch(() => undefined),
  ]);
  if (beat === undefined && st.state === 'Running') {
    const host = await hostMonitorHeartbeat(handle, st).catch(() => undefined);
    return withMonitorDetails(st, host?.details);
  }
  return withMonitorDetails(st, beat?.details);
}
