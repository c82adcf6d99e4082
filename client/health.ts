// A proxy's status as fresh as its health monitor: the status query (the workflow's state at the
// last transition) with the counters and last probe of the monitor activity's last heartbeat,
// which `describe` returns among the pending activities (docs/health.md). No history is read.
import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { withMonitorDetails } from '../contracts/health.ts';
import { proxyStatusQuery } from '../contracts/messages.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';

/** The activity type of the health monitor (activities/monitor.ts). */
export const MONITOR_ACTIVITY = 'monitorProxy';

/** The monitor's last heartbeat details and when the server got them, or undefined (no monitor pending). */
export async function monitorHeartbeat(
  handle: WorkflowHandle,
): Promise<{ details: unknown; at?: Date; attempt: number } | undefined> {
  const d = await handle.describe();
  for (const a of d.raw.pendingActivities ?? []) {
    if (a.activityType?.name !== MONITOR_ACTIVITY) continue;
    const p = a.heartbeatDetails?.payloads?.[0];
    if (!p) return undefined;
    const secs = a.lastHeartbeatTime?.seconds;
    const at = secs == null ? undefined : new Date(Number(secs) * 1000 + (a.lastHeartbeatTime?.nanos ?? 0) / 1e6);
    return { details: defaultPayloadConverter.fromPayload(p), at, attempt: a.attempt ?? 1 };
  }
  return undefined;
}

/** The status query's answer with the monitor's fresher counters merged in (contracts/health.ts). */
export async function freshProxyStatus(handle: WorkflowHandle): Promise<ProxyStatus> {
  const [st, beat] = await Promise.all([
    handle.query(proxyStatusQuery),
    monitorHeartbeat(handle).catch(() => undefined),
  ]);
  return withMonitorDetails(st, beat?.details);
}
