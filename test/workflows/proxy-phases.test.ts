/**
 * The phases of a fresh proxy on the product path (the health monitor loop, a health target), in
 * its own history: the reads before the create (local activities), the image join, the create that
 * starts the domain, then at once the health monitor, which returns on Healthy. No timer and no
 * other activity stands between the create and the monitor, or between the monitor's Healthy
 * return and the status that publishes it: a change that adds a wait there fails this test. (Not
 * timed: the time each phase takes is measured by the benchmarks.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import type { ProbeOutcome } from '../../contracts/proxy.ts';
import { activityResults } from '../support/temporal.ts';
import {
  events,
  Fakes,
  fileEnv,
  monitorStep,
  monitorWaiting,
  startProxy,
  statusWhen,
  TEST_TIMEOUT_MS,
  withWorker,
} from '../support/workflow-harness.ts';

const e = fileEnv();
const OK: ProbeOutcome = { ok: true, latencyMs: 12 };

describe('a fresh proxy on the product path', () => {
  it(
    'reads, joins, creates, then monitors at once; Healthy published by the monitor return',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const f = new Fakes(e);
      f.probe = () => OK;
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          f.taskQueue = tq;
          const { handle: h } = await startProxy(e, tq, started, { healthLoop: 'monitor' });
          await statusWhen(h, (s) => s.state === 'Running', 'Running');
          await monitorWaiting(f, 0, 'the first health poll');
          await monitorStep(e, f, h, 'Healthy');
          await statusWhen(h, (s) => s.conditions.Healthy.status === 'True', 'Healthy');

          const history = await events(h);
          assert.deepEqual(
            activityResults({ events: history })
              .map((a) => [a.type, a.local])
              .slice(0, 6),
            [
              ['resolveProxy', true],
              ['surveyHosts', true],
              ['findBaseImage', true],
              ['joinImage', false],
              ['createProxyVm', false],
              ['monitorProxy', false],
            ],
          );
          const at = (pred: (ev: (typeof history)[number]) => boolean, what: string): number => {
            const i = history.findIndex(pred);
            assert.ok(i >= 0, what);
            return i;
          };
          const created = at(
            (ev) =>
              ev.activityTaskCompletedEventAttributes != null &&
              history.some(
                (s) =>
                  String(s.eventId) === String(ev.activityTaskCompletedEventAttributes!.scheduledEventId) &&
                  s.activityTaskScheduledEventAttributes?.activityType?.name === 'createProxyVm',
              ),
            'createProxyVm completed',
          );
          const monitor = at(
            (ev) => ev.activityTaskScheduledEventAttributes?.activityType?.name === 'monitorProxy',
            'monitorProxy scheduled',
          );
          const between = history.slice(created + 1, monitor);
          assert.deepEqual(
            between.filter((ev) => ev.timerStartedEventAttributes || ev.activityTaskScheduledEventAttributes),
            [],
            'nothing waits between the create and the monitor',
          );
          // The monitor returned (Healthy) and the next monitor started in the same workflow task.
          const returned = history.findIndex((ev, i) => i > monitor && ev.activityTaskCompletedEventAttributes != null);
          const next = history.findIndex(
            (ev, i) => i > returned && ev.activityTaskScheduledEventAttributes?.activityType?.name === 'monitorProxy',
          );
          assert.ok(returned > 0 && next > returned, 'the monitor returned and the next one started');
          assert.deepEqual(
            history.slice(returned + 1, next).filter((ev) => ev.timerStartedEventAttributes),
            [],
            'no timer between the Healthy return and the next monitor',
          );
        },
        started,
      );
    },
  );
});
