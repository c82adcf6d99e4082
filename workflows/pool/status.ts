// What a pool reports (the `status` query, the memo, the Web UI's details), from its state: pure.
import type { PoolMemberStatus, PoolPhase, PoolSpec, PoolStatus, PoolBrief } from '../../contracts/pool.ts';
import type { PoolState } from '../../contracts/pool-state.ts';
import { isAvailable, isReady } from './plan.ts';

/** The spec an operator would send to get `state`'s spec (defaults filled in). */
export function specOfState(state: PoolState): PoolSpec {
  const s = state.spec;
  const spec: PoolSpec = {
    entry: s.entry,
    name: s.name,
    size: s.size,
    spares: s.spares,
    template: s.template,
    placement: { ...s.placement },
    rollout: { ...s.rollout },
    replacement: { ...s.replacement },
    rotation: { ...s.rotation },
    scaleDownPolicy: s.scaleDownPolicy,
    drainDelayMs: s.drainDelayMs,
  };
  return spec;
}

/**
 * The revision a rollback goes to: `requested` when it is a known revision other than the
 * current one, else the last stable revision when it is not the current one, else the revision
 * before the current one; a string says why there is none.
 */
export function rollbackTarget(state: PoolState, requested: number | undefined): number | string {
  if (requested !== undefined) {
    if (!Number.isInteger(requested)) return `revision must be a whole number, got ${String(requested)}`;
    if (requested === state.revision) return `revision ${requested} is the current one: nothing to roll back`;
    if (!state.revisions.some((r) => r.revision === requested)) {
      const known = state.revisions.map((r) => r.revision).join(', ');
      return `revision ${requested} is not known to this pool (known: ${known})`;
    }
    return requested;
  }
  if (state.stableRevision !== undefined && state.stableRevision !== state.revision) return state.stableRevision;
  const earlier = state.revisions.filter((r) => r.revision !== state.revision);
  if (earlier.length === 0) return 'the pool has only one revision: nothing to roll back to';
  return earlier[earlier.length - 1]!.revision;
}

export function poolPhase(state: PoolState, nowMs: number): PoolPhase {
  if (state.deleting) return 'Deleting';
  if (state.degradedUntilMs !== undefined) return 'Degraded';
  const { spec } = state;
  const live = state.members.filter((m) => m.role !== 'leaving');
  const available = state.members.filter((m) => isAvailable(m, spec, nowMs)).length;
  const updated = live.filter((m) => m.revision === state.revision);
  const ready =
    available >= spec.size &&
    live.length === spec.size + spec.spares &&
    updated.length === live.length &&
    live.every((m) => isReady(m, spec, nowMs) && m.report?.serving === (m.role === 'serving')) &&
    state.members.length === live.length;
  if (ready) return 'Ready';
  if (state.paused) return 'Paused';
  return 'Progressing';
}

/** The status without its members: what the updates answer (contracts/pool.ts PoolBrief). */
export function poolBrief(state: PoolState, nowMs: number): PoolBrief {
  const { members, ...rest } = poolStatus(state, nowMs);
  return { ...rest, memberCount: members.length };
}

export function poolStatus(state: PoolState, nowMs: number): PoolStatus {
  const { spec } = state;
  const members: PoolMemberStatus[] = state.members.map((m) => {
    const r = m.report;
    const out: PoolMemberStatus = {
      name: m.name,
      revision: m.revision,
      imageKey: state.revisions.find((x) => x.revision === m.revision)?.template.imageKey ?? spec.template.imageKey,
      role: m.role,
      state: r?.state ?? 'Starting',
      healthy: r?.health ?? 'Unknown',
      available: isAvailable(m, spec, nowMs),
      ageMs: Math.max(0, nowMs - m.createdAtMs),
      createdAt: new Date(m.createdAtMs).toISOString(),
    };
    if (m.condemned !== undefined) out.condemned = m.condemned;
    if (r?.host !== undefined) out.host = r.host;
    if (r?.ip !== undefined) out.address = `${r.ip}:${r.port}`;
    if (r?.exitIp !== undefined) out.exitIp = r.exitIp;
    if (r?.lastError !== undefined) out.lastError = r.lastError;
    if (r?.hostUnreachableSince !== undefined) out.hostUnreachableSince = r.hostUnreachableSince;
    return out;
  });
  const live = state.members.filter((m) => m.role !== 'leaving');
  const st: PoolStatus = {
    entry: spec.entry,
    name: spec.name,
    phase: poolPhase(state, nowMs),
    spec,
    revision: state.revision,
    history: [...state.revisions].reverse(),
    desired: spec.size,
    spares: spec.spares,
    healthy: state.members.filter((m) => m.report?.state === 'Running' && m.report.health === 'True').length,
    available: members.filter((m) => m.available).length,
    updated: live.filter((m) => m.revision === state.revision).length,
    replacements: state.replacements,
    replacedOnRequest: state.replacedOnRequest ?? 0,
    rollbacks: state.rollbacks,
    paused: state.paused,
    drainingHosts: [...(state.drainingHosts ?? [])],
    members,
    createdAt: state.createdAt,
    updatedAt: new Date(nowMs).toISOString(),
  };
  if (state.reason !== undefined) st.reason = state.reason;
  if (state.stableRevision !== undefined) st.stableRevision = state.stableRevision;
  if (state.door !== undefined) st.door = state.door;
  if (state.degradedUntilMs !== undefined) {
    st.degraded = {
      since: new Date(state.degradedSinceMs ?? nowMs).toISOString(),
      until: new Date(state.degradedUntilMs).toISOString(),
      failures: state.failures,
    };
  }
  if (state.rollout !== undefined) {
    const r = state.rollout;
    st.rollout = {
      revision: r.revision,
      startedAt: new Date(r.startedAtMs).toISOString(),
      lastProgressAt: new Date(r.lastProgressAtMs).toISOString(),
      step: `revision ${r.revision}: ${st.updated}/${spec.size + spec.spares} updated, ${st.available}/${spec.size} available`,
    };
  }
  return st;
}
