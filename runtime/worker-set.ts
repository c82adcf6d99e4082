// The workers one worker process runs: the main one on its task queue (proxies, images, hosts,
// schedules) and the pools' one on poolTaskQueue(taskQueue), with one workflow bundle and one set
// of activities. The pools' worker gets few workflow-task slots of its own: a pool's pass is short
// and there are few pools, but it must never queue behind a thousand members' tasks.
import { Worker } from '@temporalio/worker';
import type { WorkerOptions } from '@temporalio/worker';
import { poolTaskQueue } from '../contracts/task-queues.ts';

/** Workflow-task slots of the pools' worker unless told otherwise. */
export const POOL_WORKFLOW_TASKS = 4;

/**
 * The longest the SDK holds back an activity's heartbeat (`maxHeartbeatThrottleInterval`; its own
 * default is 60 s, and 0.8 x the activity's heartbeat timeout below that). Held back, a heartbeat
 * reaches the server later and a newer one replaces it: the health monitor heartbeats once per poll
 * (docs/health.md), and with its 20 s timeout at a 15 s interval the server's copy drifted up to
 * about 30 s behind the last probe. At 1 s every poll's heartbeat is sent when made, so what the
 * fresh status and the Web UI show is at most one interval old; the server gets one heartbeat per
 * poll instead of one per 16 s (about 7 % more at 15 s), and a transfer's (one a second) each second.
 */
export const HEARTBEAT_THROTTLE_MS = 1_000;

export interface WorkerSet {
  main: Worker;
  pools: Worker;
  /** Runs both; resolves when both stopped; when one fails, the other is shut down and the error thrown. */
  run(): Promise<void>;
  /** Asks both to shut down (idempotent). */
  shutdown(): void;
}

export async function createWorkerSet(
  options: WorkerOptions & { taskQueue: string },
  pools: { maxConcurrentWorkflowTaskExecutions?: number } = {},
): Promise<WorkerSet> {
  const main = await Worker.create({ maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MS, ...options });
  const poolWorker = await Worker.create({
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MS,
    ...options,
    taskQueue: poolTaskQueue(options.taskQueue),
    maxConcurrentWorkflowTaskExecutions: pools.maxConcurrentWorkflowTaskExecutions ?? POOL_WORKFLOW_TASKS,
  });
  const shutdown = (): void => {
    for (const w of [main, poolWorker]) if (w.getState() === 'RUNNING') w.shutdown();
  };
  return {
    main,
    pools: poolWorker,
    shutdown,
    async run() {
      const runs = [main, poolWorker].map((w) =>
        w.run().catch((err: unknown) => {
          shutdown();
          throw err;
        }),
      );
      const results = await Promise.allSettled(runs);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}
