// The proxy workflow's client calls: start (the one conflict policy), describe, the status query,
// the delete update and the wait for its end. Every caller (the API's store, egressctl proxy up, tests)
// starts a proxy here, so a proxy started by any of them carries its spec in the memo and a second
// start with the same spec finds the same run, while another spec is a conflict.
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateStage,
} from '@temporalio/client';
import type { Client, WorkflowExecutionInfo, WorkflowHandle } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { canonicalJson } from '../contracts/canonical-json.ts';
import { proxyDeleteUpdate, proxyResizeUpdate } from '../contracts/messages.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import type { DeleteAccepted, ProxyOutcome, ProxySpec, ProxyStatus, VmSize } from '../contracts/proxy.ts';
import {
  SA_PROXY_HEALTH,
  SA_PROXY_HEALTHY,
  SA_PROXY_HOST,
  SA_PROXY_POOL,
  SA_PROXY_STATE,
} from '../contracts/search-attributes.ts';
import type { proxyLifecycle } from '../workflows/index.ts';
import type { ProxyWorkflowInput } from '../contracts/proxy-run.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { freshProxyStatus } from './health.ts';
import { isTemporalUnavailable, TemporalUnavailableError } from './errors.ts';

const POOL_KEY = defineSearchAttributeKey(SA_PROXY_POOL, SearchAttributeType.KEYWORD);

/** A proxy as visibility lists it: search attributes and memo, no query. */
export interface ProxySummary {
  name: string;
  entry: string;
  workflowId: string;
  runId: string;
  /** Temporal's execution status name: RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, ... */
  execution: string;
  state?: string;
  /** The ProxyHealthy Bool: false for a proxy whose Healthy condition is Unknown. */
  healthy?: boolean;
  /** The Healthy condition (ProxyHealth): True, False or Unknown, as the status query says. */
  health?: string;
  host?: string;
  ip?: string;
  startTime: string;
  closeTime?: string;
}

export type StartResult =
  | { started: true; proxy: ProxySummary }
  /** An open workflow of that ID exists; `spec` is what it was started with (undefined: unknown). */
  | { started: false; proxy: ProxySummary; spec: ProxySpec | undefined };

export type DeleteResult =
  | { kind: 'accepted'; accepted: DeleteAccepted }
  /** The workflow had already ended (Deleted or Failed) or was finishing its delete. */
  | { kind: 'closed'; proxy: ProxySummary };

export interface ProxyCallOptions {
  /** Deadline of one Temporal call, in ms (default DEFAULT_CALL_TIMEOUT_MS). */
  callTimeoutMs?: number;
}

export interface StartProxyOptions extends ProxyCallOptions {
  taskQueue: string;
  /** Workflow input beyond the spec (a pool's membership); not part of the spec compared on a conflict. */
  extra?: Omit<ProxyWorkflowInput, keyof ProxySpec | 'carried'>;
  /** The pool (`<entry>/<pool>`) the proxy is a member of: its ProxyPool search attribute. */
  pool?: string;
  /** The run's summary in the Web UI. */
  staticSummary?: string;
}

/** Deadline of the status query, in ms: a query waits for a worker to answer it. */
export const STATUS_QUERY_TIMEOUT_MS = 5_000;

/** The ProxySpec a workflow input or memo carries, without the workflow's private fields. */
export function specOf(raw: unknown): ProxySpec | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r['name'] !== 'string' || typeof r['entry'] !== 'string' || typeof r['imageKey'] !== 'string') {
    return undefined;
  }
  const spec: ProxySpec = { name: r['name'], entry: r['entry'], imageKey: r['imageKey'] };
  if (r['vm'] !== undefined && r['vm'] !== null) spec.vm = r['vm'];
  if (r['squid'] !== undefined && r['squid'] !== null) spec.squid = r['squid'];
  return spec;
}

/** A stable text of a spec (keys sorted at every level) for comparing two of them. */
export function canonicalSpec(spec: ProxySpec): string {
  return canonicalJson(spec);
}

function first(v: unknown): unknown {
  return Array.isArray(v) ? v[0] : v;
}

/** A visibility record or description as a ProxySummary. */
export function summaryOf(
  info: Pick<
    WorkflowExecutionInfo,
    'workflowId' | 'runId' | 'status' | 'startTime' | 'closeTime' | 'memo' | 'searchAttributes'
  >,
): ProxySummary {
  const [, entryFromId = '', ...rest] = info.workflowId.split('/');
  // Deprecated record form: values are arrays. It is what the server returns for custom attributes.
  const sa = (info.searchAttributes ?? {}) as Record<string, unknown>;
  const memo = info.memo ?? {};
  const out: ProxySummary = {
    name: typeof memo['proxy'] === 'string' ? memo['proxy'] : rest.join('/'),
    entry: typeof memo['entry'] === 'string' ? memo['entry'] : entryFromId,
    workflowId: info.workflowId,
    runId: info.runId,
    execution: info.status.name,
    startTime: info.startTime.toISOString(),
  };
  const state = first(sa[SA_PROXY_STATE]);
  if (typeof state === 'string') out.state = state;
  const healthy = first(sa[SA_PROXY_HEALTHY]);
  if (typeof healthy === 'boolean') out.healthy = healthy;
  const health = first(sa[SA_PROXY_HEALTH]);
  // Runs recorded before ProxyHealth: only True can be read back from the Bool.
  if (typeof health === 'string') out.health = health;
  else if (healthy === true) out.health = 'True';
  const host = first(sa[SA_PROXY_HOST]);
  if (typeof host === 'string') out.host = host;
  if (typeof memo['ip'] === 'string') out.ip = memo['ip'];
  if (info.closeTime !== undefined) out.closeTime = info.closeTime.toISOString();
  return out;
}

const handleOf = (client: Client, entry: string, name: string): WorkflowHandle<typeof proxyLifecycle> =>
  client.workflow.getHandle<typeof proxyLifecycle>(proxyWorkflowId(entry, name));

/** The proxy's latest run, or undefined when no workflow has that ID. */
export async function describeProxy(
  client: Client,
  entry: string,
  name: string,
  o: ProxyCallOptions = {},
): Promise<ProxySummary | undefined> {
  try {
    const desc = await withDeadline(client, 'describe', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
      handleOf(client, entry, name).describe(),
    );
    return summaryOf(desc);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/**
 * The spec the open run was started with: its memo, else (a run started before every start put
 * the spec in the memo) its recorded input, the first history event.
 */
async function recordedSpec(client: Client, entry: string, name: string, timeoutMs: number) {
  const h = handleOf(client, entry, name);
  const desc = await withDeadline(client, 'describe', timeoutMs, () => h.describe());
  const fromMemo = specOf(desc.memo?.['spec']);
  if (fromMemo !== undefined) return fromMemo;
  const history = await withDeadline(client, 'history', timeoutMs, () =>
    client.workflowService.getWorkflowExecutionHistory({
      namespace: client.options.namespace,
      execution: { workflowId: h.workflowId, runId: desc.runId },
      maximumPageSize: 1,
    }),
  );
  const payloads = history.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads;
  if (!payloads || payloads.length === 0) return undefined;
  return specOf(client.options.loadedDataConverter.payloadConverter.fromPayload(payloads[0]!));
}

/**
 * Starts the proxy's workflow (ID `proxy/<entry>/<name>`, the spec in its memo), or finds the run
 * already open for that ID: then `started` is false and `spec` is what that run was started with,
 * for the caller to compare (`sameSpec`): the same spec is the same proxy, another is a conflict.
 */
export async function startProxy(client: Client, spec: ProxySpec, o: StartProxyOptions): Promise<StartResult> {
  const timeoutMs = o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      const h = await withDeadline(client, 'start', timeoutMs, () =>
        client.workflow.start<typeof proxyLifecycle>(PROXY_WORKFLOW_TYPE, {
          taskQueue: o.taskQueue,
          workflowId: proxyWorkflowId(spec.entry, spec.name),
          args: [{ ...spec, ...o.extra }],
          memo: { spec, proxy: spec.name, entry: spec.entry },
          ...(o.pool === undefined ? {} : { typedSearchAttributes: [{ key: POOL_KEY, value: o.pool }] }),
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'ALLOW_DUPLICATE',
          ...(o.staticSummary === undefined ? {} : { staticSummary: o.staticSummary }),
        }),
      );
      const now = new Date().toISOString();
      return {
        started: true,
        proxy: {
          name: spec.name,
          entry: spec.entry,
          workflowId: h.workflowId,
          runId: h.firstExecutionRunId,
          execution: 'RUNNING',
          state: 'Pending',
          startTime: now,
        },
      };
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    const existing = await describeProxy(client, spec.entry, spec.name, o);
    // It closed between the start and the describe: start again (a closed ID may be reused).
    if (existing === undefined || existing.execution !== 'RUNNING') {
      if (attempt < 2) continue;
      throw new TemporalUnavailableError('the proxy workflow kept changing while it was being started; retry');
    }
    return { started: false, proxy: existing, spec: await recordedSpec(client, spec.entry, spec.name, timeoutMs) };
  }
}

/** Whether the open run of a start that found one was started with `spec` (unknown: no). */
export function sameSpec(result: Extract<StartResult, { started: false }>, spec: ProxySpec): boolean {
  return result.spec !== undefined && canonicalSpec(result.spec) === canonicalSpec(spec);
}

/**
 * The proxy's status, as fresh as its health monitor (client/health.ts: the status query with the
 * monitor's last heartbeat merged in), under its own deadline (default STATUS_QUERY_TIMEOUT_MS).
 */
export async function proxyStatus(
  client: Client,
  entry: string,
  name: string,
  timeoutMs = STATUS_QUERY_TIMEOUT_MS,
): Promise<ProxyStatus> {
  return withDeadline(client, 'the status query', timeoutMs, () => freshProxyStatus(handleOf(client, entry, name)));
}

/** Asks the proxy to delete itself; undefined when no workflow has that ID. */
export async function requestProxyDelete(
  client: Client,
  entry: string,
  name: string,
  o: ProxyCallOptions = {},
): Promise<DeleteResult | undefined> {
  const existing = await describeProxy(client, entry, name, o);
  if (existing === undefined) return undefined;
  if (existing.execution !== 'RUNNING') return { kind: 'closed', proxy: existing };
  try {
    const accepted = await withDeadline(client, 'the delete update', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
      handleOf(client, entry, name).executeUpdate(proxyDeleteUpdate),
    );
    return { kind: 'accepted', accepted };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    // The validator refuses when the proxy is already Deleted or Failed (finishing its cleanup),
    // and the update fails when the run closed meanwhile: both mean "nothing left to accept".
    const after = await describeProxy(client, entry, name, o);
    if (
      after !== undefined &&
      (after.execution !== 'RUNNING' || after.state === 'Deleted' || after.state === 'Failed')
    ) {
      return { kind: 'closed', proxy: after };
    }
    throw err;
  }
}

/** Waits up to `timeoutMs` for the proxy's workflow to end; undefined if it has not. */
export async function waitProxyOutcome(
  client: Client,
  entry: string,
  name: string,
  timeoutMs: number,
): Promise<ProxyOutcome | undefined> {
  try {
    return await withDeadline(client, 'the result', timeoutMs, () => handleOf(client, entry, name).result());
  } catch (err) {
    if (err instanceof WorkflowFailedError) {
      const details = (err.cause as { details?: unknown[] } | undefined)?.details;
      const outcome = details?.[0] as ProxyOutcome | undefined;
      if (outcome?.state === 'Failed') return outcome;
      return { state: 'Failed', reason: err.cause?.message ?? err.message };
    }
    if (isTemporalUnavailable(err)) return undefined; // the deadline passed: still deleting
    throw err;
  }
}

export type ResizeResult =
  /** Applied: the status with the new size. */
  | { kind: 'done'; status: ProxyStatus }
  /** Accepted, still waiting for Running or applying at the bound. */
  | { kind: 'pending' }
  /** The workflow refused the resize (its state) or it failed; `message` says why. */
  | { kind: 'refused'; message: string };

/**
 * Sends the `resize` update and waits up to `waitMs` for it to be applied; undefined when no
 * workflow has that ID, `refused` when the proxy is not open or the workflow refuses.
 */
export async function resizeProxy(
  client: Client,
  entry: string,
  name: string,
  size: VmSize,
  waitMs: number,
  o: ProxyCallOptions = {},
): Promise<ResizeResult | undefined> {
  const existing = await describeProxy(client, entry, name, o);
  if (existing === undefined) return undefined;
  if (existing.execution !== 'RUNNING') {
    return { kind: 'refused', message: `proxy ${entry}/${name} has ended (${existing.state ?? existing.execution})` };
  }
  const refused = (err: unknown): ResizeResult | undefined => {
    if (err instanceof WorkflowUpdateFailedError) {
      return { kind: 'refused', message: err.cause?.message ?? err.message };
    }
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  };
  let update;
  try {
    update = await withDeadline(client, 'the resize update', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
      handleOf(client, entry, name).startUpdate(proxyResizeUpdate, {
        args: [size],
        waitForStage: WorkflowUpdateStage.ACCEPTED,
      }),
    );
  } catch (err) {
    return refused(err);
  }
  try {
    return { kind: 'done', status: await withDeadline(client, 'the resize', waitMs, () => update.result()) };
  } catch (err) {
    if (isTemporalUnavailable(err)) return { kind: 'pending' };
    return refused(err);
  }
}
