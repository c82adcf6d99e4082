// Pure helpers of the proxy lifecycle: the initial status, condition changes, health hysteresis,
// the address grace (H3) and host placement. No I/O, no workflow APIs: unit-tested on their own.
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { Condition, ConditionStatus, ProxyStatus, ResolvedProxy } from '../../contracts/proxy.ts';
import type { ProxySpec } from '../../contracts/proxy.ts';

/** Free pool space a host needs to be picked: the overlay headers and seed plus createProxy's 1 GiB reserve. */
export const PLACEMENT_NEED_BYTES = 1024 ** 3 + 16 * 1024 ** 2;

export function condition(status: ConditionStatus, reason: string, at: string, message?: string): Condition {
  return message === undefined ? { status, reason, since: at } : { status, reason, message, since: at };
}

/** Sets a condition; `since` moves only when the status changes. */
export function setCondition(
  current: Condition,
  status: ConditionStatus,
  reason: string,
  at: string,
  message?: string,
): Condition {
  const since = current.status === status ? current.since : at;
  return message === undefined ? { status, reason, since } : { status, reason, message, since };
}

export function initialStatus(spec: ProxySpec, at: string): ProxyStatus {
  return {
    name: spec.name,
    entry: spec.entry,
    imageKey: spec.imageKey,
    state: 'Pending',
    port: spec.squid?.port ?? 0,
    vm: { vcpus: spec.vm?.vcpus ?? 0, memoryMiB: spec.vm?.memoryMiB ?? 0, diskGiB: spec.vm?.diskGiB ?? 0 },
    conditions: {
      VmRunning: condition('Unknown', 'NotCreated', at),
      AddressAssigned: condition('Unknown', 'NotCreated', at),
      Healthy: condition('Unknown', 'NotProbed', at),
    },
    health: { consecutiveOk: 0, consecutiveFailed: 0, totalOk: 0, totalFailed: 0 },
    recreations: 0,
    createdAt: at,
    updatedAt: at,
  };
}

/** Applies the resolved spec's sizes and port to a status. */
export function withResolved(st: ProxyStatus, r: ResolvedProxy): ProxyStatus {
  return { ...st, port: r.squid.port, vm: { ...r.vm } };
}

/** One probe's outcome folded into the counters and the Healthy condition (hysteresis). */
export function applyProbe(
  st: ProxyStatus,
  outcome: { ok: true; latencyMs: number } | { ok: false; code: string; message: string },
  h: { healthyAfter: number; unhealthyAfter: number },
  at: string,
): ProxyStatus {
  const health = { ...st.health, lastProbeAt: at };
  let healthy = st.conditions.Healthy;
  if (outcome.ok) {
    health.consecutiveOk += 1;
    health.consecutiveFailed = 0;
    health.totalOk += 1;
    health.lastLatencyMs = outcome.latencyMs;
    if (health.consecutiveOk >= h.healthyAfter) healthy = setCondition(healthy, 'True', 'ProbePassed', at);
  } else {
    health.consecutiveFailed += 1;
    health.consecutiveOk = 0;
    health.totalFailed += 1;
    health.lastError = `${outcome.code}: ${outcome.message}`;
    if (health.consecutiveFailed >= h.unhealthyAfter) {
      healthy = setCondition(healthy, 'False', 'ProbeFailed', at, health.lastError);
    }
  }
  return { ...st, health, conditions: { ...st.conditions, Healthy: healthy } };
}

/**
 * One poll's address folded in (H3). A read address is taken at once. A poll without one (agent
 * restarting, VM briefly not running, or the read failing) keeps the previous IP and Healthy for
 * `gracePolls` polls; the next one demotes: no IP, AddressAssigned False, Healthy False.
 */
export function applyAddress(
  st: ProxyStatus,
  missedPolls: number,
  ip: string | undefined,
  gracePolls: number,
  at: string,
  why: string,
): { status: ProxyStatus; missedPolls: number } {
  if (ip !== undefined) {
    const AddressAssigned = setCondition(st.conditions.AddressAssigned, 'True', 'AddressRead', at);
    return { status: { ...st, ip, conditions: { ...st.conditions, AddressAssigned } }, missedPolls: 0 };
  }
  const missed = missedPolls + 1;
  if (st.ip !== undefined && missed <= gracePolls) return { status: st, missedPolls: missed };
  const conditions = {
    ...st.conditions,
    AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', 'NoAddress', at, why),
    Healthy:
      st.ip !== undefined
        ? setCondition(st.conditions.Healthy, 'False', 'AddressLost', at, why)
        : st.conditions.Healthy,
  };
  const health = st.ip !== undefined ? { ...st.health, consecutiveOk: 0 } : st.health;
  return { status: { ...st, ip: undefined, conditions, health }, missedPolls: missed };
}

/** FNV-1a of `text` as a number in (0, 1): a deterministic, well-spread hash for placement. */
export function unitHash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return (h + 1) / 4294967297;
}

/**
 * Picks a host for `proxy`: among reachable hosts with at least `needBytes` free in the pool, the
 * one with the fewest of our proxies per unit of weight; ties go by weighted rendezvous hashing
 * of (proxy, host), so a burst of proxies that all saw the same counts spreads over the hosts in
 * proportion to their weights, and the same proxy always ties to the same host. Returns the
 * reason when none fits (no reachable host, or none with room).
 */
export function pickHost(
  survey: readonly HostSurvey[],
  proxy: string,
  needBytes = PLACEMENT_NEED_BYTES,
): { host: string } | { host?: undefined; reason: string; capacity: boolean } {
  const reachable = survey.filter((s) => s.reachable);
  if (reachable.length === 0) {
    const why = survey.map((s) => `${s.host}: ${s.error ?? 'unreachable'}`).join('; ');
    return { reason: `no reachable host (${why})`, capacity: false };
  }
  const fits = reachable.filter((s) => (s.poolAvailableBytes ?? 0) >= needBytes);
  if (fits.length === 0) {
    const why = reachable.map((s) => `${s.host}: ${s.poolAvailableBytes ?? 0} bytes free`).join('; ');
    return { reason: `no host has ${needBytes} bytes free in its pool (${why})`, capacity: true };
  }
  const weight = (s: HostSurvey): number => Math.max(1, s.weight);
  const load = (s: HostSurvey): number => (s.proxies ?? 0) / weight(s);
  const minLoad = Math.min(...fits.map(load));
  // Within one proxy of the least loaded (per weight) counts as a tie: rendezvous decides.
  const tied = fits.filter((s) => load(s) - minLoad < 1 / weight(s));
  const rendezvous = (s: HostSurvey): number => -weight(s) / Math.log(unitHash(`${proxy}\0${s.host}`));
  const best = [...tied].sort((a, b) => rendezvous(b) - rendezvous(a) || a.host.localeCompare(b.host))[0]!;
  return { host: best.host };
}

/** Capacity-wait backoff: 30 s, doubling, at most 10 minutes. */
export function capacityBackoffMs(attempt: number): number {
  return Math.min(30_000 * 2 ** Math.max(0, attempt), 600_000);
}
