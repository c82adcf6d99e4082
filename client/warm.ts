// The warm-image workflow's client calls: the API starts a warm (or joins the running one) and
// reads its state. Typed by the workflow function.
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { WARM_WORKFLOW_TYPE, warmWorkflowId } from '../contracts/warm.ts';
import type { WarmResult } from '../contracts/warm.ts';
import type { warmImageWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';

/** What a warm looks like to a client. */
export type WarmView =
  | { workflowId: string; state: 'Running' }
  | { workflowId: string; state: 'Done'; result: WarmResult }
  | { workflowId: string; state: 'Failed'; error: string };

/** The API's view of warm-image workflows. */
export interface ImageWarmer {
  /** Starts the warm, or joins the one running for (entry, key). */
  start(entry: string, key: string, taskQueue: string): Promise<{ workflowId: string; runId: string }>;
  /** The warm's state, waiting up to `waitMs` for its end; undefined when there is none. */
  view(entry: string, key: string, waitMs: number): Promise<WarmView | undefined>;
}

export function temporalWarmer(client: Client, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS): ImageWarmer {
  return {
    async start(entry, key, taskQueue) {
      const workflowId = warmWorkflowId(entry, key);
      const h = await withDeadline(client, 'the warm start', callTimeoutMs, () =>
        client.workflow.start<typeof warmImageWorkflow>(WARM_WORKFLOW_TYPE, {
          workflowId,
          taskQueue,
          args: [{ entry, key }],
          workflowIdConflictPolicy: 'USE_EXISTING',
          workflowIdReusePolicy: 'ALLOW_DUPLICATE',
          staticSummary: `warm image ${key} on every host of ${entry}`,
        }),
      );
      return { workflowId, runId: h.firstExecutionRunId };
    },
    async view(entry, key, waitMs) {
      const workflowId = warmWorkflowId(entry, key);
      const h = client.workflow.getHandle<typeof warmImageWorkflow>(workflowId);
      const describe = () => withDeadline(client, 'describe', callTimeoutMs, () => h.describe());
      try {
        await describe();
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      }
      try {
        const result = await withDeadline(client, 'the warm result', Math.max(1, waitMs), () => h.result());
        return { workflowId, state: 'Done', result };
      } catch (err) {
        if (err instanceof WorkflowFailedError) {
          const inner = err.cause?.cause instanceof Error ? err.cause.cause.message : undefined;
          return { workflowId, state: 'Failed', error: inner ?? err.cause?.message ?? err.message };
        }
        if ((await describe()).status.name === 'RUNNING') return { workflowId, state: 'Running' };
        throw err;
      }
    },
  };
}
