// A proxy that belongs to a pool: it reports every change of its summary (state, health, host,
// address, role, since when its host does not answer) to the pool workflow, and applies the role
// the pool gives it (in discovery or not). A proxy started outside a pool does neither, so its
// history is what it was.
import { getExternalWorkflowHandle, patched } from '@temporalio/workflow';
import { poolMemberSignal } from '../../contracts/messages.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import type { ProxyRun } from './state.ts';

/**
 * The summary a member sends its pool (`hostUnreachableSince`: see host-reach.ts; `withExitIp`:
 * the run reports its exit IP, a change of it included).
 */
export function memberReport(
  st: ProxyStatus,
  at: string,
  hostUnreachableSince?: string,
  withExitIp = false,
): MemberReport {
  const r: MemberReport = {
    name: st.name,
    state: st.state,
    health: st.conditions.Healthy.status,
    healthSince: st.conditions.Healthy.since,
    port: st.port,
    serving: st.pool?.serving ?? false,
    at,
  };
  if (st.host !== undefined) r.host = st.host;
  if (st.ip !== undefined) r.ip = st.ip;
  if (withExitIp && st.exitIp !== undefined) r.exitIp = st.exitIp;
  if (st.lastError !== undefined) r.lastError = `${st.lastError.code}: ${st.lastError.message}`;
  if (hostUnreachableSince !== undefined) r.hostUnreachableSince = hostUnreachableSince;
  return r;
}

/** What a report is made of, without its time: a report goes out only when this changes. */
function reportKey(r: MemberReport): string {
  const { at: _at, lastError: _e, ...rest } = r;
  return JSON.stringify(rest);
}

/**
 * Sends the pool the member's summary when it changed since the last report. The signal is not
 * awaited here (the workflow awaits the last one before it ends: a signal whose sender has
 * completed is not delivered); a pool that is gone (deleted before its member) is no error of
 * the member.
 */
export function reportToPool(run: ProxyRun, at: string): void {
  const pool = run.input.pool;
  if (pool === undefined) return;
  // Runs recorded before members reported their host's silence send the reports they sent then.
  const since = run.hostUnreachableSince;
  // Runs recorded before members reported their exit IP send reports without it (one more
  // signal per exit-IP change otherwise); asked only once there is one to send.
  const report = memberReport(
    run.status,
    at,
    since !== undefined && patched('member-host-unreachable') ? since : undefined,
    run.status.exitIp !== undefined && patched('member-exit-ip'),
  );
  const key = reportKey(report);
  if (key === run.reported) return;
  run.reported = key;
  run.lastReport = getExternalWorkflowHandle(pool.workflowId)
    .signal(poolMemberSignal, report)
    .catch(() => undefined);
}
