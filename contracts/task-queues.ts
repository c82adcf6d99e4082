// Task queue names shared by workers and clients. Plain constants only.

/** The project's main task queue: proxy workflows and their activities. */
export const TASK_QUEUE = 'egress-proxies';
