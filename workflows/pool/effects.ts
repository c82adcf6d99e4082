// The pool workflow's effects: the reconciler's actions applied (members started and deleted
// through activities, roles sent by signal), the audit of members whose workflow ended unseen, and
// what the pool publishes (memo, search attributes, the Web UI's current details).
import {
  getExternalWorkflowHandle,
  setCurrentDetails,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { memberServingSignal } from '../../contracts/messages.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_POOL } from '../../contracts/search-attributes.ts';
import { failureInfo } from '../failures.ts';
import { quick } from '../stubs.ts';
import type { PoolAction } from './plan.ts';
import type { PoolState } from '../../contracts/pool-state.ts';
import { auditable } from './model.ts';
import { poolStatus } from './status.ts';

/** How often the pool checks that every member it knows still has an open workflow. */
export const AUDIT_INTERVAL_MS = 300_000;
/** A member younger than this is not audited (its start may not be visible yet). */
const AUDIT_MIN_AGE_MS = 120_000;

const ENTRY_KEY = defineSearchAttributeKey(SA_PROVIDER_ENTRY, SearchAttributeType.KEYWORD);
const POOL_KEY = defineSearchAttributeKey(SA_PROXY_POOL, SearchAttributeType.KEYWORD);

/**
 * Applies the reconciler's actions: starts and deletes through activities, roles by signal.
 * Returns true when a start failed (the member is marked Failed: the next pass replaces it).
 * With `background`, starts are handed to it instead of awaited (each settles to whether it
 * failed), so a pass ends without waiting for its members' starts. With `gate` (the start window),
 * a start is launched through it (at once or from a later pass) and frees its slot once settled.
 */
export async function apply(
  state: PoolState,
  actions: PoolAction[],
  input: { ownerUid?: string },
  background?: (start: Promise<boolean>) => void,
  gate?: { launch(go: () => void): void; release(): void },
): Promise<boolean> {
  const { spec } = state;
  const poolId = workflowInfo().workflowId;
  /** Members that stay (not leaving, not being replaced) per host: where a new member should not crowd. */
  const hostCounts = (): Record<string, number> => {
    const counts: Record<string, number> = {};
    for (const m of state.members) {
      const h = m.report?.host;
      if (h !== undefined && m.role !== 'leaving' && m.condemned === undefined) counts[h] = (counts[h] ?? 0) + 1;
    }
    return counts;
  };
  // Members created in one pass have no host yet to count: each takes the next slot among the
  // hosts tied for fewest, so a batch spreads instead of following one hash.
  const creates = actions.filter((a) => a.kind === 'create').map((a) => a.name);
  const counts = hostCounts();
  /** Starts one member; true when the start failed. */
  const start = async (a: Extract<PoolAction, { kind: 'create' }>): Promise<boolean> => {
    const template = state.revisions.find((r) => r.revision === a.revision)?.template ?? spec.template;
    const m = state.members.find((x) => x.name === a.name);
    if (m !== undefined) m.starting = true;
    try {
      await quick.startPoolMember({
        pool: poolId,
        poolName: spec.name,
        entry: spec.entry,
        name: a.name,
        template,
        ...(input.ownerUid === undefined ? {} : { ownerUid: input.ownerUid }),
        avoidHosts: a.avoidHosts,
        hostCounts: counts,
        spreadSlot: creates.indexOf(a.name),
        ...(spec.placement.maxPerHost === undefined ? {} : { maxPerHost: spec.placement.maxPerHost }),
      });
      if (m !== undefined) m.startedAtMs = Date.now();
      return false;
    } catch (err) {
      // Not started (the ID is taken by another spec, the entry is unknown...): gone again, and
      // it counts against the loop guard like a member that failed.
      if (m === undefined) return false;
      const f = failureInfo(err);
      m.report = {
        name: a.name,
        state: 'Failed',
        health: 'Unknown',
        healthSince: new Date().toISOString(),
        port: 0,
        serving: false,
        lastError: `${f.code}: ${f.message}`,
        at: new Date().toISOString(),
      };
      return true;
    } finally {
      gate?.release();
      if (m !== undefined) delete m.starting;
    }
  };
  const results = await Promise.all(
    actions.map(async (a): Promise<boolean> => {
      if (a.kind === 'serve') {
        await getExternalWorkflowHandle(proxyWorkflowId(spec.entry, a.name))
          .signal(memberServingSignal, { serving: a.serving })
          .catch(() => undefined); // a member that ended meanwhile: its end report follows
        return false;
      }
      if (a.kind === 'delete') {
        try {
          await quick.deletePoolMember({ entry: spec.entry, name: a.name });
        } catch (err) {
          const m = state.members.find((x) => x.name === a.name);
          if (m !== undefined) m.deleteSent = false; // the next pass asks again
          state.reason = `deleting ${a.name}: ${failureInfo(err).message}`;
        }
        return false;
      }
      if (background === undefined) return start(a);
      if (gate === undefined) background(start(a));
      else {
        const m = state.members.find((x) => x.name === a.name);
        if (m !== undefined) m.starting = true; // waiting for a slot counts as starting
        gate.launch(() => background(start(a)));
      }
      return false;
    }),
  );
  return results.includes(true);
}

/**
 * Marks members whose workflow is no longer open (a report lost, a termination) as ended. With
 * `started` (the pool passes true) only members whose start went through, counted from then: a
 * member still waiting for a start slot has no workflow yet.
 */
export async function audit(state: PoolState, started = false): Promise<void> {
  const now = Date.now();
  const old = auditable(state.members, now, AUDIT_MIN_AGE_MS, started);
  if (old.length === 0) return;
  let open: string[];
  try {
    open = await quick.listPoolMembers({ entry: state.spec.entry, pool: state.spec.name });
  } catch {
    return; // the next audit tries again
  }
  const set = new Set(open);
  for (const m of old) {
    if (set.has(m.name)) continue;
    const at = new Date().toISOString();
    m.report = {
      ...(m.report ?? { name: m.name, health: 'Unknown', healthSince: at, port: 0, serving: false }),
      state: m.role === 'leaving' ? 'Deleted' : 'Failed',
      lastError: m.report?.lastError ?? 'its workflow is no longer open',
      at,
    };
  }
}

/** Memo, search attributes and current details: upserted only when what they hold changes. */
export function publishPool(state: PoolState, last: string, phase?: 'Deleted'): string {
  const st = poolStatus(state, Date.now());
  const memo = {
    pool: st.name,
    entry: st.entry,
    phase: phase ?? st.phase,
    desired: st.desired,
    spares: st.spares,
    healthy: st.healthy,
    available: st.available,
    updated: st.updated,
    revision: st.revision,
    replacements: st.replacements,
    rollbacks: st.rollbacks,
  };
  const key = JSON.stringify(memo);
  const step = [st.rollout?.step ?? st.reason ?? '', ...st.drainingHosts.map((h) => `draining ${h}`)]
    .filter((x) => x !== '')
    .join(' · ');
  setCurrentDetails(
    `**${memo.phase}** · pool \`${st.entry}/${st.name}\` · desired ${st.desired} · healthy ${st.healthy} · ` +
      `available ${st.available} · updated ${st.updated} · spares ${st.spares}${step ? ` · ${step}` : ''}`,
  );
  if (key === last) return last;
  if (last === '') {
    upsertSearchAttributes([
      { key: ENTRY_KEY, value: st.entry },
      { key: POOL_KEY, value: `${st.entry}/${st.name}` },
    ]);
  }
  upsertMemo(memo);
  return key;
}
