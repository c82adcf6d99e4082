// Task queue names shared by workers and clients. Plain constants and pure names only.

/** The project's main task queue: proxy workflows and their activities. */
export const TASK_QUEUE = 'egress-proxies';

/**
 * The pools' task queue beside a main one: pool workflows and their three activities. A pool has
 * its own queue so its workflow tasks never wait behind its members' (at 1,000 members on one
 * queue, a pool's pass waited minutes for a worker slot); the workers of `taskQueue` poll both.
 */
export function poolTaskQueue(taskQueue: string): string {
  return `${taskQueue}-pools`;
}
