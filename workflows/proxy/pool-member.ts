// A proxy that belongs to a pool: it reports the changes of its summary (state, health, host,
// address, role, since when its host does not answer) to the pool workflow (those the pool does not
// act on held and sent together REPORT_HOLD_MS after the last report, the others at once), and applies the role
// the pool gives it (in discovery or not). A proxy started outside a pool does neither, so its
// history is what it was.
import { CancellationScope, getExternalWorkflowHandle, sleep } from '@temporalio/workflow';
import { poolMemberSignal } from '../../contracts/messages.ts';
import { probesFailing } from '../../contracts/health.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import type { ProxyRun, ReportGate } from './state.ts';

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
  if (probesFailing(st)) r.probesFailing = true;
  return r;
}

/** What a report is made of, without its time: a report goes out only when this changes. */
function reportKey(r: MemberReport): string {
  const { at: _at, lastError: _e, ...rest } = r;
  return JSON.stringify(rest);
}

/**
 * How long a member holds a change its pool does not act on (see `urgentChange`), after its last
 * report: it then sends the latest summary only, by a timer; a change the pool acts on goes out at
 * once and carries whatever was held (docs/pools.md, "What goes at once, what is held").
 */
export const REPORT_HOLD_MS = 5_000;

/**
 * The ending a pool acts on: Failed (replaced at once), Deleted (gone), and Deleting for a member
 * that still serves (out of discovery at once); a member out of discovery that is being deleted
 * (the pool's own delete) reports Deleted a moment later, which carries it.
 */
function ending(r: MemberReport): string {
  if (r.state === 'Failed' || r.state === 'Deleted') return r.state;
  return r.state === 'Deleting' && r.serving ? r.state : '';
}

/**
 * Whether `next` differs from the last report sent in what the pool acts on at once: health
 * (replacement, readiness), the role it applied (availability), its host not answering (host
 * failure), its probes failing (readiness), an ending (see `ending`) and a move to another host. Not: the states on the way up
 * (Pending … Running), the first host, the address, the exit IP, `healthSince` alone, the last
 * error, Deleting out of discovery.
 */
export function urgentChange(last: MemberReport | undefined, next: MemberReport): boolean {
  // Before its first report the pool holds a member as Starting: health Unknown, not serving.
  const was = last ?? {
    ...next,
    state: 'Pending',
    health: 'Unknown',
    serving: false,
    host: undefined,
    hostUnreachableSince: undefined,
  };
  return (
    was.health !== next.health ||
    was.serving !== next.serving ||
    ending(was) !== ending(next) ||
    (was.hostUnreachableSince === undefined) !== (next.hostUnreachableSince === undefined) ||
    (was.probesFailing === true) !== (next.probesFailing === true) ||
    (was.host !== undefined && was.host !== next.host)
  );
}

/** The member's summary now. */
function currentReport(run: ProxyRun, at: string): MemberReport {
  return memberReport(run.status, at, run.hostUnreachableSince, run.status.exitIp !== undefined);
}

/**
 * Signals `report` to the pool (not awaited here: see reportToPool), its `at` made later than the
 * member's previous report's: the server does not deliver one sender's signals in order (two
 * sent in one workflow task share a workflow time, and a later one has been seen to arrive
 * first), and the pool keeps the report with the latest `at`.
 */
function send(run: ProxyRun, workflowId: string, report: MemberReport, key: string): Promise<void> {
  const gate = gateOf(run);
  const atMs = Math.max(Date.parse(report.at), gate.lastAtMs + 1);
  gate.lastAtMs = atMs;
  run.reported = key;
  return getExternalWorkflowHandle(workflowId)
    .signal(poolMemberSignal, { ...report, at: new Date(atMs).toISOString() })
    .catch(() => undefined);
}

function gateOf(run: ProxyRun): ReportGate {
  return (run.reportGate ??= { sentAtMs: Date.now(), lastAtMs: -Infinity });
}

/**
 * Sends the pool the member's summary when it changed since the last report: at once when the
 * change is one the pool acts on (urgentChange), else held until REPORT_HOLD_MS after the last
 * report (the latest summary then, if it still differs). The signal is not awaited here (the
 * workflow awaits `run.lastReport` before it ends or continues as new: a signal whose sender has
 * completed is not delivered); a pool that is gone (deleted before its member) is no error of
 * the member.
 */
export function reportToPool(run: ProxyRun, at: string): void {
  const pool = run.input.pool;
  if (pool === undefined) return;
  const report = currentReport(run, at);
  const key = reportKey(report);
  if (key === run.reported) return;
  const gate = gateOf(run);
  if (urgentChange(gate.sent, report)) {
    gate.sent = report;
    gate.sentAtMs = Date.now();
    run.lastReport = send(run, pool.workflowId, report, key);
    return;
  }
  if (gate.timer !== undefined) return; // the armed timer sends the latest
  const g = gate;
  const waitMs = Math.max(1, g.sentAtMs + REPORT_HOLD_MS - Date.now());
  // Not cancellable: a delete cancels the lifecycle's scope, and the held report must still go.
  g.timer = CancellationScope.nonCancellable(() => sleep(waitMs)).then(async () => {
    g.timer = undefined;
    const latest = currentReport(run, new Date().toISOString());
    const k = reportKey(latest);
    if (k === run.reported) return;
    g.sent = latest;
    g.sentAtMs = Date.now();
    await send(run, pool.workflowId, latest, k);
  });
  run.lastReport = g.timer;
}
