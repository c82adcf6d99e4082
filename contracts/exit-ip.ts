// The exit IP of a proxy (the address destinations see, read through it from
// `health.egressIpUrl`, docs/health.md#exit-ip), as pure functions shared by the monitor activity
// and the workflow: when the next read is due, a probe's read folded into the status, and what
// counts as a change (logged and counted by the monitor). No I/O here.
import type { ProbeOutcome, ProxyStatus, ResolvedProxy } from './proxy.ts';

/** How often the exit IP is read again when the resolved spec does not say (runs resolved before it). */
export const DEFAULT_EXIT_IP_INTERVAL_MS = 300_000;

/**
 * Whether the probe about to run (at `nowMs`) also reads the exit IP: the entry has an
 * `egressIpUrl`, the proxy is Healthy or this probe would make it so (so the first read rides on
 * the same transition as Healthy), and no read was made within `egressIpIntervalMs` (the last
 * one's time is `health.exitIpAt`, cleared when the VM goes down). At most once per probe.
 */
export function exitIpDue(st: ProxyStatus, h: ResolvedProxy['health'], nowMs: number): boolean {
  if (h.egressIpUrl === undefined) return false;
  const healthy = st.conditions.Healthy.status === 'True' || st.health.consecutiveOk + 1 >= h.healthyAfter;
  if (!healthy) return false;
  const last = st.health.exitIpAt === undefined ? Number.NaN : Date.parse(st.health.exitIpAt);
  return !Number.isFinite(last) || nowMs - last >= (h.egressIpIntervalMs ?? DEFAULT_EXIT_IP_INTERVAL_MS);
}

/** A probe's exit-IP read (if it made one) folded into the status at `at`. */
export function applyExitIp(st: ProxyStatus, outcome: ProbeOutcome, at: string): ProxyStatus {
  if (!outcome.ok || (outcome.exitIp === undefined && outcome.exitIpError === undefined)) return st;
  const { exitIpError: _e, ...health } = st.health;
  if (outcome.exitIp !== undefined) return { ...st, exitIp: outcome.exitIp, health: { ...health, exitIpAt: at } };
  return { ...st, health: { ...health, exitIpAt: at, exitIpError: outcome.exitIpError! } };
}

/** The exit IP of `after` when it differs from `before`'s: `from` is absent on the first read. */
export function exitIpChange(before: ProxyStatus, after: ProxyStatus): { from?: string; to: string } | undefined {
  const to = after.exitIp;
  if (to === undefined || to === before.exitIp) return undefined;
  return before.exitIp === undefined ? { to } : { from: before.exitIp, to };
}

/**
 * The status with its exit IP due again (the VM went down: recreated or moved): the address stays,
 * the last one read, and the probe that makes the proxy Healthy again reads it anew.
 */
export function exitIpDueAgain(st: ProxyStatus): ProxyStatus {
  if (st.health.exitIpAt === undefined && st.health.exitIpError === undefined) return st;
  const { exitIpAt: _a, exitIpError: _e, ...health } = st.health;
  return { ...st, health };
}
