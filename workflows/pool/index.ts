// A pool: one long-lived workflow per (entry, pool), `pool/<entry>/<pool>`, that keeps `size`
// healthy members in discovery (and `spares` more out of it), replaces the failed and the
// unhealthy, rolls a new template through within its surge and unavailability budget, rolls back
// a rollout that stalls, and rotates members by age. Members are proxy workflows it starts
// (`proxy/<entry>/<pool>-<suffix>`) that report their changes back by signal, so a pool at rest
// records nothing. The rules are the pure reconciler's (plan.ts); this file applies them.
import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import {
  memberServingSignal,
  poolDeleteUpdate,
  poolMemberSignal,
  poolPauseUpdate,
  poolResumeUpdate,
  poolRollbackUpdate,
  poolScaleUpdate,
  poolSpecUpdate,
  poolStatusQuery,
} from '../../contracts/messages.ts';
import type { PoolSpec, PoolSpecPatch, PoolStatus, RollbackRequest, ScaleRequest } from '../../contracts/pool.ts';
import { poolSpecProblems, resolvePoolSpec, scaleProblems } from '../../contracts/pool.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_POOL } from '../../contracts/search-attributes.ts';
import { CODES } from '../../contracts/errors.ts';
import { failureInfo } from '../failures.ts';
import { quick } from '../stubs.ts';
import type { PoolAction, PoolState } from './plan.ts';
import { applyReport, reconcile, rollbackTo } from './plan.ts';
import { poolStatus, rollbackTarget, specOfState } from './status.ts';

export interface PoolWorkflowInput {
  spec: PoolSpec;
  /** The installation's owner UID, handed to members. */
  ownerUid?: string;
  /** Continue-as-new after this many passes of the reconciler (default 500, or when the server suggests it). */
  continueAsNewAfterPasses?: number;
  /** Set by the previous run on continue-as-new; clients leave it unset. */
  carried?: PoolState;
}

/** How often the pool checks that every member it knows still has an open workflow. */
const AUDIT_INTERVAL_MS = 300_000;
/** A member younger than this is not audited (its start may not be visible yet). */
const AUDIT_MIN_AGE_MS = 120_000;

const ENTRY_KEY = defineSearchAttributeKey(SA_PROVIDER_ENTRY, SearchAttributeType.KEYWORD);
const POOL_KEY = defineSearchAttributeKey(SA_PROXY_POOL, SearchAttributeType.KEYWORD);

export async function poolWorkflow(input: PoolWorkflowInput): Promise<PoolStatus> {
  const at = new Date().toISOString();
  const state: PoolState = input.carried ?? initialState(input.spec, at);
  let dirty = true;
  let passes = 0;
  const poke = (): void => {
    dirty = true;
  };

  setHandler(poolStatusQuery, () => poolStatus(state, Date.now()));
  setHandler(poolMemberSignal, (report) => {
    if (applyReport(state, report)) poke();
  });
  const refuse = (problems: string[]): void => {
    if (problems.length > 0) throw new Error(problems.join('; '));
  };
  const notDeleting = (): string[] => (state.deleting ? ['the pool is being deleted'] : []);
  setHandler(
    poolScaleUpdate,
    (req: ScaleRequest) => {
      state.spec = { ...state.spec, size: req.size, spares: req.spares ?? state.spec.spares };
      poke();
      return poolStatus(state, Date.now());
    },
    { validator: (req: ScaleRequest) => refuse([...notDeleting(), ...scaleProblems(req?.size, req?.spares)]) },
  );
  setHandler(
    poolSpecUpdate,
    (patch: PoolSpecPatch) => {
      const next = resolvePoolSpec({ ...specOfState(state), ...patch });
      if (patch.template !== undefined && JSON.stringify(patch.template) !== JSON.stringify(state.spec.template)) {
        const revision = Math.max(...state.revisions.map((r) => r.revision)) + 1;
        state.revisions = [
          ...state.revisions,
          { revision, template: patch.template, at: new Date().toISOString() },
        ].slice(-10);
        state.revision = revision;
        state.removedOld = 0;
        state.reason = undefined;
      }
      state.spec = next;
      poke();
      return poolStatus(state, Date.now());
    },
    {
      validator: (patch: PoolSpecPatch) => {
        if (typeof patch !== 'object' || patch === null) throw new Error('the spec update must be an object');
        refuse([...notDeleting(), ...poolSpecProblems({ ...specOfState(state), ...patch })]);
      },
    },
  );
  setHandler(
    poolPauseUpdate,
    () => {
      state.paused = true;
      poke();
      return poolStatus(state, Date.now());
    },
    { validator: () => refuse(notDeleting()) },
  );
  setHandler(
    poolResumeUpdate,
    () => {
      state.paused = false;
      poke();
      return poolStatus(state, Date.now());
    },
    { validator: () => refuse(notDeleting()) },
  );
  setHandler(
    poolRollbackUpdate,
    (req: RollbackRequest) => {
      const target = rollbackTarget(state, req?.revision);
      if (typeof target === 'number') {
        state.reason = `rolled back to revision ${target} on request`;
        rollbackTo(state, target, Date.now());
      }
      poke();
      return poolStatus(state, Date.now());
    },
    {
      validator: (req: RollbackRequest) => {
        refuse(notDeleting());
        const target = rollbackTarget(state, req?.revision);
        if (typeof target === 'string') throw new Error(target);
      },
    },
  );
  setHandler(
    poolDeleteUpdate,
    () => {
      state.deleting = true;
      poke();
      return poolStatus(state, Date.now());
    },
    { validator: () => undefined },
  );

  let published = '';
  let nextAuditMs = Date.now() + AUDIT_INTERVAL_MS;
  for (;;) {
    dirty = false;
    passes++;
    const plan = reconcile(state, Date.now(), Math.random);
    published = publishPool(state, published);
    await apply(state, plan.actions, input);
    if (state.deleting && state.members.length === 0) break;

    const limit = input.continueAsNewAfterPasses ?? 500;
    if (passes >= limit || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof poolWorkflow>({ ...input, carried: state });
    }
    const now = Date.now();
    const wakeAt = Math.min(plan.wakeAtMs ?? Infinity, nextAuditMs);
    if (!dirty) await condition(() => dirty, Math.max(1, wakeAt - now));
    if (Date.now() >= nextAuditMs) {
      await audit(state);
      nextAuditMs = Date.now() + AUDIT_INTERVAL_MS;
    }
  }
  const end = poolStatus(state, Date.now());
  end.phase = 'Deleted';
  publishPool(state, published, 'Deleted');
  await condition(allHandlersFinished);
  return end;
}

function initialState(spec: PoolSpec, at: string): PoolState {
  const problems = poolSpecProblems(spec);
  if (problems.length > 0) {
    throw ApplicationFailure.create({ type: CODES.poolSpecInvalid, message: problems.join('; '), nonRetryable: true });
  }
  const resolved = resolvePoolSpec(spec);
  return {
    spec: resolved,
    revision: 1,
    revisions: [{ revision: 1, template: resolved.template, at }],
    members: [],
    paused: false,
    failures: [],
    backoffs: 0,
    replacements: 0,
    rollbacks: 0,
    removedOld: 0,
    deleting: false,
    createdAt: at,
  };
}

/** Applies the reconciler's actions: starts and deletes through activities, roles by signal. */
async function apply(state: PoolState, actions: PoolAction[], input: PoolWorkflowInput): Promise<void> {
  const { spec } = state;
  const poolId = workflowInfo().workflowId;
  const hostsOf = (): Map<string, number> => {
    const counts = new Map<string, number>();
    for (const m of state.members) {
      const h = m.report?.host;
      if (h !== undefined && m.role !== 'leaving') counts.set(h, (counts.get(h) ?? 0) + 1);
    }
    return counts;
  };
  await Promise.all(
    actions.map(async (a) => {
      if (a.kind === 'serve') {
        await getExternalWorkflowHandle(proxyWorkflowId(spec.entry, a.name))
          .signal(memberServingSignal, { serving: a.serving })
          .catch(() => undefined); // a member that ended meanwhile: its end report follows
        return;
      }
      if (a.kind === 'delete') {
        try {
          await quick.deletePoolMember({ entry: spec.entry, name: a.name });
        } catch (err) {
          const m = state.members.find((x) => x.name === a.name);
          if (m !== undefined) m.deleteSent = false; // the next pass asks again
          state.reason = `deleting ${a.name}: ${failureInfo(err).message}`;
        }
        return;
      }
      const template = state.revisions.find((r) => r.revision === a.revision)?.template ?? spec.template;
      const counts = hostsOf();
      const perHost = spec.placement.maxPerHost ?? Infinity;
      const fewest = Math.min(...counts.values());
      const crowded = [...counts]
        .filter(([, n]) => n >= perHost || (perHost === Infinity && n > fewest))
        .map(([h]) => h);
      try {
        await quick.startPoolMember({
          pool: poolId,
          poolName: spec.name,
          entry: spec.entry,
          name: a.name,
          template,
          ...(input.ownerUid === undefined ? {} : { ownerUid: input.ownerUid }),
          avoidHosts: spec.placement.avoidHosts,
          crowdedHosts: crowded,
        });
      } catch (err) {
        // Not started (the ID is taken by another spec, the entry is unknown...): gone again, and
        // it counts against the loop guard like a member that failed.
        const m = state.members.find((x) => x.name === a.name);
        if (m !== undefined) {
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
        }
      }
    }),
  );
}

/** Marks members whose workflow is no longer open (a report lost, a termination) as ended. */
async function audit(state: PoolState): Promise<void> {
  const now = Date.now();
  const old = state.members.filter((m) => now - m.createdAtMs >= AUDIT_MIN_AGE_MS);
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
function publishPool(state: PoolState, last: string, phase?: 'Deleted'): string {
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
  };
  const key = JSON.stringify(memo);
  const step = st.rollout?.step ?? st.reason ?? '';
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
