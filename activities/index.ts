// Every activity the worker registers, built around the worker's host registry and Temporal
// client. Workflows import this module with `import type` only, for the activities' signatures.
import type { Client } from '@temporalio/client';
import { createFleetActivities } from './fleet.ts';
import type { HostRegistry } from './hosts.ts';
import type { WorkerMetrics } from './metrics.ts';
import { createImageActivities } from './image.ts';
import { createMonitorActivities } from './monitor.ts';
import { createPoolActivities } from './pool.ts';
import { createProxyActivities } from './proxy.ts';
import { smokeGreet } from './smoke.ts';

export interface ActivityDeps {
  registry: HostRegistry;
  /** A client of the worker's namespace (joining image workflows, progress signals, GC look-ups). */
  client: Client;
  /** The task queue workflows started by activities run on. */
  taskQueue: string;
  /** Where probe latencies and uploaded bytes are counted (the worker's /metrics). */
  metrics?: WorkerMetrics;
}

export function createActivities(deps: ActivityDeps) {
  const proxy = createProxyActivities(deps.registry, deps.metrics);
  return {
    smokeGreet,
    ...proxy,
    ...createMonitorActivities(proxy),
    ...createImageActivities(deps.registry, deps.client, deps.taskQueue, deps.metrics),
    ...createFleetActivities(deps.registry, deps.client),
    ...createPoolActivities(deps.client, deps.taskQueue),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export { smokeGreet };
