/**
 * Harness of the pool's workflow tests: the real poolWorkflow on the time-skipping server with
 * fakes of its three activities. The fake startPoolMember starts a member stand-in
 * (pool-member-workflow.ts) under the member's ID, so the pool's `serving` signals reach it and it
 * reports back as a member proxy does; the fake deletePoolMember plays the member's deletion.
 * Every wait is bounded.
 */
import { bundleWorkflowCode } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { WorkflowHandle } from '@temporalio/client';
import { fileURLToPath } from 'node:url';
import { after, before } from 'node:test';
import type { StartMemberInput } from '../../activities/pool.ts';
import { poolStatusQuery } from '../../contracts/messages.ts';
import type { PoolSpec, PoolStatus } from '../../contracts/pool.ts';
import { POOL_WORKFLOW_TYPE, poolWorkflowId } from '../../contracts/pool.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import type { poolWorkflow } from '../../workflows/pool/index.ts';
import type { PoolWorkflowInput } from '../../contracts/pool-state.ts';
import type { MemberPatch, StandInInput, StandInView } from './pool-member-workflow.ts';
import { STAND_IN_WORKFLOW_TYPE, standInPlaySignal, standInViewQuery } from './pool-member-workflow.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { setupTracing } from '../../runtime/telemetry.ts';
import { installTestRuntime, pollUntil, withTimeout } from './temporal.ts';
import { ENTRY, Env, uniqueName, WAIT_MS, withWorker } from './workflow-harness.ts';

const POOL_WORKFLOWS_PATH = fileURLToPath(new URL('./pool-workflows.ts', import.meta.url));

/** The Env of the pool tests: the bundle holds the member stand-in beside the project's workflows. */
export class PoolEnv extends Env {
  private poolBundle: WorkflowBundleWithSourceMap | undefined;
  override get bundle(): WorkflowBundleWithSourceMap {
    if (this.poolBundle === undefined) throw new Error('no workflow bundle: call load() first (poolFileEnv does)');
    return this.poolBundle;
  }
  override async load(): Promise<void> {
    installTestRuntime();
    const quiet = () => undefined;
    const logger = { log: quiet, trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet };
    // As workers/worker.ts runs them: with the tracing plugin's workflow interceptors, which are
    // part of the workflow code (they change when a coroutine's continuation runs, so a history
    // recorded without them need not replay with them: test/unit/replay.test.ts replays with them).
    const tracing = setupTracing(createLogger({ name: 'test', level: 'warn', stream: 'stderr' }));
    this.plugins = [tracing.plugin];
    this.poolBundle = await withTimeout(
      bundleWorkflowCode({ workflowsPath: POOL_WORKFLOWS_PATH, logger, plugins: [tracing.plugin] }),
      60_000,
      'bundle the pool test workflows',
    );
  }
}

export function poolFileEnv(): PoolEnv {
  const e = new PoolEnv();
  before(() => e.load());
  after(() => e.close());
  return e;
}

/** What a new member does at once: Healthy, Failed, or nothing (it stays Provisioning). */
export type Fate = 'healthy' | 'fail' | 'hang';

export interface PoolCall {
  activity: 'startPoolMember' | 'deletePoolMember' | 'listPoolMembers';
  name?: string;
  imageKey?: string;
  /** startPoolMember: where the pool told it not to go. */
  avoidHosts?: string[];
}

/** Fakes of the pool's activities, with a log of each call and the members they started. */
export class PoolFakes {
  readonly calls: PoolCall[] = [];
  /** Members whose stand-in was started and has not been deleted. */
  readonly open = new Set<string>();
  taskQueue = '';
  /** Where the stand-ins' handles go (terminated when the test ends). */
  started: WorkflowHandle[] = [];
  hosts = ['h1', 'h2'];
  fate: (input: StartMemberInput) => Fate = () => 'healthy';
  /** Throws to make a start fail (as a refused start would). */
  beforeStart: (input: StartMemberInput) => void = () => undefined;
  /** A promise to hold a start on (a slow start), or undefined. */
  holdStart: (input: StartMemberInput) => Promise<void> | undefined = () => undefined;
  private count = 0;
  private readonly e: Env;
  constructor(e: Env) {
    this.e = e;
  }

  activities(): Record<string, (input: never) => Promise<unknown>> {
    return {
      startPoolMember: async (input: StartMemberInput) => {
        this.calls.push({
          activity: 'startPoolMember',
          name: input.name,
          imageKey: input.template.imageKey,
          avoidHosts: input.avoidHosts,
        });
        this.beforeStart(input);
        await this.holdStart(input);
        const i = this.count++;
        const fate = this.fate(input);
        // The hosts in turn, skipping those the pool said to avoid (as the member's placement does).
        const free = this.hosts.filter((h) => !input.avoidHosts.includes(h));
        const host = free.length === 0 ? this.hosts[i % this.hosts.length]! : free[i % free.length]!;
        const first: MemberPatch =
          fate === 'healthy'
            ? { state: 'Running', health: 'True', host, ip: `10.0.0.${10 + i}` }
            : fate === 'fail'
              ? { state: 'Failed', lastError: 'KVM2_BOOT_TIMEOUT: no address' }
              : {};
        const args: StandInInput = { pool: input.pool, name: input.name, first };
        const handle = await this.e.env.client.workflow.start(STAND_IN_WORKFLOW_TYPE, {
          workflowId: proxyWorkflowId(input.entry, input.name),
          taskQueue: this.taskQueue,
          args: [args],
        });
        this.started.push(handle);
        if (fate !== 'fail') this.open.add(input.name);
        return { started: true };
      },
      deletePoolMember: async (input: { entry: string; name: string }) => {
        this.calls.push({ activity: 'deletePoolMember', name: input.name });
        if (!this.open.delete(input.name)) return 'absent';
        await this.member(input.name).signal(standInPlaySignal, { state: 'Deleted', serving: false });
        return 'accepted';
      },
      listPoolMembers: (_input: { entry: string; pool: string }) => {
        this.calls.push({ activity: 'listPoolMembers' });
        return Promise.resolve([...this.open]);
      },
    };
  }

  starts(): PoolCall[] {
    return this.calls.filter((c) => c.activity === 'startPoolMember');
  }
  deletes(): string[] {
    return this.calls.filter((c) => c.activity === 'deletePoolMember').map((c) => c.name!);
  }

  member(name: string): WorkflowHandle {
    return this.e.env.client.workflow.getHandle(proxyWorkflowId(ENTRY, name));
  }

  /** Plays a change of a member: it reports it to the pool. */
  async play(name: string, patch: MemberPatch): Promise<void> {
    await this.member(name).signal(standInPlaySignal, patch);
  }

  async view(name: string): Promise<StandInView> {
    return this.member(name).query(standInViewQuery);
  }
}

/** A pool spec for the tests: members count as available at once and leave without a drain delay. */
export function testPoolSpec(over: Partial<PoolSpec> = {}): PoolSpec {
  return {
    entry: ENTRY,
    name: uniqueName('p').slice(0, 20).replace(/-+$/, ''),
    size: 2,
    template: { imageKey: 'img-a' },
    rollout: { minHealthyMs: 0 },
    drainDelayMs: 0,
    ...over,
  };
}

export type PoolHandle = WorkflowHandle<typeof poolWorkflow>;

export async function startPool(
  e: Env,
  taskQueue: string,
  started: WorkflowHandle[],
  spec: PoolSpec,
  extra: Partial<PoolWorkflowInput> = {},
): Promise<PoolHandle> {
  const handle = await e.env.client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
    workflowId: poolWorkflowId(spec.entry, spec.name),
    taskQueue,
    args: [{ spec, ...extra }],
  });
  started.push(handle);
  return handle;
}

/** The pool's status (the query bounded: a query the server never routes would wait forever). */
export async function poolStatus(h: WorkflowHandle): Promise<PoolStatus> {
  return withTimeout(h.query(poolStatusQuery), 5_000, 'the pool status query');
}

/** Queries the pool's status until `pred` holds (bounded); `each` sees every status read. */
export async function poolWhen(
  h: WorkflowHandle,
  pred: (s: PoolStatus) => boolean,
  what: string,
  each: (s: PoolStatus) => void = () => undefined,
): Promise<PoolStatus> {
  let last: PoolStatus | undefined;
  try {
    return await pollUntil(
      async () => {
        const s = await poolStatus(h).catch(() => undefined);
        if (s === undefined) return undefined;
        last = s;
        each(s);
        return pred(s) ? s : undefined;
      },
      { timeoutMs: WAIT_MS, intervalMs: 25, what },
    );
  } catch (err) {
    const seen = last === undefined ? 'no status' : `phase ${last.phase}, ${JSON.stringify(summary(last))}`;
    throw new Error(`${err instanceof Error ? err.message : String(err)}; last: ${seen}`, { cause: err });
  }
}

export function summary(s: PoolStatus): object {
  return {
    revision: s.revision,
    available: s.available,
    reason: s.reason,
    members: s.members.map(
      (m) => `${m.name} r${m.revision} ${m.role} ${m.state}/${m.healthy}${m.condemned ? ' condemned' : ''}`,
    ),
  };
}

/** Ready with `n` available members, all on `revision`. */
export function readyAt(n: number, revision = 1): (s: PoolStatus) => boolean {
  return (s) => s.phase === 'Ready' && s.available === n && s.members.every((m) => m.revision === revision);
}

/** Runs `fn` with a worker on `e` serving `f`'s fakes; everything the test started is terminated after. */
export async function withPool<T>(
  e: PoolEnv,
  f: PoolFakes,
  fn: (tq: string, started: WorkflowHandle[]) => Promise<T>,
): Promise<T> {
  const started: WorkflowHandle[] = [];
  return withWorker(
    e,
    f.activities(),
    async (tq) => {
      f.taskQueue = tq;
      f.started = started;
      return fn(tq, started);
    },
    started,
  );
}
