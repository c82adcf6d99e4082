// Every activity the worker registers, built around the worker's host registry and Temporal
// client. Workflows import this module with `import type` only, for the activities' signatures.
import type { Client } from '@temporalio/client';
import { fleetActivities } from './fleet.ts';
import type { HostRegistry } from './hosts.ts';
import { imageActivities } from './image.ts';
import { proxyActivities } from './proxy.ts';
import { smokeGreet } from './smoke.ts';

export interface ActivityDeps {
  registry: HostRegistry;
  /** A client of the worker's namespace (joining image workflows, progress signals, GC look-ups). */
  client: Client;
  /** The task queue workflows started by activities run on. */
  taskQueue: string;
}

export function createActivities(deps: ActivityDeps) {
  return {
    smokeGreet,
    ...proxyActivities(deps.registry),
    ...imageActivities(deps.registry, deps.client, deps.taskQueue),
    ...fleetActivities(deps.registry, deps.client),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export { smokeGreet };
