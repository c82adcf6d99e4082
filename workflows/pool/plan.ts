// The pool's reconciler: from the pool's state and the time, what to do next (create members,
// tell members whether they serve, delete members that have drained) and when to look again.
// Pure and deterministic (randomness comes in as an argument), so every policy is unit-tested on
// its own; the workflow (index.ts) applies the actions. docs/pools.md states the rules in words.
import type { MemberRole } from '../../contracts/pool.ts';
import type { PoolAction, Plan } from './model.ts';
import type { MemberRecord, PoolState } from '../../contracts/pool-state.ts';
import {
  ended,
  hostsToAvoid,
  hostUnreachableSince,
  isAvailable,
  isReady,
  memberName,
  mustTell,
  told,
} from './model.ts';
import { condemn, errorOf, failedHost, recordFailure, scaleDownOrder, trackRollout } from './policies.ts';
import { unhealthyDeadline } from './policies.ts';

export type { PoolAction, Plan } from './model.ts';
export { applyDrainNotice, applyReport, applySpec, isAvailable, isReady } from './model.ts';
export { memberName, newPoolState, nextRandom, seedOf } from './model.ts';
export { rollbackTo } from './policies.ts';

export interface ReconcileOptions {
  /** Members whose host stopped answering are replaced (off when replaying a run from before the rule). */
  hostFailure?: boolean;
}

/**
 * One pass of the reconciler at `nowMs`. Mutates `state` (roles, condemnations, the loop guard,
 * the rollout and its rollback) and returns the actions to take and when to look again.
 */
export function reconcile(state: PoolState, nowMs: number, random: () => number, opts: ReconcileOptions = {}): Plan {
  const { spec } = state;
  const hostFailure = opts.hostFailure ?? true;
  // Readiness cannot change within a pass (the reports and the time are fixed), and the budget
  // checks below count the available members once per member: each member's is computed once
  // (at 1,000 members a rollout's pass took 0.2-1 s, nearly all of it parsing healthSince).
  const readiness = new Map<MemberRecord, boolean>();
  const ready = (m: MemberRecord): boolean => {
    let r = readiness.get(m);
    if (r === undefined) readiness.set(m, (r = isReady(m, spec, nowMs)));
    return r;
  };
  const available = (m: MemberRecord): boolean => isAvailable(m, spec, nowMs, ready);
  /** The host of a member that stopped answering, when the rule applies (the loop guard counts it once). */
  const downHost = (m: MemberRecord): string | undefined =>
    hostFailure && hostUnreachableSince(m) !== undefined ? m.report?.host : undefined;
  const actions: PoolAction[] = [];
  const wakes: number[] = [];
  // Only times still to come: a time already past was acted on in this pass.
  const wake = (t: number | undefined): void => {
    if (t !== undefined && Number.isFinite(t) && t > nowMs) wakes.push(t);
  };

  // Members whose workflow ended: gone. One that ended without being asked to, and never became
  // available, counts against the loop guard; either way it is replaced (at once: it is not live).
  for (const m of state.members.filter(ended)) {
    if (m.role !== 'leaving') {
      state.replacements++;
      if (!m.everReady) recordFailure(state, m, `${m.name}: ${errorOf(m)}`, nowMs, downHost(m));
    }
  }
  state.members = state.members.filter((m) => !ended(m));

  for (const m of state.members) {
    if (ready(m) && !m.everReady) {
      m.everReady = true;
      // A member came up: the guard's count and its backoff start again (a backoff in force runs out).
      state.failures = [];
      state.backoffs = 0;
    }
  }
  if (state.degradedUntilMs !== undefined && nowMs >= state.degradedUntilMs) {
    state.degradedUntilMs = undefined;
    state.degradedSinceMs = undefined;
    state.failures = [];
    state.reason = undefined;
  }
  if (state.degradedUntilMs !== undefined) wake(state.degradedUntilMs);

  if (state.deleting) {
    for (const m of state.members.filter((x) => x.role !== 'leaving')) leave(state, m, nowMs);
    drainLeavers(state, nowMs, actions, wake);
    return { actions, wakeAtMs: min(wakes) };
  }

  const live = (): MemberRecord[] => state.members.filter((m) => m.role !== 'leaving');
  condemn(state, live(), nowMs, wake, hostFailure);

  const wanted = spec.size + spec.spares;
  const budget = wanted + spec.rollout.maxSurge;
  const good = (): MemberRecord[] => live().filter((m) => m.condemned === undefined);
  // The available count, kept up to date as roles change below (counted afresh for every member
  // it made a pass quadratic in the pool's size).
  let availableNow: number | undefined;
  const availableCount = (): number => (availableNow ??= state.members.filter(available).length);
  const setRole = (m: MemberRecord, role: MemberRole): void => {
    const was = available(m);
    if (role === 'leaving') leave(state, m, nowMs);
    else m.role = role;
    if (availableNow !== undefined) availableNow += Number(available(m)) - Number(was);
  };
  const floor = spec.size - spec.rollout.maxUnavailable;

  // Scale-down: the excess of good members leaves, Unhealthy first, then spares, then by policy.
  const excess = good().length - wanted;
  if (excess > 0) {
    for (const m of scaleDownOrder(good(), state, nowMs, random).slice(0, excess)) setRole(m, 'leaving');
  }

  // Roles: the first `size` of the live members serve (ready first, then the current revision,
  // then those already serving, then the oldest); the rest are spares. A member in discovery is
  // taken out only while the others in discovery stay at or above size - maxUnavailable.
  const order = [...live()].sort(
    (a, b) =>
      Number(ready(b)) - Number(ready(a)) ||
      Number(a.condemned !== undefined) - Number(b.condemned !== undefined) ||
      Number(b.role === 'serving') - Number(a.role === 'serving') ||
      a.createdAtMs - b.createdAtMs ||
      a.name.localeCompare(b.name),
  );
  order.forEach((m, i) => {
    const want: MemberRole = i < spec.size && ready(m) ? 'serving' : 'spare';
    if (want === m.role) return;
    if (want === 'spare' && available(m) && availableCount() - 1 < floor) return;
    setRole(m, want);
  });

  // Condemned members leave once that keeps discovery at or above the floor, and either the
  // replacements are up (good members ready for every place) or the surge budget leaves no room
  // to create one while one is missing. (The good members do not change in this loop: only
  // condemned ones leave.)
  const goodNow = good();
  const readyGood = goodNow.filter(ready).length;
  let liveCount = live().length;
  for (const m of live().filter((x) => x.condemned !== undefined)) {
    const inDiscovery = available(m);
    if (inDiscovery && availableCount() - 1 < floor) continue;
    const failedOrDown = m.report !== undefined && m.report.state !== 'Running' && m.report.state !== 'Booting';
    if (readyGood >= wanted || (goodNow.length < wanted && liveCount >= budget) || failedOrDown) {
      const host = failedHost(m);
      const failed = host !== undefined || m.condemned?.startsWith('Unhealthy') === true;
      const why = host === undefined ? errorOf(m) : m.condemned!;
      if (failed && !m.everReady) recordFailure(state, m, `${m.name}: ${why}`, nowMs, host);
      if (failed) state.replacements++;
      if (m.revision !== state.revision) state.removedOld++;
      setRole(m, 'leaving');
      liveCount--;
    }
  }

  // Creation within the surge budget, unless the loop guard holds it back.
  if (state.degradedUntilMs === undefined) {
    const n = Math.min(wanted - good().length, budget - live().length);
    const taken = new Set(state.members.map((m) => m.name));
    const avoidHosts = n > 0 ? hostsToAvoid(state) : [];
    for (let i = 0; i < n; i++) {
      const name = memberName(spec.name, taken, random);
      taken.add(name);
      state.members.push(newMember(state, name, nowMs, random));
      actions.push({ kind: 'create', name, revision: state.revision, avoidHosts });
    }
  }

  // Tell members their role (spares and newcomers start out of discovery).
  for (const m of live()) {
    const serving = m.role === 'serving';
    if (mustTell(m, serving)) {
      actions.push({ kind: 'serve', name: m.name, serving });
      told(m, serving, nowMs);
    }
    if (serving && m.report?.serving) m.hadServed = true;
  }

  const rolledBack = trackRollout(state, nowMs, wake);
  drainLeavers(state, nowMs, actions, wake);
  if (rolledBack) {
    // The stable template is current again: its replacements are planned in this same pass.
    const again = reconcile(state, nowMs, random, opts);
    actions.push(...again.actions);
    wake(again.wakeAtMs);
  }

  // Times at which a member may become ready or past its grace without telling us.
  for (const m of state.members) {
    const r = m.report;
    if (r === undefined || r.state !== 'Running') continue;
    const since = Date.parse(r.healthSince);
    if (r.health === 'True' && !ready(m)) wake(since + spec.rollout.minHealthyMs);
    if (r.health === 'False' && m.condemned === undefined && downHost(m) === undefined) {
      wake(unhealthyDeadline(m, spec));
    }
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
    if (m.sentServing || mustTell(m, false)) {
      actions.push({ kind: 'serve', name: m.name, serving: false });
      told(m, false, nowMs);
    }
    const r = m.report;
    const inDiscovery = r !== undefined && r.serving && r.state === 'Running';
    if (inDiscovery) continue;
    // The drain runs from when it stopped serving (its acknowledgement; now if it went down serving).
    if (m.hadServed && m.leftDiscoveryAtMs === undefined) m.leftDiscoveryAtMs = nowMs;
    const at = m.hadServed ? m.leftDiscoveryAtMs! + state.spec.drainDelayMs : nowMs;
    if (m.starting === true) continue; // the start's end makes another pass
    if (nowMs >= at) {
      actions.push({ kind: 'delete', name: m.name });
      m.deleteSent = true;
    } else wake(at);
  }
}

/** `m` leaves: out of discovery (told by the next pass), drained, then deleted (drainLeavers). */
export function leave(state: PoolState, m: MemberRecord, nowMs: number): void {
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

function min(ts: number[]): number | undefined {
  return ts.length === 0 ? undefined : Math.min(...ts);
}
