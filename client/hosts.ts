// A host's maintenance workflow's client calls (docs/hosts.md): its status, cordon and drain (each
// starts the workflow when none is open, by update-with-start, so two concurrent cordons are one
// workflow), uncordon (the workflow ends), the cordoned hosts of an entry (placement's survey reads
// them), the open proxy workflows on a host (visibility: `ProxyHost`) and a standalone proxy's
// move off a host. Every call runs under a deadline; a Temporal that does not answer is a
// TemporalUnavailableError. A refusal of the workflow's validator is a HostActionRefusedError.
import { WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { HOST_WORKFLOW_TYPE, hostWorkflowId } from '../contracts/host.ts';
import type { HostActionRequest, HostStatus, ProxyMoveRequest } from '../contracts/host.ts';
import {
  hostCordonUpdate,
  hostDrainUpdate,
  hostStatusQuery,
  hostUncordonUpdate,
  proxyMoveUpdate,
} from '../contracts/messages.ts';
import { proxyWorkflowId } from '../contracts/proxy.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_HOST, SA_PROXY_POOL } from '../contracts/search-attributes.ts';
import type { hostWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { STATUS_QUERY_TIMEOUT_MS } from './proxies.ts';
import { listQuery } from './store.ts';

const ENTRY_KEY = defineSearchAttributeKey(SA_PROVIDER_ENTRY, SearchAttributeType.KEYWORD);

/** The workflow's validator (or its host check) refused the action; the message says why. */
export class HostActionRefusedError extends Error {
  override readonly name = 'HostActionRefusedError';
}

export interface HostCallOptions {
  /** Deadline of one Temporal call, in ms (default DEFAULT_CALL_TIMEOUT_MS). */
  callTimeoutMs?: number;
}

/** What a host without an open maintenance workflow reads as. */
export function schedulableHost(entry: string, host: string): HostStatus {
  return { entry, host, phase: 'Schedulable', cordoned: false };
}

const handleOf = (client: Client, entry: string, host: string): WorkflowHandle<typeof hostWorkflow> =>
  client.workflow.getHandle<typeof hostWorkflow>(hostWorkflowId(entry, host));

/** Whether the host's workflow is open: describe (the server's own record, no worker needed). */
async function isOpen(client: Client, entry: string, host: string, timeoutMs: number): Promise<boolean> {
  try {
    const desc = await withDeadline(client, 'describe', timeoutMs, () => handleOf(client, entry, host).describe());
    return desc.status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * The host's maintenance status: the workflow's query when it is open, else (no workflow, or its
 * run ended) Schedulable.
 */
export async function hostStatus(
  client: Client,
  entry: string,
  host: string,
  timeoutMs = STATUS_QUERY_TIMEOUT_MS,
): Promise<HostStatus> {
  if (!(await isOpen(client, entry, host, timeoutMs))) return schedulableHost(entry, host);
  try {
    return await withDeadline(client, 'the host status query', timeoutMs, () =>
      handleOf(client, entry, host).query(hostStatusQuery),
    );
  } catch (err) {
    // It ended between the describe and the query.
    if (err instanceof WorkflowNotFoundError) return schedulableHost(entry, host);
    if (!(await isOpen(client, entry, host, timeoutMs).catch(() => true))) return schedulableHost(entry, host);
    throw err;
  }
}

/** A refused update as a HostActionRefusedError; anything else unchanged. */
function refusal(err: unknown): unknown {
  if (err instanceof WorkflowUpdateFailedError) return new HostActionRefusedError(err.cause?.message ?? err.message);
  return err;
}

/** A cordon or drain call: its update, starting the host's workflow when none is open. */
export type HostStartAction = (
  client: Client,
  entry: string,
  host: string,
  req: HostActionRequest,
  taskQueue: string,
  o?: HostCallOptions,
) => Promise<HostStatus>;

function withStart(what: 'cordon' | 'drain'): HostStartAction {
  const update = what === 'cordon' ? hostCordonUpdate : hostDrainUpdate;
  return async (client, entry, host, req, taskQueue, o = {}) => {
    const startWorkflowOperation = new WithStartWorkflowOperation<typeof hostWorkflow>(HOST_WORKFLOW_TYPE, {
      taskQueue,
      workflowId: hostWorkflowId(entry, host),
      args: [{ entry, host }],
      memo: { entry, host, cordoned: true },
      typedSearchAttributes: [{ key: ENTRY_KEY, value: entry }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      staticSummary: `host ${entry}/${host}: maintenance`,
    });
    try {
      return await withDeadline(client, `the ${what} update`, o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
        client.workflow.executeUpdateWithStart(update, { args: [req], startWorkflowOperation }),
      );
    } catch (err) {
      throw refusal(err);
    }
  };
}

/** Cordons the host (no new placements; its proxies stay): the status after it. Idempotent. */
export const cordonHost: HostStartAction = withStart('cordon');

/** Cordons the host and starts moving its proxies off it: the status once the drain started. Idempotent. */
export const drainHost: HostStartAction = withStart('drain');

/**
 * Makes the host schedulable again (pools told of a drain are told it is over) and waits for the
 * workflow's last status. A host without an open workflow is already schedulable: its status.
 */
export async function uncordonHost(
  client: Client,
  entry: string,
  host: string,
  req: HostActionRequest,
  o: HostCallOptions = {},
): Promise<HostStatus> {
  const timeoutMs = o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  if (!(await isOpen(client, entry, host, timeoutMs))) return schedulableHost(entry, host);
  try {
    return await withDeadline(client, 'the uncordon update', timeoutMs, () =>
      handleOf(client, entry, host).executeUpdate(hostUncordonUpdate, { args: [req] }),
    );
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return schedulableHost(entry, host);
    // The run ended between the describe and the update (another uncordon): schedulable now.
    if (err instanceof WorkflowUpdateFailedError && !(await isOpen(client, entry, host, timeoutMs)))
      return schedulableHost(entry, host);
    throw refusal(err);
  }
}

/**
 * Which of `hosts` of `entry` are cordoned: those whose maintenance workflow is open and has not
 * been uncordoned (its memo). Describes in parallel, each under `timeoutMs`; one that does not
 * answer fails the whole call (a TemporalUnavailableError), never reads as schedulable.
 */
export async function cordonedHosts(
  client: Client,
  entry: string,
  hosts: string[],
  timeoutMs = STATUS_QUERY_TIMEOUT_MS,
): Promise<Set<string>> {
  const flags = await Promise.all(
    hosts.map(async (host) => {
      try {
        const desc = await withDeadline(client, `describe host ${host}`, timeoutMs, () =>
          handleOf(client, entry, host).describe(),
        );
        return desc.status.name === 'RUNNING' && desc.memo?.['cordoned'] !== false;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return false;
        throw err;
      }
    }),
  );
  return new Set(hosts.filter((_, i) => flags[i]));
}

/** An open proxy workflow on a host, as visibility lists it. */
export interface ProxyOnHost {
  name: string;
  workflowId: string;
  /** `<entry>/<pool>` of a pool member (its `ProxyPool`); absent for a standalone proxy. */
  pool?: string;
}

/** Bound of a host's listing: more open proxies than this on one host is not a real fleet. */
const MAX_LISTED = 10_000;

function first(v: unknown): unknown {
  return Array.isArray(v) ? v[0] : v;
}

/** Open proxy workflows of `entry` whose `ProxyHost` is `host` (visibility). */
export async function proxiesOnHost(
  client: Client,
  entry: string,
  host: string,
  o: HostCallOptions = {},
): Promise<ProxyOnHost[]> {
  const query = listQuery({ entry, host, openOnly: true });
  return withDeadline(client, 'list', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, async () => {
    const out: ProxyOnHost[] = [];
    for await (const wf of client.workflow.list({ query })) {
      const sa = (wf.searchAttributes ?? {}) as Record<string, unknown>;
      if (first(sa[SA_PROXY_HOST]) !== host) continue;
      const pool = first(sa[SA_PROXY_POOL]);
      const item: ProxyOnHost = { name: wf.workflowId.split('/').slice(2).join('/'), workflowId: wf.workflowId };
      if (typeof pool === 'string' && pool !== '') item.pool = pool;
      out.push(item);
      if (out.length >= MAX_LISTED) break;
    }
    return out;
  });
}

/** How many open proxy workflows of `entry` are on `host` (visibility count). */
export async function countProxiesOnHost(
  client: Client,
  entry: string,
  host: string,
  o: HostCallOptions = {},
): Promise<number> {
  const query = listQuery({ entry, host, openOnly: true });
  const r = await withDeadline(client, 'count', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
    client.workflow.count(query),
  );
  return r.count;
}

export type MoveResult =
  | { kind: 'accepted' }
  /** The proxy refused the move (e.g. not Running) or has ended; `message` says why. */
  | { kind: 'refused'; message: string }
  /** No workflow has that ID. */
  | { kind: 'absent' };

/** Asks a standalone proxy to move its VM to another host (the proxy's `move` update). */
export async function requestProxyMove(
  client: Client,
  entry: string,
  name: string,
  req: ProxyMoveRequest,
  o: HostCallOptions = {},
): Promise<MoveResult> {
  try {
    await withDeadline(client, 'the move update', o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, () =>
      client.workflow.getHandle(proxyWorkflowId(entry, name)).executeUpdate(proxyMoveUpdate, { args: [req] }),
    );
    return { kind: 'accepted' };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { kind: 'absent' };
    if (err instanceof WorkflowUpdateFailedError)
      return { kind: 'refused', message: err.cause?.message ?? err.message };
    throw err;
  }
}
