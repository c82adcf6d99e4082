// What the API asks of Temporal about hosts (`HostStore`; a unit test stands in for it) and its
// real implementation over client/hosts.ts. The API never reads the providers file, so the hosts
// it knows are those of the last provider-health survey (the schedule's latest run that answers)
// and those with an open maintenance workflow (`host/<entry>/<host>`, found in visibility). A host
// as the API shows it (contracts/host.ts HostView) is its maintenance status beside its survey
// figures and the count of open proxy workflows on it (`ProxyHost`). A host never surveyed (an
// open workflow the survey has not listed) has no survey fields; a host in neither is unknown.
import type { Client } from '@temporalio/client';
import type { HostSurvey, ProviderHealthResult } from '../contracts/fleet.ts';
import { HOST_WORKFLOW_TYPE } from '../contracts/host.ts';
import type { HostActionRequest, HostStatus, HostView } from '../contracts/host.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { visibilityLiteral } from './store.ts';
import {
  cordonHost,
  countProxiesOnHost,
  drainHost,
  HostActionRefusedError,
  hostStatus,
  schedulableHost,
  uncordonHost,
} from './hosts.ts';

/** A host by its entry and name. */
export interface HostRef {
  entry: string;
  host: string;
}

export interface KnownHosts {
  /** Sorted by entry, then host. */
  hosts: HostRef[];
  /** When the survey they come from was taken (RFC 3339); absent: no survey has answered yet. */
  surveyedAt?: string;
}

export type HostAction = 'cordon' | 'drain' | 'uncordon';

export type HostActionResult =
  /** Accepted: the host's status after it. */
  | { kind: 'done'; status: HostStatus }
  /** The host workflow's validator refused it; `message` is its reason. */
  | { kind: 'refused'; message: string };

/** What the API asks of Temporal about hosts. */
export interface HostStore {
  /** The hosts the API knows: the last survey's and those with an open maintenance workflow. */
  knownHosts(): Promise<KnownHosts>;
  /** Every known host (of `entry` when given) as a HostView, sorted by entry, then host. */
  listHosts(entry?: string): Promise<HostView[]>;
  /** One host as a HostView; undefined when it is not known. */
  getHost(entry: string, host: string): Promise<HostView | undefined>;
  /** Cordon, drain or uncordon (`taskQueue`: where a host workflow starts when it has none). */
  act(
    action: HostAction,
    entry: string,
    host: string,
    req: HostActionRequest,
    taskQueue: string,
  ): Promise<HostActionResult>;
}

const key = (entry: string, host: string): string => `${entry}/${host}`;

/** `host/<entry>/<host>` as its parts; undefined for another ID. */
export function hostOfWorkflowId(workflowId: string): HostRef | undefined {
  const m = /^host\/([^/]+)\/([^/]+)$/.exec(workflowId);
  return m === null ? undefined : { entry: m[1]!, host: m[2]! };
}

/** What the survey source answers: the latest run's result, and whether that run still runs (then it is partial). */
export interface SurveyRead {
  result: ProviderHealthResult;
  running: boolean;
}

/** The surveys as the store reads them: each entry's hosts with the time of the run they come from. */
export interface HostSurveys {
  /** The newest run's time. */
  at: string;
  entries: { entry: string; at: string; hosts: HostSurvey[] }[];
}

/**
 * The survey to show: the latest run's entries and, while it still runs (it surveys entry by
 * entry), the entries it has not reached yet from the last complete run, so that no host drops out
 * of the list (and its gauges out of /metrics) every time a survey starts.
 */
export function surveysOf(read: SurveyRead, lastComplete: ProviderHealthResult | undefined): HostSurveys {
  const entries = read.result.entries.map((e) => ({ entry: e.entry, at: read.result.at, hosts: e.hosts }));
  if (read.running && lastComplete !== undefined) {
    const have = new Set(entries.map((e) => e.entry));
    for (const e of lastComplete.entries) {
      if (!have.has(e.entry)) entries.push({ entry: e.entry, at: lastComplete.at, hosts: e.hosts });
    }
  }
  return { at: read.result.at, entries };
}

/** The known hosts: the survey's and the open workflows', once each, sorted. */
export function knownHostsOf(survey: HostSurveys | undefined, open: readonly HostRef[]): KnownHosts {
  const all = new Map<string, HostRef>();
  for (const e of survey?.entries ?? [])
    for (const h of e.hosts) all.set(key(e.entry, h.host), { entry: e.entry, host: h.host });
  for (const r of open) all.set(key(r.entry, r.host), { entry: r.entry, host: r.host });
  const hosts = [...all.values()].sort((a, b) => a.entry.localeCompare(b.entry) || a.host.localeCompare(b.host));
  return survey === undefined ? { hosts } : { hosts, surveyedAt: survey.at };
}

/** A host's survey line and when it was taken, or undefined. */
export function surveyOf(
  survey: HostSurveys | undefined,
  entry: string,
  host: string,
): { line: HostSurvey; at: string } | undefined {
  const e = survey?.entries.find((x) => x.entry === entry);
  const line = e?.hosts.find((h) => h.host === host);
  return e === undefined || line === undefined ? undefined : { line, at: e.at };
}

/** The HostView of a host from its status, its survey line (if any) and its count of proxies. */
export function hostView(
  status: HostStatus,
  s: { line: HostSurvey; at: string } | undefined,
  proxies: number,
): HostView {
  const v: HostView = { ...status, proxies };
  if (s !== undefined) {
    v.reachable = s.line.reachable;
    v.surveyedAt = s.at;
    for (const k of ['memoryTotalMiB', 'memoryFreeMiB', 'cpus', 'maxProxies'] as const) {
      if (s.line[k] !== undefined) v[k] = s.line[k];
    }
    if (s.line.error !== undefined) v.error = s.line.error;
  }
  return v;
}

/** Host workflows open at once, read per list (pages of 1000). */
const OPEN_HOSTS_MAX = 10_000;

/** The visibility query of the open host workflows (of one task queue when given). */
export function openHostsQuery(taskQueue?: string): string {
  const parts = [`WorkflowType = '${HOST_WORKFLOW_TYPE}'`, `ExecutionStatus = 'Running'`];
  if (taskQueue !== undefined) parts.push(`TaskQueue = ${visibilityLiteral(taskQueue)}`);
  return parts.join(' AND ');
}

/** The open host workflows, from visibility (`WorkflowType = 'hostWorkflow'`, running, on `taskQueue` when given). */
export async function openHostWorkflows(
  client: Client,
  callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS,
  taskQueue?: string,
): Promise<HostRef[]> {
  const namespace = client.options.namespace;
  const query = openHostsQuery(taskQueue);
  const out: HostRef[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const res = await withDeadline(client, 'list', callTimeoutMs, () =>
      client.workflowService.listWorkflowExecutions({ namespace, query, pageSize: 1000, nextPageToken }),
    );
    for (const raw of res.executions ?? []) {
      const ref = hostOfWorkflowId(raw.execution?.workflowId ?? '');
      if (ref !== undefined) out.push(ref);
    }
    nextPageToken = res.nextPageToken && res.nextPageToken.length > 0 ? Uint8Array.from(res.nextPageToken) : undefined;
  } while (nextPageToken !== undefined && out.length < OPEN_HOSTS_MAX);
  return out;
}

export interface TemporalHostStoreOptions {
  /**
   * The latest provider-health survey (workers/api.ts: the schedule's latest run that answers,
   * ProxyStore.providerHealth); undefined when none has answered yet.
   */
  survey: () => Promise<SurveyRead | undefined>;
  /**
   * Only host workflows on this task queue count as known (the API's: where its cordons start
   * them); unset: every open host workflow of the namespace.
   */
  taskQueue?: string;
  /** Deadline of one Temporal call, in ms (default DEFAULT_CALL_TIMEOUT_MS). */
  callTimeoutMs?: number;
  /** A survey read is kept this long, in ms (default 5000: surveys run every hostHealthIntervalMs). */
  surveyCacheMs?: number;
}

/** Hosts asked about at once in a listing (a status query or a count each). */
const HOST_CONCURRENCY = 16;

async function inBatches<T, R>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += HOST_CONCURRENCY) {
    out.push(...(await Promise.all(items.slice(i, i + HOST_CONCURRENCY).map(fn))));
  }
  return out;
}

/** The real HostStore over `client`. */
export function temporalHostStore(client: Client, o: TemporalHostStoreOptions): HostStore {
  const callTimeoutMs = o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const cacheMs = o.surveyCacheMs ?? 5_000;
  const co = { callTimeoutMs };
  let cached: { at: number; survey: Promise<HostSurveys | undefined> } | undefined;
  let lastComplete: ProviderHealthResult | undefined;
  const survey = (): Promise<HostSurveys | undefined> => {
    if (cached === undefined || Date.now() - cached.at >= cacheMs) {
      const read = o.survey().then((r) => {
        if (r === undefined) return undefined;
        if (!r.running) lastComplete = r.result;
        return surveysOf(r, lastComplete);
      });
      cached = { at: Date.now(), survey: read };
      read.catch(() => (cached = undefined));
    }
    return cached.survey;
  };
  const known = async (): Promise<{ survey: HostSurveys | undefined; open: HostRef[]; known: KnownHosts }> => {
    const [s, open] = await Promise.all([survey(), openHostWorkflows(client, callTimeoutMs, o.taskQueue)]);
    return { survey: s, open, known: knownHostsOf(s, open) };
  };
  const viewOf = async (ref: HostRef, s: HostSurveys | undefined, open: boolean): Promise<HostView> => {
    const [status, proxies] = await Promise.all([
      open ? hostStatus(client, ref.entry, ref.host) : Promise.resolve(schedulableHost(ref.entry, ref.host)),
      countProxiesOnHost(client, ref.entry, ref.host, co),
    ]);
    return hostView(status, surveyOf(s, ref.entry, ref.host), proxies);
  };
  const refused = async (fn: () => Promise<HostStatus>): Promise<HostActionResult> => {
    try {
      return { kind: 'done', status: await fn() };
    } catch (err) {
      if (err instanceof HostActionRefusedError) return { kind: 'refused', message: err.message };
      throw err;
    }
  };
  return {
    knownHosts: async () => (await known()).known,
    async listHosts(entry) {
      const k = await known();
      const open = new Set(k.open.map((r) => key(r.entry, r.host)));
      const hosts = k.known.hosts.filter((h) => entry === undefined || h.entry === entry);
      return inBatches(hosts, (h) => viewOf(h, k.survey, open.has(key(h.entry, h.host))));
    },
    async getHost(entry, host) {
      const k = await known();
      if (!k.known.hosts.some((h) => h.entry === entry && h.host === host)) return undefined;
      // The status query itself, not visibility's (possibly lagging) open list, says whether it is open.
      return viewOf({ entry, host }, k.survey, true);
    },
    act(action, entry, host, req, taskQueue) {
      switch (action) {
        case 'cordon':
          return refused(() => cordonHost(client, entry, host, req, taskQueue, co));
        case 'drain':
          return refused(() => drainHost(client, entry, host, req, taskQueue, co));
        case 'uncordon':
          return refused(() => uncordonHost(client, entry, host, req, co));
      }
    },
  };
}
