// The health model of a Running proxy, as pure functions shared by the workflow and the monitor
// activity (activities/monitor.ts): conditions, probe hysteresis, the address grace (H3), one poll
// folded into the monitor's state, and when the monitor hands that state back to the workflow (a
// transition or a checkpoint). No I/O here: the poll's reads and probes come in as arguments.
import type {
  Condition,
  ConditionStatus,
  ProbeOutcome,
  ProxyError,
  ProxyStatus,
  ResolvedProxy,
  VmReading,
} from './proxy.ts';
import { applyExitIp } from './exit-ip.ts';

export function newCondition(status: ConditionStatus, reason: string, at: string, message?: string): Condition {
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

/** The reason of `Healthy=Unknown` while a VM boots (workflows/proxy/status.ts markBooting). */
export const BOOTING = 'Booting';

/** How often a booting proxy is polled and probed (at most; never slower than its interval). */
export const BOOT_POLL_MS = 1_000;

/**
 * The wait before the monitor's next poll: the health interval, or BOOT_POLL_MS while the proxy
 * boots (Healthy Unknown, Booting), so its first passing probes follow Squid's start within about
 * a second instead of up to `healthyAfter` intervals (15 s each by default).
 */
export function pollWaitMs(st: ProxyStatus, h: { intervalMs: number }): number {
  const healthy = st.conditions.Healthy;
  return healthy.status === 'Unknown' && healthy.reason === BOOTING
    ? Math.min(h.intervalMs, BOOT_POLL_MS)
    : h.intervalMs;
}

/**
 * Whether a failing probe at `at` leaves `Healthy` Unknown (Booting): no probe has passed since the
 * VM started (`since` of the Booting condition) and its `bootMs` has not run out.
 */
export function stillBooting(healthy: Condition, at: string, bootMs: number | undefined): boolean {
  return (
    healthy.status === 'Unknown' &&
    healthy.reason === BOOTING &&
    bootMs !== undefined &&
    Date.parse(at) < Date.parse(healthy.since) + bootMs
  );
}

/**
 * One probe's outcome folded into the counters and the Healthy condition (hysteresis). A booting
 * proxy (`Healthy` Unknown, reason Booting) stays Unknown on failures until its first passing probe
 * or until `bootMs` after its start; without `bootMs` failures count as always.
 */
export function applyProbe(
  st: ProxyStatus,
  outcome: ProbeOutcome,
  h: { healthyAfter: number; unhealthyAfter: number },
  at: string,
  bootMs?: number,
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
    if (health.consecutiveFailed >= h.unhealthyAfter && !stillBooting(healthy, at, bootMs)) {
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

/** A VM reading that means the VM is gone from under a Running proxy: it is recreated. */
export function vmLost(
  reading: VmReading | undefined,
): reading is VmReading & { state: 'Missing' | 'Failed' | 'Stopped' } {
  return (
    reading !== undefined && (reading.state === 'Missing' || reading.state === 'Failed' || reading.state === 'Stopped')
  );
}

// ---- the monitor -------------------------------------------------------------------------------

/** What the monitor folds its polls into: handed over by the workflow, heartbeated, handed back. */
export interface MonitorState {
  status: ProxyStatus;
  /** Consecutive polls without an address (H3). */
  missedPolls: number;
  /** An address was read since the VM was last started. */
  addressedOnce: boolean;
  /** Polls done in this workflow run (the checkpoint counts them). */
  polls: number;
  /**
   * RFC 3339 time of the first read, since the host last answered, that failed because the host's
   * link did not answer ({@link HOST_LINK_CODES}); absent while it answers. Watched: the monitor
   * returns when it appears and when it clears, so a silent host is known at its first failed read.
   */
  hostSilentSince?: string;
}

/** The monitor activity's input. */
export interface MonitorInput {
  proxy: ResolvedProxy;
  host: string;
  state: MonitorState;
  /** Epoch ms after which a VM that never had an address fails the boot (BOOT_TIMEOUT). */
  bootDeadlineMs?: number;
  /** Epoch ms of the periodic checkpoint: the monitor returns then, and the workflow continues as new. */
  checkpointAtMs: number;
  /** Return after this many polls in the run (a test's or an operator's continue-as-new bound). */
  checkpointAfterPolls?: number;
}

/**
 * Why the monitor returned: Healthy or AddressAssigned (or the IP, or the exit IP) changed, the VM is gone or
 * stopped (`VmLost`, recreated by the workflow), a VM that never had an address ran out of its
 * boot budget, or the checkpoint came.
 */
export type MonitorReason = 'Transition' | 'VmLost' | 'BootTimeout' | 'Checkpoint';

export interface MonitorResult {
  reason: MonitorReason;
  state: MonitorState;
  /** The VM's state when `reason` is VmLost. */
  vmState?: string;
}

/** The heartbeat details of the monitor activity (a retry resumes from them). */
export interface MonitorDetails {
  state: MonitorState;
}

/** What one poll brought back (a failed read is `readError`, not an exception). */
export interface PollInput {
  reading?: VmReading;
  readError?: ProxyError;
  /** The probe's outcome, when one was made (see {@link probeAddress}). */
  probe?: ProbeOutcome;
}

/**
 * The codes of a failure of the link to the host itself (docs/errors.md): the TCP connect, the SSH
 * handshake or session, the forwarded libvirt socket, the libvirt connection, or a budget spent
 * waiting on them. libvirt's own errors (LIBVIRT_ERROR), the address sources failing
 * (KVM2_ADDRESS_UNREADABLE, the guest agent) and refused credentials are not: the host answered.
 */
export const HOST_LINK_CODES: readonly string[] = [
  'SSH_CONNECT_FAILED',
  'SSH_CONNECT_TIMEOUT',
  'SSH_CONNECTION_LOST',
  'SSH_READY_TIMEOUT',
  'SSH_KEEPALIVE_TIMEOUT',
  'SSH_OPEN_TIMEOUT',
  'SSH_SESSION_DEAD',
  'SSH_CHANNEL_OPEN_FAILED',
  'SSH_POOL_QUEUE_TIMEOUT',
  'LIBVIRT_CONNECTION_LOST',
  'LIBVIRT_KEEPALIVE_TIMEOUT',
  'LIBVIRT_TIMEOUT',
];

/** A read failed with `code` because the host did not answer. */
export function hostDidNotAnswer(code: string | undefined): boolean {
  return code !== undefined && HOST_LINK_CODES.includes(code);
}

/**
 * The poll's reading folded in (address grace, boot deadline, the host's silence); `lost` when the
 * VM is gone. A reading clears the silence, a read failed on the host's link starts it, any other
 * failed read leaves it as it was.
 */
export function foldReading(
  s: MonitorState,
  p: Pick<PollInput, 'reading' | 'readError'>,
  h: ResolvedProxy['health'],
  at: string,
): { state: MonitorState; lost?: string } {
  const status = p.readError ? { ...s.status, lastError: p.readError } : s.status;
  const silent =
    p.reading !== undefined
      ? undefined
      : hostDidNotAnswer(p.readError?.code)
        ? (s.hostSilentSince ?? p.readError?.at ?? at)
        : s.hostSilentSince;
  const { hostSilentSince: _was, ...rest } = s;
  const base: MonitorState = silent === undefined ? rest : { ...rest, hostSilentSince: silent };
  if (vmLost(p.reading)) return { state: { ...base, status }, lost: p.reading.state };
  const why = p.reading ? `no address read (VM ${p.reading.state})` : 'the VM could not be read';
  const folded = applyAddress(status, s.missedPolls, p.reading?.ip, h.addressGracePolls, at, why);
  const addressedOnce = s.addressedOnce || folded.status.ip !== undefined;
  return { state: { ...base, status: folded.status, missedPolls: folded.missedPolls, addressedOnce } };
}

/** The address to probe after a folded reading, or undefined (no address, or no target). */
export function probeAddress(s: MonitorState, h: ResolvedProxy['health']): string | undefined {
  return h.target !== undefined ? s.status.ip : undefined;
}

/** A probe's outcome (and its exit-IP read, contracts/exit-ip.ts) folded in; `bootMs`: see applyProbe. */
export function foldProbe(
  s: MonitorState,
  outcome: ProbeOutcome,
  h: ResolvedProxy['health'],
  at: string,
  bootMs?: number,
): MonitorState {
  return { ...s, status: applyExitIp(applyProbe(s.status, outcome, h, at, bootMs), outcome, at) };
}

/**
 * Probes in a row that failed, from which a proxy is out of discovery even while its Healthy
 * condition (the hysteresis: `unhealthyAfter`) still says True.
 */
export const PROBES_FAILING_AFTER = 2;

/**
 * Healthy still True, but its last {@link PROBES_FAILING_AFTER} probes or more failed: the moment
 * between the failures and the hysteresis (a booting or Unhealthy proxy is out of discovery anyway).
 */
export function probesFailing(st: ProxyStatus): boolean {
  return st.conditions.Healthy.status === 'True' && st.health.consecutiveFailed >= PROBES_FAILING_AFTER;
}

/** The state's values whose change the workflow must hear of (and record, or publish). */
export function watched(st: ProxyStatus): string {
  const c = st.conditions;
  const failing = probesFailing(st) ? 'failing' : '';
  return `${c.Healthy.status}|${c.AddressAssigned.status}|${st.ip ?? ''}|${st.exitIp ?? ''}|${failing}`;
}

/** {@link watched} of the monitor's state, with whether its host is silent. */
export function monitorKey(s: MonitorState): string {
  return `${watched(s.status)}|${s.hostSilentSince === undefined ? '' : 'silent'}`;
}

/**
 * Whether the monitor returns after a poll that took `before` to `after` (`lost`: the VM's state
 * when it is gone), and why; undefined: it keeps polling. `nowMs` is the poll's end.
 */
export function monitorVerdict(
  input: Pick<MonitorInput, 'bootDeadlineMs' | 'checkpointAtMs' | 'checkpointAfterPolls'>,
  before: MonitorState,
  after: MonitorState,
  nowMs: number,
  lost?: string,
): MonitorReason | undefined {
  return verdictAfter(input, monitorKey(before), after, nowMs, lost);
}

/** {@link monitorVerdict} against the watched values the workflow last heard of (`monitorKey`'s key). */
export function verdictAfter(
  input: Pick<MonitorInput, 'bootDeadlineMs' | 'checkpointAtMs' | 'checkpointAfterPolls'>,
  knownKey: string,
  after: MonitorState,
  nowMs: number,
  lost?: string,
): MonitorReason | undefined {
  if (lost !== undefined) return 'VmLost';
  if (knownKey !== monitorKey(after)) return 'Transition';
  if (!after.addressedOnce && input.bootDeadlineMs !== undefined && nowMs > input.bootDeadlineMs) return 'BootTimeout';
  if (nowMs >= input.checkpointAtMs) return 'Checkpoint';
  if (input.checkpointAfterPolls !== undefined && after.polls >= input.checkpointAfterPolls) return 'Checkpoint';
  return undefined;
}

/**
 * The status as fresh as the monitor's last heartbeat: the workflow's status (what its query
 * returns, recorded at the last transition) with the monitor's counters and last probe when the
 * monitor of the same run is further along. Clients call this with the pending activity's
 * heartbeat details from `describe`.
 */
export function withMonitorDetails(st: ProxyStatus, details: unknown): ProxyStatus {
  const d = details as Partial<MonitorDetails> | undefined;
  const live = d?.state?.status;
  if (live === undefined || live.name !== st.name || typeof live.health !== 'object') return st;
  const seen = st.health.totalOk + st.health.totalFailed;
  const now = live.health.totalOk + live.health.totalFailed;
  return now > seen ? { ...st, health: live.health, lastError: live.lastError ?? st.lastError } : st;
}
