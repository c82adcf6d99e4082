// The Temporal Schedules of the fleet workflows (orphan GC, provider health): created when
// missing, updated to the providers file's intervals when present. Idempotent; any worker may run it.
import { ScheduleAlreadyRunning } from '@temporalio/client';
import type { Client, ScheduleOptions, ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import { GC_SCHEDULE_ID, GC_WORKFLOW_TYPE, HEALTH_SCHEDULE_ID, HEALTH_WORKFLOW_TYPE } from '../contracts/fleet.ts';
import type { orphanGcWorkflow, providerHealthWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';

/** The intervals the schedules take from the providers file (lib/config's ProvidersConfig has them). */
export interface FleetScheduleSettings {
  gc: { intervalMs: number; minAgeMs: number };
  hostHealthIntervalMs: number;
}

export function fleetSchedules(
  config: FleetScheduleSettings,
  taskQueue: string,
): [
  ScheduleOptions<ScheduleOptionsStartWorkflowAction<typeof orphanGcWorkflow>>,
  ScheduleOptions<ScheduleOptionsStartWorkflowAction<typeof providerHealthWorkflow>>,
] {
  return [
    {
      scheduleId: GC_SCHEDULE_ID,
      spec: { intervals: [{ every: config.gc.intervalMs }] },
      action: {
        type: 'startWorkflow',
        workflowType: GC_WORKFLOW_TYPE,
        workflowId: 'fleet/orphan-gc',
        taskQueue,
        args: [{ minAgeMs: config.gc.minAgeMs }],
        staticSummary: 'orphan GC: marked domains of ours without an open proxy workflow',
      },
      policies: { overlap: 'SKIP' },
    },
    {
      scheduleId: HEALTH_SCHEDULE_ID,
      spec: { intervals: [{ every: config.hostHealthIntervalMs }] },
      action: {
        type: 'startWorkflow',
        workflowType: HEALTH_WORKFLOW_TYPE,
        workflowId: 'fleet/provider-health',
        taskQueue,
        args: [],
        staticSummary: 'provider health: every host of every entry',
      },
      policies: { overlap: 'SKIP' },
    },
  ];
}

/** Creates each schedule, or brings an existing one to the same spec and action. */
export async function ensureSchedules(
  client: Client,
  config: FleetScheduleSettings,
  taskQueue: string,
  callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<void> {
  for (const options of fleetSchedules(config, taskQueue) as ScheduleOptions[]) {
    try {
      await withDeadline(client, 'the schedule create', callTimeoutMs, () => client.schedule.create(options));
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      await withDeadline(client, 'the schedule update', callTimeoutMs, () =>
        client.schedule.getHandle(options.scheduleId).update((prev) => ({
          ...prev,
          spec: options.spec,
          action: options.action,
          policies: { ...prev.policies, ...options.policies },
        })),
      );
    }
  }
}
