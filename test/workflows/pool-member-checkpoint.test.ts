/**
 * A pool member at rest crossing its checkpoint (the monitor's Checkpoint, then continue-as-new)
 * sends its pool nothing: the report it last sent is carried into the next run
 * (contracts/proxy-run.ts CarriedReport), so the new run's first publish finds nothing new. On the
 * time-skipping server with the fake activities and the report sink as the pool.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import type { MemberReport } from '../../contracts/pool.ts';
import type { proxyLifecycle } from '../../workflows/proxy/index.ts';
import { REPORT_HOLD_MS } from '../../workflows/proxy/pool-member.ts';
import { REPORT_SINK_WORKFLOW_TYPE, sinkReportsQuery } from '../support/report-sink-workflow.ts';
import { memberFileEnv } from '../support/member-env.ts';
import { pollUntil, uniqueId } from '../support/temporal.ts';
import {
  ENTRY,
  events,
  Fakes,
  monitorStep,
  monitorWaiting,
  startProxy,
  statusWhen,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  withWorker,
} from '../support/workflow-harness.ts';

const e = memberFileEnv();

describe('a pool member at its checkpoint', () => {
  it('continues as new without a report to its pool', { timeout: TEST_TIMEOUT_MS }, async () => {
    const f = new Fakes(e);
    f.probe = () => ({ ok: true, latencyMs: 12 });
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        f.taskQueue = tq;
        const pool = await e.env.client.workflow.start(REPORT_SINK_WORKFLOW_TYPE, {
          taskQueue: tq,
          workflowId: `pool/${ENTRY}/${uniqueId('sink').toLowerCase()}`,
          args: [],
        });
        started.push(pool);
        const reports = (): Promise<MemberReport[]> => pool.query(sinkReportsQuery);
        const { handle: h } = await startProxy(e, tq, started, {
          healthLoop: 'monitor',
          continueAsNewAfterPolls: 3,
          pool: { workflowId: pool.workflowId, serving: true },
        });
        const first = h.firstExecutionRunId;
        await statusWhen(h, (s) => s.state === 'Running', 'Running');
        await monitorWaiting(f, 0, 'the first health poll');
        await monitorStep(e, f, h, 'Healthy');
        await pollUntil(async () => ((await reports()).some((r) => r.health === 'True') ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'the Healthy report',
        });
        const before = await reports();

        // Polls 2 and 3: the monitor returns Checkpoint and the run continues as new.
        f.ticks += 2;
        const next = e.env.client.workflow.getHandle<typeof proxyLifecycle>(h.workflowId);
        await pollUntil(async () => ((await next.describe()).runId !== first ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'the run to continue as new at its checkpoint',
        });
        const carried = await statusWhen(next, (s) => s.state === 'Running', 'the new run Running');
        assert.equal(carried.conditions.Healthy.status, 'True');
        await pollUntil(
          async () =>
            (await events(next)).some(
              (ev) => ev.activityTaskScheduledEventAttributes?.activityType?.name === 'monitorProxy',
            )
              ? true
              : undefined,
          { timeoutMs: WAIT_MS, what: "the new run's monitor" },
        );

        // A held report would go out REPORT_HOLD_MS after the new run's first publish.
        await sleep(REPORT_HOLD_MS + 2_000);
        assert.deepEqual(await reports(), before, 'no report at the checkpoint');
      },
      started,
    );
  });
});
