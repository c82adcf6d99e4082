// The workers one worker process runs: the main one on its task queue (proxies, images, hosts,
// schedules) and the pools' one on poolTaskQueue(taskQueue), with one workflow bundle and one set
// of activities. The pools' worker gets few workflow-task slots of its own: a pool's pass is short
// and there are few pools, but it must never queue behind a thousand members' tasks.
import { Worker } from '@temporalio/worker';
import type { WorkerOptions } from '@temporalio/worker';
import { poolTaskQueue } from '../contracts/task-queues.ts';

/** Workflow-task slots of the pools' worker unless told otherwise. */
export const POOL_WORKFLOW_TASKS = 4;

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
  const main = await Worker.create(options);
  const poolWorker = await Worker.create({
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
