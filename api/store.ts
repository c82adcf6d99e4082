// What the API asks of Temporal, behind one interface (`ProxyStore`), so routes are plain and a
// unit test can stand in for Temporal. `temporalStore` is the real one: workflow starts with a
// conflict check, visibility lists and counts on the project's search attributes, the status
// query, the delete update, the provider-health schedule's last run, and task-queue pollers.
// Every call runs under a deadline; a Temporal that does not answer is a TemporalUnavailableError.
import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Client, WorkflowExecutionInfo, WorkflowHandle } from '@temporalio/client';
import { executionInfoFromRaw } from '@temporalio/client/lib/helpers.js';
import { FLEET_RESULT_QUERY, HEALTH_SCHEDULE_ID } from '../contracts/fleet.ts';
import type { ProviderHealthResult } from '../contracts/fleet.ts';
import { PROXY_DELETE_UPDATE, PROXY_STATUS_QUERY, PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../contracts/proxy.ts';
import type { DeleteAccepted, ProxyOutcome, ProxySpec, ProxyStatus } from '../contracts/proxy.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_HEALTHY, SA_PROXY_HOST, SA_PROXY_STATE } from '../contracts/search-attributes.ts';
import { isTemporalUnavailable, TemporalUnavailableError } from './errors.ts';

/** A proxy as visibility lists it: search attributes and memo, no query. */
export interface ProxySummary {
  name: string;
  entry: string;
  workflowId: string;
  runId: string;
  /** Temporal's execution status name: RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, ... */
  execution: string;
  state?: string;
  healthy?: boolean;
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

export interface ProviderHealthView {
  scheduleId: string;
  workflowId: string;
  runId: string;
  /** The run is still surveying (the result so far, from its query). */
  running: boolean;
  /** A newer run exists but did not answer (no worker picked it up): this is an older one. */
  stale: boolean;
  result: ProviderHealthResult;
}

export interface Pollers {
  workflow: number;
  activity: number;
}

/** The API's view of Temporal. */
export interface ProxyStore {
  start(spec: ProxySpec, taskQueue: string): Promise<StartResult>;
  /** The proxy's latest run, or undefined when no workflow has that ID. */
  describe(entry: string, name: string): Promise<ProxySummary | undefined>;
  status(entry: string, name: string): Promise<ProxyStatus>;
  /** One page of a visibility query; tokens are the server's opaque bytes. */
  list(
    query: string,
    pageSize: number,
    pageToken?: Uint8Array,
  ): Promise<{ items: ProxySummary[]; nextPageToken?: Uint8Array }>;
  count(query: string): Promise<number>;
  requestDelete(entry: string, name: string): Promise<DeleteResult | undefined>;
  /** Waits up to `timeoutMs` for the workflow to end; undefined if it has not. */
  waitOutcome(entry: string, name: string, timeoutMs: number): Promise<ProxyOutcome | undefined>;
  providerHealth(): Promise<ProviderHealthView | undefined>;
  pollers(taskQueue: string): Promise<Pollers>;
}

export interface TemporalStoreOptions {
  /** Deadline of one Temporal call, in ms (default 10000). */
  callTimeoutMs?: number;
  /** A poller is counted when it polled within this many ms (default 90000: a long poll is ~60 s). */
  pollerFreshMs?: number;
}

/** The visibility query of a list: `WorkflowType = 'proxyLifecycle' AND ...`. Values must be plain identifiers. */
export function listQuery(f: {
  state?: string;
  healthy?: boolean;
  entry?: string;
  host?: string;
  openOnly?: boolean;
}): string {
  const q = (v: string): string => `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  const parts = [`WorkflowType = ${q(PROXY_WORKFLOW_TYPE)}`];
  if (f.state !== undefined) parts.push(`${SA_PROXY_STATE} = ${q(f.state)}`);
  if (f.healthy !== undefined) parts.push(`${SA_PROXY_HEALTHY} = ${f.healthy ? 'true' : 'false'}`);
  if (f.entry !== undefined) parts.push(`${SA_PROVIDER_ENTRY} = ${q(f.entry)}`);
  if (f.host !== undefined) parts.push(`${SA_PROXY_HOST} = ${q(f.host)}`);
  if (f.openOnly) parts.push(`ExecutionStatus = 'Running'`);
  return parts.join(' AND ');
}

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

/** JSON with object keys sorted at every level and undefined members left out. */
export function canonicalJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
          .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sort(value)) ?? 'undefined';
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
  const host = first(sa[SA_PROXY_HOST]);
  if (typeof host === 'string') out.host = host;
  if (typeof memo['ip'] === 'string') out.ip = memo['ip'];
  if (info.closeTime !== undefined) out.closeTime = info.closeTime.toISOString();
  return out;
}

export function temporalStore(client: Client, options: TemporalStoreOptions = {}): ProxyStore {
  const callTimeoutMs = options.callTimeoutMs ?? 10_000;
  const pollerFreshMs = options.pollerFreshMs ?? 90_000;
  const namespace = client.options.namespace;

  /** Runs `fn` under the call deadline; a timeout or an unreachable server becomes TemporalUnavailableError. */
  const call = async <T>(what: string, fn: () => Promise<T>, timeoutMs = callTimeoutMs): Promise<T> => {
    try {
      return await client.withDeadline(Date.now() + timeoutMs, fn);
    } catch (err) {
      if (isTemporalUnavailable(err)) {
        throw new TemporalUnavailableError(`Temporal did not answer ${what} within ${timeoutMs} ms`, { cause: err });
      }
      throw err;
    }
  };
  const handle = (entry: string, name: string): WorkflowHandle =>
    client.workflow.getHandle(proxyWorkflowId(entry, name));
  const describe = async (entry: string, name: string): Promise<ProxySummary | undefined> => {
    try {
      return summaryOf(await call('describe', () => handle(entry, name).describe()));
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  };
  /** The spec the open run was started with: its memo, else its recorded input (first history event). */
  const recordedSpec = async (entry: string, name: string): Promise<ProxySpec | undefined> => {
    const h = handle(entry, name);
    const desc = await call('describe', () => h.describe());
    const fromMemo = specOf(desc.memo?.['spec']);
    if (fromMemo !== undefined) return fromMemo;
    const history = await call('history', () =>
      client.workflowService.getWorkflowExecutionHistory({
        namespace,
        execution: { workflowId: h.workflowId, runId: desc.runId },
        maximumPageSize: 1,
      }),
    );
    const payloads = history.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads;
    if (!payloads || payloads.length === 0) return undefined;
    return specOf(client.options.loadedDataConverter.payloadConverter.fromPayload(payloads[0]!));
  };

  return {
    async start(spec, taskQueue) {
      for (let attempt = 0; ; attempt++) {
        try {
          const h = await call('start', () =>
            client.workflow.start(PROXY_WORKFLOW_TYPE, {
              taskQueue,
              workflowId: proxyWorkflowId(spec.entry, spec.name),
              args: [spec],
              memo: { spec, proxy: spec.name, entry: spec.entry },
              workflowIdConflictPolicy: 'FAIL',
              workflowIdReusePolicy: 'ALLOW_DUPLICATE',
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
        const existing = await describe(spec.entry, spec.name);
        // It closed between the start and the describe: start again (a closed ID may be reused).
        if (existing === undefined || existing.execution !== 'RUNNING') {
          if (attempt < 2) continue;
          throw new TemporalUnavailableError('the proxy workflow kept changing while it was being started; retry');
        }
        return { started: false, proxy: existing, spec: await recordedSpec(spec.entry, spec.name) };
      }
    },

    describe,

    async status(entry, name) {
      return call('the status query', () => handle(entry, name).query<ProxyStatus>(PROXY_STATUS_QUERY), 5_000);
    },

    async list(query, pageSize, pageToken) {
      const res = await call('list', () =>
        client.workflowService.listWorkflowExecutions({
          namespace,
          query,
          pageSize,
          nextPageToken: pageToken,
        }),
      );
      const items: ProxySummary[] = [];
      for (const raw of res.executions ?? []) {
        items.push(summaryOf(await executionInfoFromRaw(raw, client.options.loadedDataConverter, raw, namespace)));
      }
      const token = res.nextPageToken && res.nextPageToken.length > 0 ? Uint8Array.from(res.nextPageToken) : undefined;
      return token === undefined ? { items } : { items, nextPageToken: token };
    },

    async count(query) {
      const res = await call('count', () => client.workflow.count(query));
      return res.count;
    },

    async requestDelete(entry, name) {
      const existing = await describe(entry, name);
      if (existing === undefined) return undefined;
      if (existing.execution !== 'RUNNING') return { kind: 'closed', proxy: existing };
      try {
        const accepted = await call('the delete update', () =>
          handle(entry, name).executeUpdate<DeleteAccepted, []>(PROXY_DELETE_UPDATE),
        );
        return { kind: 'accepted', accepted };
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        // The validator refuses when the proxy is already Deleted or Failed (finishing its cleanup),
        // and the update fails when the run closed meanwhile: both mean "nothing left to accept".
        const after = await describe(entry, name);
        if (
          after !== undefined &&
          (after.execution !== 'RUNNING' || after.state === 'Deleted' || after.state === 'Failed')
        ) {
          return { kind: 'closed', proxy: after };
        }
        throw err;
      }
    },

    async waitOutcome(entry, name, timeoutMs) {
      try {
        return await client.withDeadline(
          Date.now() + timeoutMs,
          () => handle(entry, name).result() as Promise<ProxyOutcome>,
        );
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
    },

    async providerHealth() {
      let desc;
      try {
        desc = await call('describe schedule', () => client.schedule.getHandle(HEALTH_SCHEDULE_ID).describe());
      } catch (err) {
        if ((err as Error).name === 'ScheduleNotFoundError') return undefined;
        throw err;
      }
      // Newest first: the latest run that answers. A run no worker has picked up cannot answer
      // its query; an older, completed run then stands in (marked stale).
      const runs = [...desc.info.recentActions].reverse();
      for (const [i, action] of runs.entries()) {
        const { workflowId, firstExecutionRunId: runId } = action.action.workflow;
        const h = client.workflow.getHandle(workflowId, runId);
        try {
          const info = await call('describe', () => h.describe());
          const running = info.status.name === 'RUNNING';
          // Only the newest run is asked while it runs: each unanswered query costs its deadline.
          if ((running && i > 0) || (!running && info.status.name !== 'COMPLETED')) continue;
          const result = running
            ? await call('the result query', () => h.query<ProviderHealthResult>(FLEET_RESULT_QUERY), 3_000)
            : await call('the result', () => h.result() as Promise<ProviderHealthResult>);
          return { scheduleId: HEALTH_SCHEDULE_ID, workflowId, runId, running, stale: i > 0, result };
        } catch (err) {
          if (!isTemporalUnavailable(err) && !(err instanceof WorkflowNotFoundError)) throw err;
        }
      }
      return undefined;
    },

    async pollers(taskQueue) {
      const fresh = (list: { lastAccessTime?: { seconds?: unknown } | null }[] | null | undefined): number =>
        (list ?? []).filter((p) => {
          const s = Number(p.lastAccessTime?.seconds ?? 0);
          return Date.now() - s * 1000 <= pollerFreshMs;
        }).length;
      const ask = (taskQueueType: 1 | 2) =>
        call('describe task queue', () =>
          client.workflowService.describeTaskQueue({
            namespace,
            taskQueue: { name: taskQueue, kind: 1 },
            taskQueueType,
          }),
        );
      const [wf, act] = await Promise.all([ask(1), ask(2)]);
      return { workflow: fresh(wf.pollers), activity: fresh(act.pollers) };
    },
  };
}
