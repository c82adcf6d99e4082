// The pre-deploy replay check's Temporal side (egressctl replay, docs/temporal.md "Upgrading
// workers"): which runs to check (the project's workflow types, open ones and those started or
// closed within the window, newest first, at most `limit`) and their histories, each call under
// its own deadline. Replaying them against a workflow bundle is runtime/replay.ts's part.
import type { Client, WorkflowHandle } from '@temporalio/client';
import { WORKFLOW_VERSIONING } from '../contracts/versioning.ts';
import { withDeadline } from './connection.ts';
import { visibilityLiteral } from './store.ts';

/** Every workflow type the worker registers (contracts/versioning.ts names each; test/unit/replay-check.test.ts checks them against workflows/index.ts). */
export const PROJECT_WORKFLOW_TYPES: readonly string[] = Object.keys(WORKFLOW_VERSIONING);

export interface ReplaySelection {
  /** Runs started or closed at or after this instant are checked (and every open run). */
  since: Date;
  /** At most this many runs, newest first. */
  limit: number;
  /** The workflow types (default PROJECT_WORKFLOW_TYPES). */
  types?: readonly string[];
  /** Only runs of this task queue (default: any). */
  taskQueue?: string;
  /** Deadline of the listing, and of each history's download, in ms. */
  callTimeoutMs: number;
}

/** One run to replay. */
export interface ReplayCandidate {
  workflowId: string;
  runId: string;
  type: string;
  /** The SDK's status name: RUNNING, COMPLETED, FAILED, … */
  status: string;
  startTime: string;
  closeTime?: string;
}

export interface ReplayListing {
  runs: ReplayCandidate[];
  /** More runs matched than `limit`: only the newest were taken. */
  truncated: boolean;
  query: string;
}

/**
 * The visibility query of `s`: the types, and open, or started or closed since `s.since`. Open runs
 * are taken whatever their age: a proxy that has run for months is what the new code resumes.
 */
export function replayQuery(s: Pick<ReplaySelection, 'since' | 'types' | 'taskQueue'>): string {
  const types = (s.types ?? PROJECT_WORKFLOW_TYPES).map(visibilityLiteral).join(', ');
  const at = visibilityLiteral(s.since.toISOString());
  const parts = [
    `WorkflowType IN (${types})`,
    `(ExecutionStatus = 'Running' OR StartTime >= ${at} OR CloseTime >= ${at})`,
  ];
  if (s.taskQueue !== undefined) parts.push(`TaskQueue = ${visibilityLiteral(s.taskQueue)}`);
  return parts.join(' AND ');
}

/** The runs `s` selects, listed under one deadline (TemporalUnavailableError past it). */
export async function listReplayCandidates(client: Client, s: ReplaySelection): Promise<ReplayListing> {
  const query = replayQuery(s);
  return withDeadline(client, 'the listing of runs to replay', s.callTimeoutMs, async () => {
    const runs: ReplayCandidate[] = [];
    let truncated = false;
    for await (const w of client.workflow.list({ query, pageSize: Math.min(s.limit + 1, 1000) })) {
      if (runs.length === s.limit) {
        truncated = true;
        break;
      }
      const run: ReplayCandidate = {
        workflowId: w.workflowId,
        runId: w.runId,
        type: w.type,
        status: w.status.name,
        startTime: w.startTime.toISOString(),
      };
      if (w.closeTime !== undefined) run.closeTime = w.closeTime.toISOString();
      runs.push(run);
    }
    return { runs, truncated, query };
  });
}

/** A downloaded history, ready for the SDK's replayer. */
export interface FetchedHistory {
  run: ReplayCandidate;
  history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
}

/**
 * The histories of `runs`, downloaded one after the other (at most `prefetch` ahead of the
 * consumer, so memory holds a few histories, not all), each under `callTimeoutMs`.
 */
export async function* fetchHistories(
  client: Client,
  runs: readonly ReplayCandidate[],
  o: { callTimeoutMs: number; prefetch?: number },
): AsyncGenerator<FetchedHistory> {
  const ahead = Math.max(1, o.prefetch ?? 2);
  const fetchOne = (run: ReplayCandidate): Promise<FetchedHistory> =>
    withDeadline(client, `the history of ${run.workflowId} (run ${run.runId})`, o.callTimeoutMs, async () => ({
      run,
      history: await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory(),
    }));
  const pending: Promise<FetchedHistory>[] = [];
  let next = 0;
  const fill = (): void => {
    while (pending.length < ahead && next < runs.length) {
      const p = fetchOne(runs[next++]!);
      p.catch(() => undefined); // awaited in order below; a rejection is not unhandled meanwhile
      pending.push(p);
    }
  };
  fill();
  while (pending.length > 0) {
    const h = await pending.shift()!;
    fill();
    yield h;
  }
}
