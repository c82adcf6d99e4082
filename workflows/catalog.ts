// The catalog workflow (contracts/catalog.ts): holds the latest publication of each worker of a
// task queue and answers the `catalog` query. Publications older than CATALOG_FRESH_MS are dropped;
// the run continues as new after CATALOG_SIGNALS_PER_RUN publications (or when Temporal suggests it).
import { allHandlersFinished, condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  CATALOG_FRESH_MS,
  CATALOG_SIGNALS_PER_RUN,
  catalogPublishSignal,
  catalogQuery,
  catalogWithdrawSignal,
} from '../contracts/catalog.ts';
import type { CatalogPublication, CatalogWorkflowInput } from '../contracts/catalog.ts';

export async function catalogWorkflow(input: CatalogWorkflowInput): Promise<void> {
  const publications = new Map<string, CatalogPublication>(input.publications.map((p) => [p.publisher, p]));
  // Read-only (a query must not change state): the stale are pruned when a signal arrives.
  const fresh = (): CatalogPublication[] =>
    [...publications.values()]
      .filter((p) => Date.now() - Date.parse(p.publishedAt) <= CATALOG_FRESH_MS)
      .sort((a, b) => a.publisher.localeCompare(b.publisher));
  const prune = (): void => {
    const keep = new Set(fresh().map((p) => p.publisher));
    for (const publisher of [...publications.keys()]) if (!keep.has(publisher)) publications.delete(publisher);
  };
  let signals = 0;
  setHandler(catalogPublishSignal, (p) => {
    publications.set(p.publisher, p);
    prune();
    signals++;
  });
  setHandler(catalogWithdrawSignal, (publisher) => {
    publications.delete(publisher);
    signals++;
  });
  setHandler(catalogQuery, () => fresh());
  await condition(() => signals >= CATALOG_SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested);
  await condition(allHandlersFinished);
  await continueAsNew<typeof catalogWorkflow>({ publications: fresh() });
}
