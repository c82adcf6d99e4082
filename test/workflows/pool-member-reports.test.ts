/**
 * How often a pool member reports to its pool (workflows/proxy/pool-member.ts), on the time-skipping test server with fake activities and an open
 * stand-in workflow at the pool's ID: the steps on the way up (Pending … Running, the first host,
 * the address) are held and sent together REPORT_HOLD_MS after the last report, by a timer; the
 * changes a pool acts on (Healthy, the role it applied, an ending state) go out at once, in the
 * workflow task of the change, and carry whatever was held.
 *
 * EP_RECORD_POOL_REPLAY=1 writes the member's history to
 * test/replay/pool-member-report-hold.sdk-<version>.json (replayed by test/unit/replay.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { CATALOG_WORKFLOW_TYPE } from '../../contracts/catalog.ts';
import { memberServingSignal, proxyDeleteUpdate } from '../../contracts/messages.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import { poolWorkflowId } from '../../contracts/pool.ts';
import type { catalogWorkflow } from '../../workflows/catalog.ts';
import { REPORT_HOLD_MS } from '../../workflows/proxy/pool-member.ts';
import { pollUntil, uniqueId } from '../support/temporal.ts';
import {
  ENTRY,
  events,
  Fakes,
  fileEnv,
  monitorStep,
  monitorWaiting,
  startProxy,
  status,
  statusWhen,
  TEST_TIMEOUT_MS,
  upsertedStates,
  distinctStates,
  WAIT_MS,
  withWorker,
} from '../support/workflow-harness.ts';
import { recordReplay } from '../support/replay-record.ts';

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

const e = fileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };

/** An open workflow at a pool's ID that only collects what is sent to it (its history). */
async function standInPool(taskQueue: string, started: WorkflowHandle[]): Promise<WorkflowHandle> {
  const h = await e.env.client.workflow.start<typeof catalogWorkflow>(CATALOG_WORKFLOW_TYPE, {
    taskQueue,
    workflowId: poolWorkflowId(ENTRY, uniqueId('pool')),
    args: [{ publications: [] }],
  });
  started.push(h);
  return h;
}

function reportOf(payload: { data?: Uint8Array | null } | undefined): MemberReport | undefined {
  return payload?.data ? (JSON.parse(Buffer.from(payload.data).toString('utf8')) as MemberReport) : undefined;
}

/** The member reports the stand-in received, in order (its history's signal events). */
async function reports(pool: WorkflowHandle): Promise<MemberReport[]> {
  const out: MemberReport[] = [];
  for (const ev of await events(pool)) {
    const a = ev.workflowExecutionSignaledEventAttributes;
    if (a?.signalName !== 'member') continue;
    const r = reportOf(a.input?.payloads?.[0]);
    if (r !== undefined) out.push(r);
  }
  return out;
}

async function reportWhen(pool: WorkflowHandle, pred: (r: MemberReport) => boolean, what: string) {
  return pollUntil(async () => (await reports(pool)).find(pred), { timeoutMs: WAIT_MS, intervalMs: 25, what });
}

/** The events that wake a workflow task, by name (the others are the commands of the task before). */
const TRIGGERS: [keyof HistoryEvent, string][] = [
  ['timerFiredEventAttributes', 'TimerFired'],
  ['activityTaskCompletedEventAttributes', 'ActivityTaskCompleted'],
  ['activityTaskFailedEventAttributes', 'ActivityTaskFailed'],
  ['workflowExecutionSignaledEventAttributes', 'Signaled'],
  ['workflowExecutionUpdateAcceptedEventAttributes', 'UpdateAccepted'],
  ['workflowExecutionUpdateAdmittedEventAttributes', 'UpdateAdmitted'],
  ['externalWorkflowExecutionSignaledEventAttributes', 'ExternalSignaled'],
];

/**
 * What woke the member's workflow task that sent the first report matching `pred`: the waking
 * events since the task before it (a held report's is a TimerFired).
 */
function triggerOf(history: HistoryEvent[], pred: (r: MemberReport) => boolean): string[] {
  const i = history.findIndex((ev) => {
    const a = ev.signalExternalWorkflowExecutionInitiatedEventAttributes;
    const r = a?.signalName === 'member' ? reportOf(a.input?.payloads?.[0]) : undefined;
    return r !== undefined && pred(r);
  });
  assert.ok(i >= 0, 'the member sent such a report');
  let started = i;
  while (started > 0 && history[started]!.workflowTaskStartedEventAttributes == null) started--;
  let before = started - 1;
  while (before > 0 && history[before]!.workflowTaskCompletedEventAttributes == null) before--;
  return history
    .slice(before + 1, started)
    .flatMap((ev) => TRIGGERS.filter(([k]) => ev[k] != null).map(([, name]) => name));
}

/** Writes the run's history as a replay file when asked to (EP_RECORD_POOL_REPLAY=1). */
const record = (h: WorkflowHandle, name: string): Promise<void> => recordReplay(h, name, 'EP_RECORD_POOL_REPLAY');

const healthy = (r: MemberReport): boolean => r.state === 'Running' && r.health === 'True';

describe('a pool member reports', () => {
  it(
    'its way up held in one report, then Healthy, its role and its end at once, each in the task of the change',
    opts,
    async () => {
      const f = new Fakes(e);
      // Every poll is the test's step: a booting proxy's 1 s poll would otherwise reach Healthy in
      // real time before the held report's timer.
      f.ticksOnly = true;
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          f.taskQueue = tq;
          const pool = await standInPool(tq, started);
          const m = await startProxy(e, tq, started, {
            healthLoop: 'monitor',
            pool: { workflowId: pool.workflowId, serving: false },
          });
          await statusWhen(m.handle, (s) => s.state === 'Running', 'Running');
          await monitorWaiting(f, 0, 'the first health poll');
          // Pending, Provisioning, Booting, Running: nothing the pool acts on, so one report, held.
          const held = await reportWhen(pool, (r) => r.state === 'Running', 'the held report');
          assert.equal(held.health, 'Unknown');
          const startedAt = (await m.handle.describe()).startTime.getTime();
          assert.ok(
            Date.parse(held.at) - startedAt >= REPORT_HOLD_MS,
            `held ${Date.parse(held.at) - startedAt} ms after the start, at least ${REPORT_HOLD_MS}`,
          );
          assert.ok(held.ip !== undefined && held.host !== undefined, 'it carries the host and the address');
          const way = distinctStates(await upsertedStates(m.handle));
          assert.deepEqual(way.slice(0, 4), ['Pending', 'Provisioning', 'Booting', 'Running']);
          const upTo = await reports(pool);
          assert.equal(upTo.length, 1, `one report for the way up: ${upTo.map((r) => r.state).join(',')}`);
          assert.ok(triggerOf(await events(m.handle), (r) => r.state === 'Running').includes('TimerFired'));

          let st = await status(m.handle);
          for (let i = 0; i < 6 && st.conditions.Healthy.status !== 'True'; i++) {
            st = await monitorStep(e, f, m.handle, `health poll ${i + 1}`);
          }
          assert.equal(st.conditions.Healthy.status, 'True');
          await reportWhen(pool, healthy, 'the Healthy report');
          // At once: in the task the monitor's return woke, not a timer's.
          const healthyWoke = triggerOf(await events(m.handle), healthy);
          assert.ok(
            healthyWoke.includes('ActivityTaskCompleted') && !healthyWoke.includes('TimerFired'),
            `the Healthy report's task was woken by: ${healthyWoke.join(', ')}`,
          );

          await m.handle.signal(memberServingSignal, { serving: true });
          await reportWhen(pool, (r) => r.serving, 'the report that it serves');
          const servingWoke = triggerOf(await events(m.handle), (r) => r.serving);
          assert.ok(
            servingWoke.includes('Signaled') && !servingWoke.includes('TimerFired'),
            `the serving report's task was woken by: ${servingWoke.join(', ')}`,
          );

          await m.handle.executeUpdate(proxyDeleteUpdate);
          await m.handle.result();
          const all = await reports(pool);
          assert.equal(all[all.length - 1]!.state, 'Deleted');
          // Reports held or sent at once, none sent twice.
          const keys = all.map(({ at: _a, lastError: _e, ...rest }) => JSON.stringify(rest));
          assert.ok(
            keys.every((k, i) => i === 0 || k !== keys[i - 1]),
            keys.join('\n'),
          );
          // Each report's `at` is later than the one before (the pool keeps the latest: one
          // sender's signals can arrive out of order, two from one task at one workflow time).
          const sent = (await events(m.handle)).flatMap((ev) => {
            const a = ev.signalExternalWorkflowExecutionInitiatedEventAttributes;
            const r = a?.signalName === 'member' ? reportOf(a.input?.payloads?.[0]) : undefined;
            return r === undefined ? [] : [Date.parse(r.at)];
          });
          assert.ok(
            sent.every((t, i) => i === 0 || t > sent[i - 1]!),
            `report times: ${sent.join(', ')}`,
          );
          // Up, Healthy, serving, Deleting, Deleted: 5 (every change at once sent 8 here).
          assert.ok(all.length <= 5, `reports: ${all.map((r) => `${r.state}/${r.health}/${r.serving}`).join(', ')}`);
          await record(m.handle, 'pool-member-report-hold');
        },
        started,
      );
    },
  );
});
