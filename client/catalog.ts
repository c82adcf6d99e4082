// The catalog workflow's client calls (contracts/catalog.ts): a worker publishes its catalog (and
// withdraws it when it stops); the API reads the fresh publications, agreed or not, with a short
// cache. Every call runs under a deadline.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import {
  CATALOG_FRESH_MS,
  CATALOG_WORKFLOW_TYPE,
  catalogPublishSignal,
  catalogQuery,
  catalogWithdrawSignal,
  catalogWorkflowId,
} from '../contracts/catalog.ts';
import type { Catalog, CatalogEntry, CatalogPublication } from '../contracts/catalog.ts';
import type { catalogWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { isTemporalUnavailable } from './errors.ts';

/** Signals `publication` to the task queue's catalog workflow, starting it when there is none. */
export async function publishCatalog(
  client: Client,
  taskQueue: string,
  publication: CatalogPublication,
  timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<void> {
  await withDeadline(client, 'the catalog publication', timeoutMs, () =>
    client.workflow.signalWithStart<typeof catalogWorkflow, [CatalogPublication]>(CATALOG_WORKFLOW_TYPE, {
      workflowId: catalogWorkflowId(taskQueue),
      taskQueue,
      args: [{ publications: [] }],
      signal: catalogPublishSignal,
      signalArgs: [publication],
      staticSummary: `the catalog of the workers of ${taskQueue}`,
    }),
  );
}

/** Takes a worker's publication back (it stops); a missing workflow is nothing to withdraw. */
export async function withdrawCatalog(
  client: Client,
  taskQueue: string,
  publisher: string,
  timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<void> {
  try {
    await withDeadline(client, 'the catalog withdrawal', timeoutMs, () =>
      client.workflow.getHandle(catalogWorkflowId(taskQueue)).signal(catalogWithdrawSignal, publisher),
    );
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/** What the API knows of the catalog. */
export type CatalogView =
  | { kind: 'ok'; catalog: Catalog; publishers: string[] }
  /** No fresh publication: no worker of the queue runs (or none ran yet), or none answered. */
  | { kind: 'none'; reason: string }
  /** Two workers publish different catalogs: `difference` names where. */
  | { kind: 'conflict'; difference: string };

/** How the entries of two catalogs differ, in words; undefined when they are the same. */
export function catalogDifference(a: Catalog, b: Catalog): string | undefined {
  const byName = (c: Catalog) => new Map(c.entries.map((e) => [e.name, e]));
  const [ma, mb] = [byName(a), byName(b)];
  const out: string[] = [];
  for (const name of [...new Set([...ma.keys(), ...mb.keys()])].sort()) {
    const [ea, eb] = [ma.get(name), mb.get(name)];
    if (ea === undefined || eb === undefined) {
      out.push(`entry ${name} is only in one`);
      continue;
    }
    for (const field of [
      'images',
      'vm',
      'squidOverrides',
      'allowOpenProxy',
    ] as const satisfies (keyof CatalogEntry)[]) {
      if (JSON.stringify(ea[field]) !== JSON.stringify(eb[field])) {
        out.push(`entry ${name} ${field}: ${JSON.stringify(ea[field])} vs ${JSON.stringify(eb[field])}`);
      }
    }
  }
  if (out.length === 0 && a.digest !== b.digest)
    out.push('the entries agree but other settings (hosts, timeouts) differ');
  return out.length === 0 ? undefined : out.join('; ');
}

/** The view of a list of fresh publications: one agreed catalog, none, or where two differ. */
export function viewOf(publications: CatalogPublication[], nowMs: number): CatalogView {
  const fresh = publications.filter((p) => nowMs - Date.parse(p.publishedAt) <= CATALOG_FRESH_MS);
  const [first, ...rest] = fresh;
  if (first === undefined) return { kind: 'none', reason: 'no worker has published its catalog in the last 3 minutes' };
  for (const p of rest) {
    if (p.catalog.digest === first.catalog.digest) continue;
    const diff = catalogDifference(first.catalog, p.catalog) ?? 'their providers files differ';
    return {
      kind: 'conflict',
      difference:
        `workers ${first.publisher} (providers file ${first.catalog.digest.slice(0, 12)}) and ${p.publisher} ` +
        `(${p.catalog.digest.slice(0, 12)}) read different providers files: ${diff}`,
    };
  }
  return { kind: 'ok', catalog: first.catalog, publishers: fresh.map((p) => p.publisher) };
}

/** Deadline of the catalog query, in ms: it waits for a worker to answer. */
const CATALOG_QUERY_TIMEOUT_MS = 5_000;

/**
 * The catalog of `taskQueue`'s workers, read at most once per `cacheMs` (a failed read is not
 * kept). A Temporal that does not answer is a TemporalUnavailableError; no workflow, or a query no
 * worker answers, is `none`.
 */
export function catalogReader(
  client: Client,
  o: { cacheMs?: number; queryTimeoutMs?: number } = {},
): (taskQueue: string) => Promise<CatalogView> {
  const cacheMs = o.cacheMs ?? 5_000;
  const cache = new Map<string, { at: number; view: Promise<CatalogView> }>();
  const read = async (taskQueue: string): Promise<CatalogView> => {
    const h = client.workflow.getHandle<typeof catalogWorkflow>(catalogWorkflowId(taskQueue));
    try {
      const pubs = await withDeadline(client, 'the catalog query', o.queryTimeoutMs ?? CATALOG_QUERY_TIMEOUT_MS, () =>
        h.query(catalogQuery),
      );
      return viewOf(pubs, Date.now());
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) {
        return {
          kind: 'none',
          reason: `no catalog workflow ${catalogWorkflowId(taskQueue)}: no worker of ${taskQueue} ran yet`,
        };
      }
      if (isTemporalUnavailable(err)) {
        // A query waits for a worker: one that does not answer is no worker, not a down server,
        // unless the server cannot describe the workflow either (it, or its database, is down):
        // that is a TemporalUnavailableError, the API's TEMPORAL_UNAVAILABLE, not "start a worker".
        await withDeadline(client, 'the catalog workflow', o.queryTimeoutMs ?? CATALOG_QUERY_TIMEOUT_MS, () =>
          h.describe(),
        ).catch((e: unknown) => {
          if (isTemporalUnavailable(e)) throw e;
        });
        return { kind: 'none', reason: `no worker of ${taskQueue} answered the catalog query` };
      }
      throw err;
    }
  };
  return (taskQueue) => {
    const hit = cache.get(taskQueue);
    if (hit !== undefined && Date.now() - hit.at < cacheMs) return hit.view;
    const view = read(taskQueue);
    cache.set(taskQueue, { at: Date.now(), view });
    view.catch(() => cache.delete(taskQueue));
    return view;
  };
}
