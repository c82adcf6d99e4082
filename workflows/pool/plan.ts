// The pool's reconciler: from the pool's state and the time, what to do next (create members,
// tell members whether they serve, delete members that have drained) and when to look again.
// Pure and deterministic (randomness comes in as an argument), so every policy is unit-tested on
// its own; the workflow (index.ts) applies the actions. docs/pools.md states the rules in words.
import type { MemberReport, MemberRole, PoolFailure, PoolTemplate, ResolvedPoolSpec } from '../../contracts/pool.ts';
import { POOL_DEFAULTS } from '../../contracts/pool.ts';

/** One member as the pool keeps it. */
export interface MemberRecord {
  name: string;
  revision: number;
  createdAtMs: number;
  /** Rotation: replaced once the time passes (createdAt + maxAgeMs, shortened by jitter). */
  expiresAtMs?: number;
  role: MemberRole;
  /** The serving value last sent to the member (it acknowledges through its report). */
  sentServing: boolean;
  /** Role `leaving`: when it started, when the member acknowledged leaving discovery, and whether it had served. */
  leavingSinceMs?: number;
  leftDiscoveryAtMs?: number;
  hadServed?: boolean;
  deleteSent?: boolean;
  /** Why the member is to be replaced (recomputed on every pass). */
  condemned?: string;
  /** The member was ever available (Healthy for minHealthyMs). */
  everReady: boolean;
  report?: MemberReport;
}

export interface RolloutState {
  revision: number;
  startedAtMs: number;
  lastProgressAtMs: number;
  /** Progress is measured by this count going up: updated members ready, plus old ones removed. */
  progress: number;
}

export interface PoolState {
  spec: ResolvedPoolSpec;
  revision: number;
  /** Every revision's template, newest last (a rollback goes back to one of them). */
  revisions: { revision: number; template: PoolTemplate; at: string }[];
  stableRevision?: number;
  members: MemberRecord[];
  paused: boolean;
  failures: PoolFailure[];
  degradedSinceMs?: number;
  degradedUntilMs?: number;
  backoffs: number;
  rollout?: RolloutState;
  replacements: number;
  rollbacks: number;
  /** Members removed since the rollout started (for its progress). */
  removedOld: number;
  deleting: boolean;
  reason?: string;
  createdAt: string;
}

export type PoolAction =
  | { kind: 'create'; name: string; revision: number }
  | { kind: 'serve'; name: string; serving: boolean }
  | { kind: 'delete'; name: string };

export interface Plan {
  actions: PoolAction[];
  /** Workflow time (ms) at which the plan may change without any message; undefined: only a message changes it. */
  wakeAtMs?: number;
}

/** Healthy, Running and Healthy for the pool's minHealthyMs. */
export function isReady(m: MemberRecord, spec: ResolvedPoolSpec, nowMs: number): boolean {
  const r = m.report;
  if (r === undefined || r.state !== 'Running' || r.health !== 'True' || r.ip === undefined) return false;
  return nowMs - Date.parse(r.healthSince) >= spec.rollout.minHealthyMs;
}

/** Ready and in discovery: its role serves and the member said it applied that. */
export function isAvailable(m: MemberRecord, spec: ResolvedPoolSpec, nowMs: number): boolean {
  return m.role === 'serving' && m.report?.serving === true && isReady(m, spec, nowMs);
}

const ended = (m: MemberRecord): boolean => m.report?.state === 'Deleted' || m.report?.state === 'Failed';

/** A member name `<pool>-<5 characters>` from `random` (in [0, 1)), unused in `taken`. */
export function memberName(pool: string, taken: ReadonlySet<string>, random: () => number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  for (;;) {
    let s = '';
    for (let i = 0; i < 5; i++) s += alphabet[Math.floor(random() * alphabet.length)];
    const name = `${pool}-${s}`;
    if (!taken.has(name)) return name;
  }
}

/** Records a member's report (a stale one, older than the last, is ignored); returns whether it was taken. */
export function applyReport(state: PoolState, report: MemberReport): boolean {
  const m = state.members.find((x) => x.name === report.name);
  if (m === undefined) return false;
  if (m.report !== undefined && Date.parse(report.at) < Date.parse(m.report.at)) return false;
  if (m.role === 'leaving' && m.report?.serving === true && !report.serving)
    m.leftDiscoveryAtMs = Date.parse(report.at);
  m.report = report;
  return true;
}

/** The loop guard: a failure of a member that never became available; Degraded after K in the window. */
function recordFailure(state: PoolState, m: MemberRecord, reason: string, nowMs: number): void {
  const { replacement } = state.spec;
  state.failures.push({ member: m.name, at: new Date(nowMs).toISOString(), reason });
  state.failures = state.failures.filter((f) => nowMs - Date.parse(f.at) <= replacement.windowMs).slice(-20);
  if (state.failures.length >= replacement.maxFailures && state.degradedUntilMs === undefined) {
    const backoff = Math.min(replacement.backoffMs * 2 ** state.backoffs, POOL_DEFAULTS.maxBackoffMs);
    state.backoffs++;
    state.degradedSinceMs = nowMs;
    state.degradedUntilMs = nowMs + backoff;
    state.reason =
      `${state.failures.length} members in ${Math.round(replacement.windowMs / 60_000)} min never became healthy; ` +
      `no new members until ${new Date(nowMs + backoff).toISOString()} (last: ${reason})`;
  }
}

function errorOf(m: MemberRecord): string {
  return m.report?.lastError ?? `ended ${m.report?.state ?? 'unknown'}`;
}

/**
 * One pass of the reconciler at `nowMs`. Mutates `state` (roles, condemnations, the loop guard,
 * the rollout and its rollback) and returns the actions to take and when to look again.
 */
export function reconcile(state: PoolState, nowMs: number, random: () => number): Plan {
  const { spec } = state;
  const actions: PoolAction[] = [];
  const wakes: number[] = [];
  const wake = (t: number | undefined): void => {
    if (t !== undefined && Number.isFinite(t)) wakes.push(t);
  };

  // Members whose workflow ended: gone. One that ended without being asked to, and never became
  // available, counts against the loop guard; either way it is replaced (at once: it is not live).
  for (const m of state.members.filter(ended)) {
    if (m.role !== 'leaving') {
      state.replacements++;
      if (!m.everReady) recordFailure(state, m, `${m.name}: ${errorOf(m)}`, nowMs);
    }
  }
  state.members = state.members.filter((m) => !ended(m));

  for (const m of state.members) {
    if (isReady(m, spec, nowMs) && !m.everReady) {
      m.everReady = true;
      // A member came up: the guard's count starts again (a backoff in force runs out).
      state.failures = [];
    }
  }
  if (state.degradedUntilMs !== undefined && nowMs >= state.degradedUntilMs) {
    state.degradedUntilMs = undefined;
    state.degradedSinceMs = undefined;
    state.failures = [];
    state.reason = undefined;
  }
  if (state.degradedUntilMs !== undefined) wake(state.degradedUntilMs);
  if (state.members.some((m) => m.everReady && m.revision === state.revision)) state.backoffs = 0;

  if (state.deleting) {
    for (const m of state.members.filter((x) => x.role !== 'leaving')) leave(state, m, nowMs);
    drainLeavers(state, nowMs, actions, wake);
    return { actions, wakeAtMs: min(wakes) };
  }

  const live = (): MemberRecord[] => state.members.filter((m) => m.role !== 'leaving');
  condemn(state, live(), nowMs, wake);

  const wanted = spec.size + spec.spares;
  const budget = wanted + spec.rollout.maxSurge;
  const good = (): MemberRecord[] => live().filter((m) => m.condemned === undefined);
  const availableCount = (): number => state.members.filter((m) => isAvailable(m, spec, nowMs)).length;
  const floor = spec.size - spec.rollout.maxUnavailable;

  // Scale-down: the excess of good members leaves, Unhealthy first, then spares, then by policy.
  const excess = good().length - wanted;
  if (excess > 0) {
    for (const m of scaleDownOrder(good(), state, nowMs, random).slice(0, excess)) leave(state, m, nowMs);
  }

  // Roles: the first `size` of the live members serve (ready first, then the current revision,
  // then those already serving, then the oldest); the rest are spares. A member in discovery is
  // taken out only while the others in discovery stay at or above size - maxUnavailable.
  const order = [...live()].sort(
    (a, b) =>
      Number(isReady(b, spec, nowMs)) - Number(isReady(a, spec, nowMs)) ||
      Number(a.condemned !== undefined) - Number(b.condemned !== undefined) ||
      Number(b.role === 'serving') - Number(a.role === 'serving') ||
      a.createdAtMs - b.createdAtMs ||
      a.name.localeCompare(b.name),
  );
  order.forEach((m, i) => {
    const want: MemberRole = i < spec.size && isReady(m, spec, nowMs) ? 'serving' : 'spare';
    if (want === m.role) return;
    if (want === 'spare' && isAvailable(m, spec, nowMs) && availableCount() - 1 < floor) return;
    m.role = want;
  });

  // Condemned members leave once that keeps discovery at or above the floor, and either the
  // replacements are up (good members ready for every place) or the surge budget leaves no room
  // to create one while one is missing.
  for (const m of live().filter((x) => x.condemned !== undefined)) {
    const inDiscovery = isAvailable(m, spec, nowMs);
    if (inDiscovery && availableCount() - 1 < floor) continue;
    const readyGood = good().filter((x) => isReady(x, spec, nowMs)).length;
    const failedOrDown = m.report !== undefined && m.report.state !== 'Running' && m.report.state !== 'Booting';
    if (readyGood >= wanted || (good().length < wanted && live().length >= budget) || failedOrDown) {
      if (m.condemned?.startsWith('Unhealthy') && !m.everReady)
        recordFailure(state, m, `${m.name}: ${errorOf(m)}`, nowMs);
      if (m.condemned?.startsWith('Unhealthy')) state.replacements++;
      if (m.revision !== state.revision) state.removedOld++;
      leave(state, m, nowMs);
    }
  }

  // Creation within the surge budget, unless the loop guard holds it back.
  if (state.degradedUntilMs === undefined) {
    const n = Math.min(wanted - good().length, budget - live().length);
    const taken = new Set(state.members.map((m) => m.name));
    for (let i = 0; i < n; i++) {
      const name = memberName(spec.name, taken, random);
      taken.add(name);
      state.members.push(newMember(state, name, nowMs, random));
      actions.push({ kind: 'create', name, revision: state.revision });
    }
  }

  // Tell members their role (spares and newcomers start out of discovery).
  for (const m of live()) {
    const serving = m.role === 'serving';
    if (m.report !== undefined && m.sentServing !== serving) {
      actions.push({ kind: 'serve', name: m.name, serving });
      m.sentServing = serving;
    }
    if (serving && m.report?.serving) m.hadServed = true;
  }

  trackRollout(state, nowMs, wake);
  drainLeavers(state, nowMs, actions, wake);

  // Times at which a member may become ready or past its grace without telling us.
  for (const m of state.members) {
    const r = m.report;
    if (r === undefined || r.state !== 'Running') continue;
    const since = Date.parse(r.healthSince);
    if (r.health === 'True' && !isReady(m, spec, nowMs)) wake(since + spec.rollout.minHealthyMs);
    if (r.health !== 'True' && m.condemned === undefined) wake(since + spec.replacement.unhealthyGraceMs);
  }
  return { actions, wakeAtMs: min(wakes) };
}

/**
 * The leaving: out of discovery first (told, then acknowledged by the member), then the drain
 * delay so open connections finish, then deleted. A member that never served is deleted at once.
 */
function drainLeavers(state: PoolState, nowMs: number, actions: PoolAction[], wake: (t?: number) => void): void {
  for (const m of state.members) {
    if (m.role !== 'leaving' || m.deleteSent) continue;
    if (m.sentServing) {
      actions.push({ kind: 'serve', name: m.name, serving: false });
      m.sentServing = false;
    }
    const r = m.report;
    const inDiscovery = r !== undefined && r.serving && r.state === 'Running';
    if (inDiscovery) continue;
    if (m.hadServed && m.leftDiscoveryAtMs === undefined) m.leftDiscoveryAtMs = nowMs;
    const at = m.hadServed ? m.leftDiscoveryAtMs! + state.spec.drainDelayMs : nowMs;
    if (nowMs >= at) {
      actions.push({ kind: 'delete', name: m.name });
      m.deleteSent = true;
    } else wake(at);
  }
}

function leave(state: PoolState, m: MemberRecord, nowMs: number): void {
  if (m.role === 'leaving') return;
  m.hadServed = m.hadServed === true || m.report?.serving === true;
  m.role = 'leaving';
  m.leavingSinceMs = nowMs;
}

function newMember(state: PoolState, name: string, nowMs: number, random: () => number): MemberRecord {
  const m: MemberRecord = {
    name,
    revision: state.revision,
    createdAtMs: nowMs,
    role: 'spare',
    sentServing: false,
    everReady: false,
  };
  const { maxAgeMs, jitter } = state.spec.rotation;
  if (maxAgeMs !== undefined) m.expiresAtMs = nowMs + Math.round(maxAgeMs * (1 - jitter * random()));
  return m;
}

/** Marks the live members to be replaced, and why. Rotation takes one member at a time. */
function condemn(state: PoolState, live: MemberRecord[], nowMs: number, wake: (t?: number) => void): void {
  const { spec } = state;
  for (const m of live) {
    m.condemned = undefined;
    const r = m.report;
    if (r !== undefined && r.state === 'Running' && r.health === 'False') {
      const since = Date.parse(r.healthSince);
      if (nowMs - since >= spec.replacement.unhealthyGraceMs) {
        m.condemned = `Unhealthy since ${r.healthSince}${r.lastError ? ` (${r.lastError})` : ''}`;
        continue;
      }
    }
    if (r?.host !== undefined && spec.placement.avoidHosts.includes(r.host)) {
      m.condemned = `on host ${r.host}, which the pool avoids`;
      continue;
    }
    if (!state.paused && m.revision !== state.revision)
      m.condemned = `template revision ${m.revision}, not ${state.revision}`;
  }
  // Rotation: the oldest expired member, when nothing else is being replaced for age or revision.
  if (state.paused || live.some((m) => m.condemned !== undefined && !m.condemned.startsWith('Unhealthy'))) return;
  const expired = live
    .filter((m) => m.expiresAtMs !== undefined && nowMs >= m.expiresAtMs)
    .sort((a, b) => a.createdAtMs - b.createdAtMs);
  if (expired[0] !== undefined) expired[0].condemned = `older than rotation.maxAgeMs (${spec.rotation.maxAgeMs} ms)`;
  for (const m of live) if (m.expiresAtMs !== undefined && m.expiresAtMs > nowMs) wake(m.expiresAtMs);
}

/** Scale-down order: Unhealthy first, then spares, then by the pool's policy. */
function scaleDownOrder(
  members: MemberRecord[],
  state: PoolState,
  nowMs: number,
  random: () => number,
): MemberRecord[] {
  const keyed = members.map((m) => ({ m, r: random() }));
  const policy = state.spec.scaleDownPolicy;
  const rank = (m: MemberRecord): number => {
    if (m.report?.health === 'False') return 0;
    if (!isReady(m, state.spec, nowMs)) return 1;
    return m.role === 'spare' ? 2 : 3;
  };
  keyed.sort((a, b) => {
    const byRank = rank(a.m) - rank(b.m);
    if (byRank !== 0) return byRank;
    if (policy === 'oldest') return a.m.createdAtMs - b.m.createdAtMs;
    if (policy === 'newest') return b.m.createdAtMs - a.m.createdAtMs;
    return a.r - b.r;
  });
  return keyed.map((k) => k.m);
}

/**
 * The rollout in progress (members of other revisions remain, or the current one is not all
 * ready): its progress, its deadline (rollback to the stable revision), and the stable revision
 * once every member is on the current one and the pool is whole.
 */
function trackRollout(state: PoolState, nowMs: number, wake: (t?: number) => void): void {
  const { spec } = state;
  const live = state.members.filter((m) => m.role !== 'leaving');
  const updatedReady = live.filter((m) => m.revision === state.revision && isReady(m, spec, nowMs)).length;
  const whole =
    live.every((m) => m.revision === state.revision) &&
    updatedReady >= spec.size + spec.spares &&
    state.members.filter((m) => isAvailable(m, spec, nowMs)).length >= spec.size;
  if (whole) {
    state.stableRevision = state.revision;
    state.rollout = undefined;
    return;
  }
  if (state.paused || state.degradedUntilMs !== undefined) {
    if (state.rollout !== undefined) state.rollout.lastProgressAtMs = nowMs;
    return;
  }
  const progress = updatedReady + state.removedOld;
  if (state.rollout === undefined || state.rollout.revision !== state.revision) {
    state.rollout = { revision: state.revision, startedAtMs: nowMs, lastProgressAtMs: nowMs, progress };
  } else if (progress > state.rollout.progress) {
    state.rollout.progress = progress;
    state.rollout.lastProgressAtMs = nowMs;
  }
  const deadline = state.rollout.lastProgressAtMs + spec.rollout.progressDeadlineMs;
  if (nowMs < deadline) {
    wake(deadline);
    return;
  }
  const stable = state.stableRevision;
  if (stable !== undefined && stable !== state.revision) {
    state.reason = `rollout of revision ${state.revision} made no progress in ${spec.rollout.progressDeadlineMs} ms; rolled back to revision ${stable}`;
    rollbackTo(state, stable, nowMs);
  } else {
    state.reason = `no progress in ${spec.rollout.progressDeadlineMs} ms toward ${spec.size} healthy members`;
    state.rollout.lastProgressAtMs = nowMs;
    wake(nowMs + spec.rollout.progressDeadlineMs);
  }
}

/** Makes `revision`'s template current again (its members stop being condemned). */
export function rollbackTo(state: PoolState, revision: number, nowMs: number): void {
  const rev = state.revisions.find((r) => r.revision === revision);
  if (rev === undefined) return;
  state.revision = revision;
  state.spec = { ...state.spec, template: rev.template };
  state.rollbacks++;
  state.removedOld = 0;
  state.rollout = undefined;
  state.paused = false;
  void nowMs;
}

function min(ts: number[]): number | undefined {
  return ts.length === 0 ? undefined : Math.min(...ts);
}
