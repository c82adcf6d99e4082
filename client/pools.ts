// The pool workflow's client calls: start (the proxies' start policy: one open run per ID, the
// same spec again is the same pool, another spec a conflict), describe, the status query, the
// visibility list, the operator updates (scale, spec, pause, resume, rollback, delete: each has a
// validator in the workflow, so a refusal comes back at once with its reason) and the bounded wait
// for a deleted pool's end. The API's store (`temporalPoolStore`) and tests call these.
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import type { Client, WorkflowExecutionInfo, WorkflowHandle } from '@temporalio/client';
import { executionInfoFromRaw } from '@temporalio/client/lib/helpers.js';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { canonicalJson } from '../contracts/canonical-json.ts';
import {
  poolDeleteUpdate,
  poolPauseUpdate,
  poolResumeUpdate,
  poolReplaceMemberUpdate,
  poolRollbackUpdate,
  poolScaleUpdate,
  poolSpecUpdate,
  poolStatusQuery,
} from '../contracts/messages.ts';
import { POOL_WORKFLOW_TYPE, poolWorkflowId } from '../contracts/pool.ts';
import { poolTaskQueue } from '../contracts/task-queues.ts';
import type {
  PoolPhase,
  PoolSpec,
  PoolSpecPatch,
  PoolBrief,
  PoolStatus,
  ReplaceMemberRequest,
  RollbackRequest,
  ScaleRequest,
} from '../contracts/pool.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_POOL } from '../contracts/search-attributes.ts';
import type { poolWorkflow } from '../workflows/pool/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { isTemporalUnavailable, TemporalUnavailableError } from './errors.ts';
import { STATUS_QUERY_TIMEOUT_MS } from './proxies.ts';

const ENTRY_KEY = defineSearchAttributeKey(SA_PROVIDER_ENTRY, SearchAttributeType.KEYWORD);
const POOL_KEY = defineSearchAttributeKey(SA_PROXY_POOL, SearchAttributeType.KEYWORD);

/** A pool as visibility lists it: its memo (the counts of its last change), no query. */
export interface PoolSummary {
  name: string;
  entry: string;
  workflowId: string;
  runId: string;
  /** Temporal's execution status name: RUNNING, COMPLETED, FAILED, TERMINATED, ... */
  execution: string;
  phase?: PoolPhase;
  desired?: number;
  spares?: number;
  healthy?: number;
  available?: number;
  updated?: number;
  revision?: number;
  /** Members replaced and rollouts rolled back over the pool's life. */
  replacements?: number;
  rollbacks?: number;
  startTime: string;
  closeTime?: string;
}

export type StartPoolResult =
  | { started: true; pool: PoolSummary }
  /** An open pool of that ID exists; `spec` is what it was started with (undefined: unknown). */
  | { started: false; pool: PoolSummary; spec: PoolSpec | undefined };

/** What an operator update answers. */
export type PoolUpdateResult =
  /** Accepted and applied: the pool's status after it. */
  | { kind: 'done'; status: PoolStatus }
  /** The pool's validator refused it (or the pool has ended); `message` is the reason. */
  | { kind: 'refused'; message: string };

export type PoolDeleteResult = PoolUpdateResult | { kind: 'closed'; pool: PoolSummary };

/** One operator update, as the API's store takes it. */
export type PoolUpdate =
  | { kind: 'scale'; request: ScaleRequest }
  | { kind: 'spec'; patch: PoolSpecPatch }
  | { kind: 'pause' }
  | { kind: 'resume' }
  | { kind: 'rollback'; request: RollbackRequest }
  | { kind: 'replaceMember'; request: ReplaceMemberRequest };

export interface PoolCallOptions {
  /** Deadline of one Temporal call, in ms (default DEFAULT_CALL_TIMEOUT_MS). */
  callTimeoutMs?: number;
}

const handleOf = (client: Client, entry: string, name: string): WorkflowHandle<typeof poolWorkflow> =>
  client.workflow.getHandle<typeof poolWorkflow>(poolWorkflowId(entry, name));

const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/** A visibility record or description as a PoolSummary. */
export function poolSummaryOf(
  info: Pick<WorkflowExecutionInfo, 'workflowId' | 'runId' | 'status' | 'startTime' | 'closeTime' | 'memo'>,
): PoolSummary {
  const [, entryFromId = '', ...rest] = info.workflowId.split('/');
  const memo = info.memo ?? {};
  const out: PoolSummary = {
    name: typeof memo['pool'] === 'string' ? memo['pool'] : rest.join('/'),
    entry: typeof memo['entry'] === 'string' ? memo['entry'] : entryFromId,
    workflowId: info.workflowId,
    runId: info.runId,
    execution: info.status.name,
    startTime: info.startTime.toISOString(),
  };
  if (typeof memo['phase'] === 'string') out.phase = memo['phase'] as PoolPhase;
  for (const k of [
    'desired',
    'spares',
    'healthy',
    'available',
    'updated',
    'revision',
    'replacements',
    'rollbacks',
  ] as const) {
    const v = num(memo[k]);
    if (v !== undefined) out[k] = v;
  }
  if (info.closeTime !== undefined) out.closeTime = info.closeTime.toISOString();
  return out;
}

/** The visibility query of the pool list: `WorkflowType = 'poolWorkflow' AND ...` (plain identifiers). */
export function poolListQuery(f: { entry?: string; openOnly?: boolean }): string {
  const parts = [`WorkflowType = '${POOL_WORKFLOW_TYPE}'`];
  if (f.entry !== undefined) parts.push(`${SA_PROVIDER_ENTRY} = '${f.entry.replaceAll("'", "\\'")}'`);
  if (f.openOnly) parts.push(`ExecutionStatus = 'Running'`);
  return parts.join(' AND ');
}

/** The pool's latest run, or undefined when no workflow has that ID. */
export async function describePool(
  client: Client,
  entry: string,
  name: string,
  o: PoolCallOptions = {},
): Promise<PoolSummary | undefined> {
  try {
    const desc = await withDeadline(client, 'describe', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
      handleOf(client, entry, name).describe(),
    );
    return poolSummaryOf(desc);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** A spec as the memo carries it (what the pool was started with), or undefined. */
function specOfMemo(raw: unknown): PoolSpec | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r['name'] !== 'string' || typeof r['entry'] !== 'string' || typeof r['template'] !== 'object') {
    return undefined;
  }
  return raw as PoolSpec;
}

/**
 * Starts the pool's workflow (ID `pool/<entry>/<name>`, on the pools' task queue beside `o.taskQueue`:
 * contracts/task-queues.ts; the spec in its memo, ProviderEntry and
 * ProxyPool set at start so the list finds it at once), or finds the run already open for that ID:
 * then `started` is false and `spec` is what that run was started with (`samePoolSpec` compares).
 */
export async function startPool(
  client: Client,
  spec: PoolSpec,
  o: PoolCallOptions & { taskQueue: string },
): Promise<StartPoolResult> {
  const timeoutMs = o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      const h = await withDeadline(client, 'start', timeoutMs, () =>
        client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
          taskQueue: poolTaskQueue(o.taskQueue),
          workflowId: poolWorkflowId(spec.entry, spec.name),
          args: [{ spec }],
          memo: { spec, pool: spec.name, entry: spec.entry },
          typedSearchAttributes: [
            { key: ENTRY_KEY, value: spec.entry },
            { key: POOL_KEY, value: `${spec.entry}/${spec.name}` },
          ],
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'ALLOW_DUPLICATE',
          staticSummary: `pool ${spec.entry}/${spec.name}: ${spec.size} × ${spec.template.imageKey}`,
        }),
      );
      return {
        started: true,
        pool: {
          name: spec.name,
          entry: spec.entry,
          workflowId: h.workflowId,
          runId: h.firstExecutionRunId,
          execution: 'RUNNING',
          desired: spec.size,
          startTime: new Date().toISOString(),
        },
      };
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    let desc;
    try {
      desc = await withDeadline(client, 'describe', timeoutMs, () =>
        handleOf(client, spec.entry, spec.name).describe(),
      );
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    // It closed between the start and the describe: start again (a closed ID may be reused).
    if (desc === undefined || desc.status.name !== 'RUNNING') {
      if (attempt < 2) continue;
      throw new TemporalUnavailableError('the pool workflow kept changing while it was being started; retry');
    }
    return { started: false, pool: poolSummaryOf(desc), spec: specOfMemo(desc.memo?.['spec']) };
  }
}

/** Whether the open run a start found was started with `spec` (unknown: no). */
export function samePoolSpec(result: Extract<StartPoolResult, { started: false }>, spec: PoolSpec): boolean {
  return result.spec !== undefined && canonicalJson(result.spec) === canonicalJson(spec);
}

/** The pool's status query under its own deadline; undefined when no workflow has that ID. */
export async function poolStatus(
  client: Client,
  entry: string,
  name: string,
  timeoutMs = STATUS_QUERY_TIMEOUT_MS,
): Promise<PoolStatus | undefined> {
  try {
    return await withDeadline(client, 'the status query', timeoutMs, () =>
      handleOf(client, entry, name).query(poolStatusQuery),
    );
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** One page of pools from visibility; tokens are the server's opaque bytes. */
export async function listPools(
  client: Client,
  query: string,
  pageSize: number,
  pageToken?: Uint8Array,
  o: PoolCallOptions = {},
): Promise<{ items: PoolSummary[]; nextPageToken?: Uint8Array }> {
  const namespace = client.options.namespace;
  const res = await withDeadline(client, 'list', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
    client.workflowService.listWorkflowExecutions({ namespace, query, pageSize, nextPageToken: pageToken }),
  );
  const items: PoolSummary[] = [];
  for (const raw of res.executions ?? []) {
    items.push(poolSummaryOf(await executionInfoFromRaw(raw, client.options.loadedDataConverter, raw, namespace)));
  }
  const token = res.nextPageToken && res.nextPageToken.length > 0 ? Uint8Array.from(res.nextPageToken) : undefined;
  return token === undefined ? { items } : { items, nextPageToken: token };
}

/**
 * Sends one operator update and waits for its result (the handlers apply at once). Undefined when
 * no workflow has that ID; `refused` when the pool has ended or its validator refused (the reason).
 */
async function poolUpdate(
  client: Client,
  entry: string,
  name: string,
  what: string,
  send: (h: WorkflowHandle<typeof poolWorkflow>) => Promise<PoolBrief>,
  o: PoolCallOptions,
): Promise<PoolUpdateResult | undefined> {
  const existing = await describePool(client, entry, name, o);
  if (existing === undefined) return undefined;
  if (existing.execution !== 'RUNNING') {
    return { kind: 'refused', message: `pool ${entry}/${name} has ended (${existing.phase ?? existing.execution})` };
  }
  try {
    // The update answers a brief status (it stays in the pool's history); the members come by query.
    const status = await withDeadline(client, what, o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, async () => {
      const h = handleOf(client, entry, name);
      await send(h);
      return h.query(poolStatusQuery);
    });
    return { kind: 'done', status };
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError)
      return { kind: 'refused', message: err.cause?.message ?? err.message };
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

export const scalePool = (c: Client, entry: string, name: string, req: ScaleRequest, o: PoolCallOptions = {}) =>
  poolUpdate(c, entry, name, 'the scale update', (h) => h.executeUpdate(poolScaleUpdate, { args: [req] }), o);

export const updatePoolSpec = (c: Client, entry: string, name: string, patch: PoolSpecPatch, o: PoolCallOptions = {}) =>
  poolUpdate(c, entry, name, 'the spec update', (h) => h.executeUpdate(poolSpecUpdate, { args: [patch] }), o);

export const pausePool = (c: Client, entry: string, name: string, o: PoolCallOptions = {}) =>
  poolUpdate(c, entry, name, 'the pause update', (h) => h.executeUpdate(poolPauseUpdate), o);

export const resumePool = (c: Client, entry: string, name: string, o: PoolCallOptions = {}) =>
  poolUpdate(c, entry, name, 'the resume update', (h) => h.executeUpdate(poolResumeUpdate), o);

export const rollbackPool = (c: Client, entry: string, name: string, req: RollbackRequest, o: PoolCallOptions = {}) =>
  poolUpdate(c, entry, name, 'the rollback update', (h) => h.executeUpdate(poolRollbackUpdate, { args: [req] }), o);

/** Replaces one member on request (a banned exit): it leaves discovery at once; the pool may refuse (rate limit). */
export const replacePoolMember = (
  c: Client,
  entry: string,
  name: string,
  req: ReplaceMemberRequest,
  o: PoolCallOptions = {},
) =>
  poolUpdate(
    c,
    entry,
    name,
    'the replaceMember update',
    (h) => h.executeUpdate(poolReplaceMemberUpdate, { args: [req] }),
    o,
  );

/** Asks the pool to delete its members and end; `closed` when it had already ended. */
export async function deletePool(
  client: Client,
  entry: string,
  name: string,
  o: PoolCallOptions = {},
): Promise<PoolDeleteResult | undefined> {
  const existing = await describePool(client, entry, name, o);
  if (existing === undefined) return undefined;
  if (existing.execution !== 'RUNNING') return { kind: 'closed', pool: existing };
  const r = await poolUpdate(client, entry, name, 'the delete update', (h) => h.executeUpdate(poolDeleteUpdate), o);
  if (r?.kind !== 'refused') return r;
  // The run closed between the describe and the update: nothing left to delete.
  const after = await describePool(client, entry, name, o);
  return after !== undefined && after.execution !== 'RUNNING' ? { kind: 'closed', pool: after } : r;
}

/** Waits up to `timeoutMs` for the pool's workflow to end (its last status); undefined if it has not. */
export async function waitPoolDeleted(
  client: Client,
  entry: string,
  name: string,
  timeoutMs: number,
): Promise<PoolStatus | undefined> {
  try {
    return await withDeadline(client, 'the result', timeoutMs, () => handleOf(client, entry, name).result());
  } catch (err) {
    if (isTemporalUnavailable(err)) return undefined; // the deadline passed: still deleting
    if (err instanceof WorkflowFailedError)
      throw new Error(`pool ${entry}/${name} failed: ${err.cause?.message ?? err.message}`);
    throw err;
  }
}

/** What the API asks of Temporal about pools (a unit test stands in for it). */
export interface PoolStore {
  startPool(spec: PoolSpec, taskQueue: string): Promise<StartPoolResult>;
  describePool(entry: string, name: string): Promise<PoolSummary | undefined>;
  /** The status query; undefined when no workflow has that ID. */
  poolStatus(entry: string, name: string): Promise<PoolStatus | undefined>;
  listPools(
    query: string,
    pageSize: number,
    pageToken?: Uint8Array,
  ): Promise<{ items: PoolSummary[]; nextPageToken?: Uint8Array }>;
  updatePool(entry: string, name: string, update: PoolUpdate): Promise<PoolUpdateResult | undefined>;
  deletePool(entry: string, name: string): Promise<PoolDeleteResult | undefined>;
  waitPoolDeleted(entry: string, name: string, timeoutMs: number): Promise<PoolStatus | undefined>;
}

/** The real PoolStore over `client`. */
export function temporalPoolStore(client: Client, o: PoolCallOptions = {}): PoolStore {
  return {
    startPool: (spec, taskQueue) => startPool(client, spec, { ...o, taskQueue }),
    describePool: (entry, name) => describePool(client, entry, name, o),
    poolStatus: (entry, name) => poolStatus(client, entry, name),
    listPools: (query, pageSize, token) => listPools(client, query, pageSize, token, o),
    updatePool: (entry, name, u) => {
      switch (u.kind) {
        case 'scale':
          return scalePool(client, entry, name, u.request, o);
        case 'spec':
          return updatePoolSpec(client, entry, name, u.patch, o);
        case 'pause':
          return pausePool(client, entry, name, o);
        case 'resume':
          return resumePool(client, entry, name, o);
        case 'rollback':
          return rollbackPool(client, entry, name, u.request, o);
        case 'replaceMember':
          return replacePoolMember(client, entry, name, u.request, o);
      }
    },
    deletePool: (entry, name) => deletePool(client, entry, name, o),
    waitPoolDeleted: (entry, name, timeoutMs) => waitPoolDeleted(client, entry, name, timeoutMs),
  };
}
