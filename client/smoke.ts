// The smoke workflow's client call: start it, wait for its result, both under one deadline.
import type { Client } from '@temporalio/client';
import { SMOKE_WORKFLOW_TYPE } from '../contracts/smoke.ts';
import type { SmokeResult } from '../contracts/smoke.ts';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
import type { smokeWorkflow } from '../workflows/index.ts';
import { withDeadline } from './connection.ts';

export interface SmokeOptions {
  /** Who the workflow greets. */
  name: string;
  /** Bound on the start and the run together, in ms (also the run's execution timeout). */
  timeoutMs: number;
  /** Default the project's task queue. */
  taskQueue?: string;
  /** Default `smoke/cli-<time>`. */
  workflowId?: string;
}

export interface SmokeRun {
  workflowId: string;
  runId: string;
  result: SmokeResult;
}

/** Runs the smoke workflow on a worker of `taskQueue` and returns its result. */
export async function runSmoke(client: Client, o: SmokeOptions): Promise<SmokeRun> {
  const workflowId = o.workflowId ?? `smoke/cli-${Date.now().toString(36)}`;
  return withDeadline(client, 'the smoke workflow', o.timeoutMs, async () => {
    const handle = await client.workflow.start<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
      taskQueue: o.taskQueue ?? TASK_QUEUE,
      workflowId,
      args: [{ name: o.name }],
      workflowExecutionTimeout: o.timeoutMs,
    });
    const result = await handle.result();
    return { workflowId, runId: handle.firstExecutionRunId, result };
  });
}
