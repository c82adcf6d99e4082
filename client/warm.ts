// The warm-image workflow's client calls: the API starts a warm (or joins the running one) and
// reads its state. Typed by the workflow function.
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { WARM_WORKFLOW_TYPE, warmWorkflowId } from '../contracts/warm.ts';
import type { WarmResult } from '../contracts/warm.ts';
import type { warmImageWorkflow } from '../workflows/index.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';
import { isTemporalUnavailable } from './errors.ts';

/** What a warm looks like to a client. */
export type WarmView =
  | { workflowId: string; state: 'Running' }
  | { workflowId: string; state: 'Done'; result: WarmResult }
  /** `code`: the failure's project code (contracts/errors.ts CODES) when it carries one. */
  | { workflowId: string; state: 'Failed'; error: string; code?: string };

/** The API's view of warm-image workflows. */
export interface ImageWarmer {
  /** Starts the warm, or joins the one running for (entry, key). */
  start(entry: string, key: string, taskQueue: string): Promise<{ workflowId: string; runId: string }>;
  /** The warm's state, waiting up to `waitMs` (0: not at all) for its end; undefined when there is none. */
  view(entry: string, key: string, waitMs: number): Promise<WarmView | undefined>;
}

const outcome = (workflowId: string, result: WarmResult): WarmView => ({ workflowId, state: 'Done', result });

/** A warm that did not complete: failed, cancelled, terminated or timed out, with the innermost reason. */
function failed(workflowId: string, err: WorkflowFailedError): WarmView {
  const inner = err.cause?.cause instanceof Error ? err.cause.cause.message : undefined;
  const view: WarmView = { workflowId, state: 'Failed', error: inner ?? err.cause?.message ?? err.message };
  const code = failureCode(err);
  return code === undefined ? view : { ...view, code };
}

/** The project code a failure chain carries: details[0].code (FailureDetails) or an ApplicationFailure's type. */
function failureCode(err: unknown): string | undefined {
  let type: string | undefined;
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; depth++) {
    const f = e as Error & { details?: unknown[]; type?: unknown };
    const code = (f.details?.[0] as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string') return code;
    if (typeof f.type === 'string' && f.type !== '') type = f.type;
    e = f.cause;
  }
  return type;
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
      let status: string;
      try {
        status = (await describe()).status.name;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      }
      // A closed run's result is read under the call deadline, never under the caller's wait: its
      // outcome (completed, failed, cancelled, terminated, timed out) is there to read. A run that
      // continued as new is followed to the latest, which describe() already named.
      if (status === 'RUNNING') {
        if (waitMs <= 0) return { workflowId, state: 'Running' };
        try {
          return outcome(workflowId, await withDeadline(client, 'the warm result', waitMs, () => h.result()));
        } catch (err) {
          if (err instanceof WorkflowFailedError) return failed(workflowId, err);
          if (!isTemporalUnavailable(err)) throw err;
          // The wait ended first: still running, or ended just now (then read below).
          if ((await describe()).status.name === 'RUNNING') return { workflowId, state: 'Running' };
        }
      }
      try {
        return outcome(workflowId, await withDeadline(client, 'the warm result', callTimeoutMs, () => h.result()));
      } catch (err) {
        if (err instanceof WorkflowFailedError) return failed(workflowId, err);
        throw err;
      }
    },
  };
}
