// A pool: one long-lived workflow per (entry, pool), `pool/<entry>/<pool>`, that keeps `size`
// healthy members in discovery (and `spares` more out of it), replaces the failed and the
// unhealthy, rolls a new template through within its surge and unavailability budget, rolls back
// a rollout that stalls, and rotates members by age. Members are proxy workflows it starts
// (`proxy/<entry>/<pool>-<suffix>`) that report their changes back by signal, so a pool at rest
// records nothing but its 5-minute audit (docs/pools.md, "Size"). The rules are the pure
// reconciler's (plan.ts); this file applies them.
import { ApplicationFailure, allHandlersFinished, condition, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  poolDeleteUpdate,
  poolDoorSignal,
  poolHostDrainSignal,
  poolMemberSignal,
  poolPauseUpdate,
  poolReplaceMemberUpdate,
  poolResumeUpdate,
  poolRollbackUpdate,
  poolScaleUpdate,
  poolSpecUpdate,
  poolStatusQuery,
} from '../../contracts/messages.ts';
import type {
  PoolSpec,
  PoolSpecPatch,
  PoolStatus,
  ReplaceMemberRequest,
  RollbackRequest,
  ScaleRequest,
} from '../../contracts/pool.ts';
import { doorReportOf, POOL_DEFAULTS, poolSpecProblems, resolvePoolSpec, scaleProblems } from '../../contracts/pool.ts';
import { CODES } from '../../contracts/errors.ts';
import type { PoolState, PoolWorkflowInput } from '../../contracts/pool-state.ts';
import { applyDrainNotice, applyReport, applySpec, newPoolState, nextRandom, reconcile } from './plan.ts';
import { rollbackTo, seedOf } from './plan.ts';
import { poolStatus, poolBrief, rollbackTarget, specOfState } from './status.ts';
import { apply, audit, AUDIT_INTERVAL_MS, publishPool } from './effects.ts';
import { replaceOnRequest, replaceRequestProblem } from './requests.ts';
import { carriedState, uncarried } from './carry.ts';
import { retired } from '../retiring.ts';
import { continueOntoCurrentBuild, newerBuildCurrent } from '../upgrade.ts';

// The patches that runs from before 0.2.0 recorded, accepted where they recorded them
// (../retiring.ts): host maintenance (drain notices, the host-failure rule), member starts in the
// background, the start window, an audit that leaves unstarted members alone, and passing on until
// the starts settle once due to continue as new.
export const POOL_HOSTS_PATCH = 'pool-host-maintenance';
export const POOL_BACKGROUND_STARTS_PATCH = 'pool-background-starts';
export const POOL_START_WINDOW_PATCH = 'pool-start-window';
export const POOL_AUDIT_STARTED_PATCH = 'pool-audit-started';
export const POOL_CONTINUE_WHEN_SETTLED_PATCH = 'pool-continue-when-settled';
/**
 * Once due to continue as new, a run goes on passing (members that came up are still told to serve)
 * until its starts settle, up to this history length; past it, it stops passing and waits for them,
 * so passes cannot go on for ever while replacements keep being started. Well under the server's
 * hard limit of 51,200 events.
 */
export const POOL_SETTLE_HISTORY_CEILING = 20_000;
/** Member starts in flight at once, unless the input says otherwise. */
export const POOL_START_WINDOW = 50;

export async function poolWorkflow(input: PoolWorkflowInput): Promise<PoolStatus> {
  const at = new Date().toISOString();
  const state: PoolState = input.carried === undefined ? initialState(input.spec, at) : uncarried(input.carried);
  // A state carried from a build before replacement on request: its default limit, shown in the spec.
  state.spec.replacement.requestedPerHour ??= POOL_DEFAULTS.requestedPerHour;
  let dirty = true;
  let passes = 0;
  const poke = (): void => {
    dirty = true;
  };

  setHandler(poolStatusQuery, () => poolStatus(state, Date.now()));
  setHandler(poolMemberSignal, (report) => {
    if (applyReport(state, report)) poke();
  });
  // The door's report is shown, not acted on: the members' own reports decide discovery.
  setHandler(poolDoorSignal, (report) => {
    const r = doorReportOf(report);
    if (r !== undefined) state.door = r;
  });
  setHandler(poolHostDrainSignal, (notice) => {
    if (retired(POOL_HOSTS_PATCH) && applyDrainNotice(state, notice)) poke();
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
      return poolBrief(state, Date.now());
    },
    { validator: (req: ScaleRequest) => refuse([...notDeleting(), ...scaleProblems(req?.size, req?.spares)]) },
  );
  setHandler(
    poolSpecUpdate,
    (patch: PoolSpecPatch) => {
      applySpec(state, resolvePoolSpec({ ...specOfState(state), ...patch }), new Date().toISOString());
      poke();
      return poolBrief(state, Date.now());
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
      return poolBrief(state, Date.now());
    },
    { validator: () => refuse(notDeleting()) },
  );
  setHandler(
    poolResumeUpdate,
    () => {
      state.paused = false;
      poke();
      return poolBrief(state, Date.now());
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
      return poolBrief(state, Date.now());
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
    poolReplaceMemberUpdate,
    (req: ReplaceMemberRequest) => {
      replaceOnRequest(state, req, Date.now());
      poke();
      return poolBrief(state, Date.now());
    },
    {
      validator: (req: ReplaceMemberRequest) => {
        const problem = replaceRequestProblem(state, req, Date.now());
        if (problem !== undefined) throw new Error(problem);
      },
    },
  );
  setHandler(
    poolDeleteUpdate,
    () => {
      state.deleting = true;
      poke();
      return poolBrief(state, Date.now());
    },
    { validator: () => undefined },
  );

  /** Starts handed to the background, not settled yet (awaited before continue-as-new and the end). */
  const starting = new Set<Promise<boolean>>();
  const background = (start: Promise<boolean>): void => {
    starting.add(start);
    void start.then(() => {
      starting.delete(start);
      poke(); // a failed start is replaced, a member left while starting may now be deleted
    });
  };
  // The start window: a start goes ahead while a slot is free and waits in `queued` otherwise; a
  // settled start frees its slot and pokes the loop, whose next pass starts the oldest waiting
  // ones. Every start is launched from the loop's own pass, so the order of its commands never
  // depends on which of two resumed coroutines runs first.
  let startSlots = Math.max(1, input.startWindow ?? POOL_START_WINDOW);
  const queued: (() => void)[] = [];
  const drainQueued = (): void => {
    while (startSlots > 0 && queued.length > 0) {
      startSlots--;
      queued.shift()!();
    }
  };
  const window = {
    launch: (go: () => void): void => {
      queued.push(go);
      drainQueued();
    },
    release: (): void => {
      startSlots++;
      poke();
    },
  };
  /** Waiting starts go out as slots free (each settled start frees one), then the state is carried to a new run. */
  const continueWhenSettled = async (): Promise<never> => {
    while (queued.length > 0 || starting.size > 0) {
      drainQueued();
      await condition(() => starting.size === 0 || (startSlots > 0 && queued.length > 0));
    }
    await condition(allHandlersFinished);
    return continueOntoCurrentBuild<typeof poolWorkflow>()({ ...input, carried: carriedState(state, Date.now()) });
  };
  let published = '';
  let nextAuditMs = Date.now() + AUDIT_INTERVAL_MS;
  for (;;) {
    dirty = false;
    passes++;
    const plan = reconcile(state, Date.now(), () => nextRandom(state), { hostFailure: retired(POOL_HOSTS_PATCH) });
    published = publishPool(state, published);
    const inBackground = retired(POOL_BACKGROUND_STARTS_PATCH) ? background : undefined;
    const gate = inBackground !== undefined && retired(POOL_START_WINDOW_PATCH) ? window : undefined;
    if (gate !== undefined) drainQueued(); // waiting starts, into the slots freed since the last pass
    if (await apply(state, plan.actions, input, inBackground, gate)) poke();
    if (state.deleting && state.members.length === 0) break;

    const limit = input.continueAsNewAfterPasses ?? 500;
    if (passes >= limit || workflowInfo().continueAsNewSuggested || newerBuildCurrent()) {
      const settled = queued.length === 0 && starting.size === 0;
      // Due with starts still to settle: pass on (each settled start pokes the loop), unless the
      // history is past the ceiling.
      const passOn =
        !settled &&
        workflowInfo().historyLength < POOL_SETTLE_HISTORY_CEILING &&
        retired(POOL_CONTINUE_WHEN_SETTLED_PATCH);
      if (!passOn) await continueWhenSettled();
    }
    const now = Date.now();
    const wakeAt = Math.min(plan.wakeAtMs ?? Infinity, nextAuditMs);
    if (!dirty) await condition(() => dirty, Math.max(1, wakeAt - now));
    if (Date.now() >= nextAuditMs) {
      await audit(state, retired(POOL_AUDIT_STARTED_PATCH));
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
  return newPoolState(resolvePoolSpec(spec), at, seedOf(workflowInfo().firstExecutionRunId));
}
