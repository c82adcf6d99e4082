// The reconciler's policies (docs/pools.md): which members are condemned and why, the loop
// guard, the scale-down order, and the rollout's progress deadline with its rollback. Pure.
import { POOL_DEFAULTS } from '../../contracts/pool.ts';
import type { PoolFailure } from '../../contracts/pool.ts';
import type { MemberRecord, PoolState } from '../../contracts/pool-state.ts';
import { hostsToLeave, hostUnreachableSince, isAvailable, isReady } from './model.ts';

/**
 * The loop guard: a failure of a member that never became available; Degraded after K in the
 * window. A host failure (`host`) counts once per host in the window: K members on one dead host
 * are one failure, not K (a dead host is not a bad template).
 */
export function recordFailure(state: PoolState, m: MemberRecord, reason: string, nowMs: number, host?: string): void {
  const { replacement } = state.spec;
  const recent = (f: PoolFailure): boolean => nowMs - Date.parse(f.at) <= replacement.windowMs;
  if (host !== undefined && state.failures.some((f) => f.host === host && recent(f))) return;
  const failure: PoolFailure = { member: m.name, at: new Date(nowMs).toISOString(), reason };
  if (host !== undefined) failure.host = host;
  state.failures.push(failure);
  state.failures = state.failures.filter(recent).slice(-20);
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

export function errorOf(m: MemberRecord): string {
  return m.report?.lastError ?? `ended ${m.report?.state ?? 'unknown'}`;
}

/**
 * When an Unhealthy member is past its grace: unhealthyGraceMs after it turned Unhealthy, and for
 * a member never Healthy yet (booting) no sooner than startupGraceMs after it was created.
 */
export function unhealthyDeadline(m: MemberRecord, spec: PoolState['spec']): number {
  const since = Date.parse(m.report?.healthSince ?? '') + spec.replacement.unhealthyGraceMs;
  // Histories recorded before the startup grace have no startupGraceMs in their resolved spec.
  const startup = m.everReady ? -Infinity : m.createdAtMs + (spec.replacement.startupGraceMs ?? 0);
  return Math.max(since, startup);
}

/**
 * When a member whose host stopped answering is past its grace (undefined: its host answers).
 * States carried from runs before the rule have no hostFailureGraceMs in their resolved spec.
 */
export function hostFailureDeadline(m: MemberRecord, spec: PoolState['spec']): number | undefined {
  const since = hostUnreachableSince(m);
  if (since === undefined) return undefined;
  return since + (spec.replacement.hostFailureGraceMs ?? POOL_DEFAULTS.hostFailureGraceMs);
}

/** The host of a member condemned because its host stopped answering (see condemn). */
export function failedHost(m: MemberRecord): string | undefined {
  return m.condemned?.startsWith(HOST_FAILED) === true ? (m.report?.host ?? '') : undefined;
}
const HOST_FAILED = 'host unreachable';

/**
 * Marks the live members to be replaced, and why. Rotation takes one member at a time.
 * `hostFailure`: the host-failure rule applies (off when replaying a run from before it).
 */
export function condemn(
  state: PoolState,
  live: MemberRecord[],
  nowMs: number,
  wake: (t?: number) => void,
  hostFailure = true,
): void {
  const { spec } = state;
  const leave = new Set(hostsToLeave(state));
  for (const m of live) {
    m.condemned = undefined;
    const r = m.report;
    const hostDeadline = hostFailure ? hostFailureDeadline(m, spec) : undefined;
    if (hostDeadline !== undefined) {
      // Its host does not answer: the host rule decides, not its health (which the host took down).
      if (nowMs >= hostDeadline) {
        m.condemned = `${HOST_FAILED}: ${r?.host ?? 'its host'} has not answered since ${r?.hostUnreachableSince}`;
        continue;
      }
      wake(hostDeadline);
    } else if (r !== undefined && r.state === 'Running' && r.health === 'False') {
      if (nowMs >= unhealthyDeadline(m, spec)) {
        m.condemned = `Unhealthy since ${r.healthSince}${r.lastError ? ` (${r.lastError})` : ''}`;
        continue;
      }
    }
    if (r?.host !== undefined && leave.has(r.host)) {
      const why = spec.placement.avoidHosts.includes(r.host) ? 'which the pool avoids' : 'which is being drained';
      m.condemned = `on host ${r.host}, ${why}`;
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
export function scaleDownOrder(
  members: MemberRecord[],
  state: PoolState,
  nowMs: number,
  random: () => number,
): MemberRecord[] {
  const keyed = members.map((m) => ({ m, r: random() }));
  const policy = state.spec.scaleDownPolicy;
  // Unhealthy first; then members still coming up (those not Healthy yet before those Healthy
  // but not for minHealthyMs: a member that recovered outlives a newcomer still booting); then
  // spares; then the rest.
  const rank = (m: MemberRecord): number => {
    if (m.report?.health === 'False') return 0;
    if (!isReady(m, state.spec, nowMs)) return m.report?.health === 'True' ? 2 : 1;
    return m.role === 'spare' ? 3 : 4;
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
export function trackRollout(state: PoolState, nowMs: number, wake: (t?: number) => void): boolean {
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
    return false;
  }
  // A pause stops the clock. The loop guard's backoff does not: a template whose members fail at
  // once (a bad image) is exactly what the deadline rolls back.
  if (state.paused) {
    if (state.rollout !== undefined) state.rollout.lastProgressAtMs = nowMs;
    return false;
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
    return false;
  }
  const stable = state.stableRevision;
  if (stable !== undefined && stable !== state.revision) {
    state.reason = `rollout of revision ${state.revision} made no progress in ${spec.rollout.progressDeadlineMs} ms; rolled back to revision ${stable}`;
    rollbackTo(state, stable, nowMs);
    return true;
  }
  state.reason = `no progress in ${spec.rollout.progressDeadlineMs} ms toward ${spec.size} healthy members`;
  state.rollout.lastProgressAtMs = nowMs;
  wake(nowMs + spec.rollout.progressDeadlineMs);
  return false;
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
  // The failures that held creation back were the abandoned template's: the stable one may create.
  state.failures = [];
  state.degradedUntilMs = undefined;
  state.degradedSinceMs = undefined;
  void nowMs;
}
