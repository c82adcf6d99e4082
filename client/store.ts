// What the API asks of Temporal, behind one interface (`ProxyStore`), so routes are plain and a
// unit test can stand in for Temporal. `temporalStore` is the real one: the proxy calls of
// proxies.ts, visibility lists and counts on the project's search attributes, the provider-health
// schedule's last run, and task-queue pollers. Every call runs under a deadline; a Temporal that
// does not answer is a TemporalUnavailableError.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { executionInfoFromRaw } from '@temporalio/client/lib/helpers.js';
import { HEALTH_SCHEDULE_ID } from '../contracts/fleet.ts';
import type { ProviderHealthResult } from '../contracts/fleet.ts';
import { healthResultQuery } from '../contracts/messages.ts';
import { PROXY_WORKFLOW_TYPE } from '../contracts/proxy.ts';
import type { ProxyOutcome, ProxySpec, ProxyStatus, VmSize } from '../contracts/proxy.ts';
import {
  SA_PROVIDER_ENTRY,
  SA_PROXY_HEALTH,
  SA_PROXY_HEALTHY,
  SA_PROXY_HOST,
  SA_PROXY_POOL,
  SA_PROXY_STATE,
} from '../contracts/search-attributes.ts';
import type { providerHealthWorkflow } from '../workflows/index.ts';
import { catalogReader } from './catalog.ts';
import type { CatalogView } from './catalog.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { isTemporalUnavailable } from './errors.ts';
import {
  describeProxy,
  proxyStatus,
  requestProxyDelete,
  resizeProxy,
  startProxy,
  summaryOf,
  waitProxyOutcome,
} from './proxies.ts';
import type { DeleteResult, ProxySummary, ResizeResult, StartResult } from './proxies.ts';

export type { DeleteResult, ProxySummary, ResizeResult, StartResult } from './proxies.ts';
export type { CatalogView } from './catalog.ts';

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
  /**
   * The fresh pollers of `taskQueue`'s workflow and activity queues. Asks DescribeNamespace beside
   * them, which reads the persistence store: the frontend answers DescribeTaskQueue from memory
   * while the database is down, so that alone would call a server without its database reachable.
   */
  pollers(taskQueue: string): Promise<Pollers>;
  /** The resize update, waiting up to `waitMs` for it to be applied; undefined: no such proxy. */
  resize(entry: string, name: string, size: VmSize, waitMs: number): Promise<ResizeResult | undefined>;
  /** What the workers of `taskQueue` publish of their providers file (client/catalog.ts). */
  catalog(taskQueue: string): Promise<CatalogView>;
}

export interface TemporalStoreOptions {
  /** Deadline of one Temporal call, in ms (default 10000). */
  callTimeoutMs?: number;
  /** A poller is counted when it polled within this many ms (default 90000: a long poll is ~60 s). */
  pollerFreshMs?: number;
}

/** A string as a visibility-query literal: quoted, with backslashes and quotes escaped. */
export function visibilityLiteral(v: string): string {
  return `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/** The visibility query of a list: `WorkflowType = 'proxyLifecycle' AND ...`. Values must be plain identifiers. */
export function listQuery(f: {
  state?: string;
  healthy?: boolean;
  /** ProxyHealth: True, False or Unknown. */
  health?: string;
  entry?: string;
  host?: string;
  /** Members of the pool `<entry>/<pool>`. */
  pool?: string;
  openOnly?: boolean;
}): string {
  const q = visibilityLiteral;
  const parts = [`WorkflowType = ${q(PROXY_WORKFLOW_TYPE)}`];
  if (f.state !== undefined) parts.push(`${SA_PROXY_STATE} = ${q(f.state)}`);
  if (f.healthy !== undefined) parts.push(`${SA_PROXY_HEALTHY} = ${f.healthy ? 'true' : 'false'}`);
  if (f.health !== undefined) parts.push(`${SA_PROXY_HEALTH} = ${q(f.health)}`);
  if (f.entry !== undefined) parts.push(`${SA_PROVIDER_ENTRY} = ${q(f.entry)}`);
  if (f.host !== undefined) parts.push(`${SA_PROXY_HOST} = ${q(f.host)}`);
  if (f.pool !== undefined) parts.push(`${SA_PROXY_POOL} = ${q(f.pool)}`);
  if (f.openOnly) parts.push(`ExecutionStatus = 'Running'`);
  return parts.join(' AND ');
}

/** Deadline of the provider-health result query, in ms. */
const HEALTH_QUERY_TIMEOUT_MS = 3_000;

export function temporalStore(client: Client, options: TemporalStoreOptions = {}): ProxyStore {
  const callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const pollerFreshMs = options.pollerFreshMs ?? 90_000;
  const namespace = client.options.namespace;
  const call = <T>(what: string, fn: () => Promise<T>, timeoutMs = callTimeoutMs): Promise<T> =>
    withDeadline(client, what, timeoutMs, fn);
  const o = { callTimeoutMs };

  const catalog = catalogReader(client);
  return {
    catalog,
    start: (spec, taskQueue) => startProxy(client, spec, { ...o, taskQueue }),
    describe: (entry, name) => describeProxy(client, entry, name, o),
    status: (entry, name) => proxyStatus(client, entry, name),
    requestDelete: (entry, name) => requestProxyDelete(client, entry, name, o),
    waitOutcome: (entry, name, timeoutMs) => waitProxyOutcome(client, entry, name, timeoutMs),
    resize: (entry, name, size, waitMs) => resizeProxy(client, entry, name, size, waitMs, o),

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
        const h = client.workflow.getHandle<typeof providerHealthWorkflow>(workflowId, runId);
        try {
          const info = await call('describe', () => h.describe());
          const running = info.status.name === 'RUNNING';
          // Only the newest run is asked while it runs: each unanswered query costs its deadline.
          if ((running && i > 0) || (!running && info.status.name !== 'COMPLETED')) continue;
          const result = running
            ? await call('the result query', () => h.query(healthResultQuery), HEALTH_QUERY_TIMEOUT_MS)
            : await call('the result', () => h.result());
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
      const [wf, act] = await Promise.all([
        ask(1),
        ask(2),
        call('describe namespace', () => client.workflowService.describeNamespace({ namespace })),
      ]);
      return { workflow: fresh(wf.pollers), activity: fresh(act.pollers) };
    },
  };
}
