// The worker's workflow cache (the SDK's `maxCachedWorkflows`): how many workflows it keeps in
// memory between their workflow tasks. The SDK's default sizes it from the heap limit (about 2,400
// with Node's default 4 GiB heap), so a worker holding N Running proxies keeps all N in memory
// although, with the health monitor (docs/health.md), a Healthy proxy's workflow has no task
// between transitions: its cached copy is never used and costs memory per held proxy. A smaller
// cache keeps the workflows that are busy (provisioning, pools, images); one evicted replays its
// history (one run since its last continue-as-new) at its next task, a transition or a query.
import { OptionError, wholeNumber } from './options.ts';

/** The default cache size: more than the workflow tasks a worker runs at once, far fewer than the proxies it holds. */
export const DEFAULT_MAX_CACHED_WORKFLOWS = 250;

/**
 * The Worker options of the workflow cache: `--max-cached-workflows` (text, or undefined for the
 * default) checked against `--max-workflow-tasks` (the SDK needs the cache to hold every task in
 * flight); a bad value throws OptionError naming the option.
 */
export function workflowCacheOptions(
  text: string | undefined,
  maxWorkflowTasks: number,
): { maxCachedWorkflows: number; maxConcurrentWorkflowTaskExecutions: number } {
  const maxCachedWorkflows =
    text === undefined ? DEFAULT_MAX_CACHED_WORKFLOWS : wholeNumber('max-cached-workflows', text, { min: 2 });
  if (maxCachedWorkflows < maxWorkflowTasks) {
    throw new OptionError(
      `--max-cached-workflows (${maxCachedWorkflows}) must be at least --max-workflow-tasks (${maxWorkflowTasks}): ` +
        'raise it or lower --max-workflow-tasks',
    );
  }
  return { maxCachedWorkflows, maxConcurrentWorkflowTaskExecutions: maxWorkflowTasks };
}
