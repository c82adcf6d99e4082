/**
 * A resize that reaches the monitor loop (workflows/proxy/monitor-loop.ts) in the same workflow
 * task as the monitor's Checkpoint result, on the time-skipping server with the fake activities of
 * the other workflow tests, and one asked while the older poll loop (health-loop.ts) makes the
 * poll after which it continues as new. To put both into one task the activities run on a worker of their own
 * and the workflow on another, stopped in between: while no workflow worker polls, the monitor
 * returns Checkpoint and the resize update waits at the server; the next workflow worker's first
 * task carries both. The loop must apply the resize and continue as new afterwards, not wait for
 * the handler that waits for it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { WorkerOptions } from '@temporalio/worker';
import { monitorHeartbeat } from '../../client/health.ts';
import { proxyDeleteUpdate, proxyResizeUpdate } from '../../contracts/messages.ts';
import type { proxyLifecycle } from '../../workflows/proxy/index.ts';
import { pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import {
  events,
  Fakes,
  fileEnv,
  Gate,
  held,
  idle,
  INTERVAL_MS,
  monitorStep,
  monitorWaiting,
  startProxy,
  statusWhen,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  withWorker,
} from '../support/workflow-harness.ts';

const e = fileEnv();

type HistoryEvent = Awaited<ReturnType<typeof events>>[number];

/** The monitor activities the run completed so far (scheduled event ids). */
function monitorsCompleted(ev: HistoryEvent[]): number {
  const monitors = new Set(
    ev
      .filter((x) => x.activityTaskScheduledEventAttributes?.activityType?.name === 'monitorProxy')
      .map((x) => String(x.eventId)),
  );
  return ev.filter((x) => monitors.has(String(x.activityTaskCompletedEventAttributes?.scheduledEventId))).length;
}

/** Workflow tasks completed from the last monitor's completion up to the update's acceptance. */
function tasksBetween(ev: HistoryEvent[]): number {
  const accepted = ev.findIndex((x) => x.workflowExecutionUpdateAcceptedEventAttributes);
  const done = ev.slice(0, Math.max(accepted, 0)).findLastIndex((x) => x.activityTaskCompletedEventAttributes);
  assert.ok(
    done >= 0 && accepted > done,
    `the monitor completed (event ${done}) before the update was accepted (${accepted})`,
  );
  return ev.slice(done, accepted).filter((x) => x.workflowTaskCompletedEventAttributes).length;
}

/** Waits for the run after `firstRun` and checks that the new size was carried into it. */
async function continuedWithNewSize(client: Client, workflowId: string, firstRun: string) {
  const next = client.workflow.getHandle<typeof proxyLifecycle>(workflowId);
  await pollUntil(async () => ((await next.describe()).runId !== firstRun ? true : undefined), {
    timeoutMs: WAIT_MS,
    what: 'the new run after the resize',
  });
  const carried = await statusWhen(next, (x) => x.state === 'Running', 'the new run Running');
  assert.equal(carried.vm.memoryMiB, 1024, 'the new size is carried into the new run');
  return next;
}

describe('a resize at the checkpoint', () => {
  it(
    'arriving in one task with the Checkpoint result: resized, then continued as new',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const env = await e.open();
      const f = new Fakes(e);
      f.resize = () => ({ changed: true });
      const taskQueue = uniqueId('wf-tq');
      f.taskQueue = taskQueue;
      const base: WorkerOptions = {
        connection: env.nativeConnection,
        namespace: env.namespace ?? 'default',
        taskQueue,
        // Cancellation reaches an activity only through a heartbeat's response: send them at once.
        defaultHeartbeatThrottleInterval: 50,
        maxHeartbeatThrottleInterval: 100,
        shutdownGraceTime: 2_000,
      };
      // No cache (so no sticky queue): a stopped workflow worker leaves nothing the server waits on.
      // It runs the workflow's local activities (the reads before the create) and no activity task.
      const workflows = (): Promise<Worker> =>
        Worker.create({
          ...base,
          workflowBundle: e.bundle,
          maxCachedWorkflows: 0,
          activities: f.activities(),
          enableNonLocalActivities: false,
        });
      const started: WorkflowHandle[] = [];
      const activityWorker = await Worker.create({ ...base, activities: f.activities() });
      const activitiesDone = activityWorker.run();
      try {
        // Running and Healthy (polls 1 and 2); the third poll is the checkpoint.
        const { handle: h } = await (
          await workflows()
        ).runUntil(async () => {
          const p = await startProxy(e, taskQueue, started, {
            healthLoop: 'monitor',
            continueAsNewAfterPolls: 3,
          });
          // Running: its monitor waits. (No status queries while tasks are under way: the test
          // server can lose a task of a worker without a cache then, until the task's timeout.)
          await monitorWaiting(f, 0, 'the first health poll');
          const s = await monitorStep(e, f, p.handle, 'poll 2');
          assert.equal(s.conditions.Healthy.status, 'True');
          return p;
        });
        const firstRun = h.firstExecutionRunId;
        // The first run's history (the handle `h` follows the chain to the newest run).
        const first = env.client.workflow.getHandle(h.workflowId, firstRun);
        // No workflow worker now. Poll 3: the monitor returns Checkpoint; the server holds it.
        const before = monitorsCompleted(await events(first));
        f.ticks += 1;
        await pollUntil(async () => (monitorsCompleted(await events(first)) > before ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: "the monitor's Checkpoint result at the server",
        });
        // The resize waits at the server for a workflow worker (it is delivered with the same task).
        const updateId = uniqueId('resize');
        const resized = h.executeUpdate(proxyResizeUpdate, { args: [{ memoryMiB: 1024 }], updateId });
        resized.catch(() => undefined);
        await pollUntil(
          async () => {
            const res = await env.client.workflowService
              .pollWorkflowExecutionUpdate({
                namespace: env.namespace ?? 'default',
                updateRef: { workflowExecution: { workflowId: h.workflowId }, updateId },
                waitPolicy: { lifecycleStage: 1 }, // ADMITTED
              })
              .catch(() => undefined);
            return res === undefined ? undefined : true;
          },
          { timeoutMs: WAIT_MS, what: 'the resize update admitted at the server' },
        );
        await (
          await workflows()
        ).runUntil(async () => {
          try {
            const ev = await pollUntil(
              async () => {
                const x = await events(first);
                return x.some((y) => y.workflowExecutionUpdateAcceptedEventAttributes) ? x : undefined;
              },
              { timeoutMs: WAIT_MS, what: 'the resize update accepted' },
            );
            assert.equal(tasksBetween(ev), 1, 'the Checkpoint result and the resize reached the loop in one task');
            const s = await withTimeout(
              resized,
              WAIT_MS,
              'the resize update that reached the loop with the Checkpoint result (the loop waits for the handler, the handler for the loop)',
            );
            assert.equal(s.vm.memoryMiB, 1024);
            assert.equal(f.count('resizeProxyVm'), 1);
            // Continued as new at the next checkpoint, with the new size carried.
            await pollUntil(
              async () =>
                (await h.describe()).runId !== firstRun && (await monitorHeartbeat(h)) !== undefined ? true : undefined,
              { timeoutMs: WAIT_MS, what: "the new run's monitor" },
            );
            const next = await continuedWithNewSize(env.client, h.workflowId, firstRun);
            const history = await first.fetchHistory();
            assert.ok(
              !(history.events ?? []).some((x) => x.activityTaskCancelRequestedEventAttributes),
              'the resize is applied at once, without a monitor started only to be cancelled',
            );
            await Worker.runReplayHistory({ workflowBundle: e.bundle }, history, h.workflowId);
            await next.executeUpdate(proxyDeleteUpdate);
            assert.equal((await withTimeout(next.result(), WAIT_MS, 'the delete')).state, 'Deleted');
          } finally {
            for (const x of started) await x.terminate('test over').catch(() => undefined);
          }
        });
      } finally {
        activityWorker.shutdown();
        await activitiesDone.catch(() => undefined);
        await e.close();
      }
    },
  );

  it(
    'the older poll loop: a resize asked during the poll that continues as new is applied, then continued',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const f = new Fakes(e);
      f.resize = () => ({ changed: true });
      const gate = new Gate();
      // The second poll (the one that continues as new) is held in its probe.
      f.probe = async (_input, n) => {
        if (n === 1) await held(gate);
        return { ok: true, latencyMs: 12 };
      };
      const started: WorkflowHandle[] = [];
      try {
        await withWorker(
          e,
          f.activities(),
          async (tq) => {
            f.taskQueue = tq;
            const { handle: h } = await startProxy(e, tq, started, { continueAsNewAfterPolls: 2 });
            const firstRun = h.firstExecutionRunId;
            await statusWhen(h, (s) => s.state === 'Running', 'Running');
            await idle(h, 'the first health poll');
            await e.env.sleep(INTERVAL_MS);
            await pollUntil(() => Promise.resolve(f.count('probeProxy') === 2 ? true : undefined), {
              timeoutMs: WAIT_MS,
              what: 'the second poll in its probe',
            });
            const resized = h.executeUpdate(proxyResizeUpdate, { args: [{ memoryMiB: 1024 }] });
            resized.catch(() => undefined);
            await pollUntil(
              async () =>
                (await events(h)).some((x) => x.workflowExecutionUpdateAcceptedEventAttributes) ? true : undefined,
              { timeoutMs: WAIT_MS, what: 'the resize update accepted' },
            );
            gate.open();
            const s = await withTimeout(
              resized,
              WAIT_MS,
              'the resize update asked during the poll that continues as new (the loop waits for the handler, the handler for the loop)',
            );
            assert.equal(s.vm.memoryMiB, 1024);
            await continuedWithNewSize(e.env.client, h.workflowId, firstRun);
          },
          started,
        );
      } finally {
        gate.open();
      }
    },
  );
});
