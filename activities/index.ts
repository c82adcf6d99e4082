// Every activity the worker registers, built around the worker's host registry and Temporal
// client. Workflows import this module with `import type` only, for the activities' signatures.
import type { Client } from '@temporalio/client';
import { cordonedHosts } from '../client/hosts.ts';
import type { HostSurvey } from '../contracts/fleet.ts';
import { createFleetActivities } from './fleet.ts';
import { mapped } from './errors.ts';
import { createHostActivities } from './host.ts';
import type { HostRegistry } from './hosts.ts';
import type { WorkerMetrics } from './metrics.ts';
import { createImageActivities } from './image.ts';
import { createHostMonitorActivities } from './host-monitor.ts';
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

/**
 * `surveyHosts` with each host's cordon from its maintenance workflow (client/hosts.ts), read at
 * every call: the survey's cache holds the libvirt part only, so a cordon counts from the next
 * placement on. A cordon that cannot be read fails the survey (retried), never reads as schedulable.
 */
export function withCordons(
  survey: (input: { entry: string }) => Promise<HostSurvey[]>,
  client: Client,
): (input: { entry: string }) => Promise<HostSurvey[]> {
  return async (input) => {
    const hosts = await survey(input);
    const cordoned = await mapped(() =>
      cordonedHosts(
        client,
        input.entry,
        hosts.map((h) => h.host),
      ),
    );
    return hosts.map((h) => (cordoned.has(h.host) ? { ...h, cordoned: true } : h));
  };
}

export function createActivities(deps: ActivityDeps) {
  const proxy = createProxyActivities(deps.registry, deps.metrics);
  return {
    smokeGreet,
    ...proxy,
    surveyHosts: withCordons((input) => proxy.surveyHosts(input), deps.client),
    ...createMonitorActivities(proxy, deps.metrics),
    ...createHostMonitorActivities(proxy, deps.client, deps.taskQueue, deps.metrics),
    ...createImageActivities(deps.registry, deps.client, deps.taskQueue, deps.metrics),
    ...createFleetActivities(deps.registry, deps.client),
    ...createPoolActivities(deps.client, deps.taskQueue),
    ...createHostActivities(deps.registry, deps.client),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export { smokeGreet };
