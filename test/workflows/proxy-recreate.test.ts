/**
 * A VM that disappears under a Running proxy, on the time-skipping test server with fake
 * activities: recreated on the same host and counted, Failed after maxRecreations, and a
 * recreation that meets a full pool waits on its host without failing the workflow task.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { PlacedProxy } from '../../activities/proxy.ts';
import type { VmReading } from '../../contracts/proxy.ts';
import { withTimeout } from '../support/temporal.ts';
import {
  capacityError,
  created,
  failureOf,
  Fakes,
  h1Survey,
  idle,
  roomySurvey,
  skipUntil,
  fileEnv,
  status,
  statusWhen,
  step,
  TEST_TIMEOUT_MS,
  withProxy,
  workflowTaskFailures,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };
const RUNNING: VmReading = { state: 'Running', ip: '10.0.0.5', source: 'lease' };

describe('proxy recreation: a VM that disappears under a Running proxy', () => {
  it('it is recreated on the same host, recreations counted; after maxRecreations → Failed', opts, async () => {
    const f = new Fakes(e);
    let reading: VmReading = RUNNING;
    // After the first poll the survey prefers h1: a recreation must not move the proxy.
    f.survey = (_, n) => (n === 0 ? roomySurvey() : h1Survey());
    f.read = (_, n) => {
      const r = reading;
      reading = RUNNING; // one bad reading per step: the recreated VM runs
      return n === 0 ? RUNNING : r;
    };
    await withProxy(e, f, async ({ handle: h }) => {
      await statusWhen(h, (s) => s.state === 'Running', 'Running');
      await idle(h, 'first poll');

      reading = { state: 'Missing' };
      let s = await step(e, h, 'the poll that finds the VM missing');
      assert.equal(s.state, 'Running');
      assert.equal(s.recreations, 1);
      assert.equal(s.host, 'h2');
      assert.equal(s.ip, '10.0.0.5');
      assert.equal(s.conditions.VmRunning.status, 'True');
      assert.equal(f.count('createProxyVm'), 2);

      reading = { state: 'Failed' };
      s = await step(e, h, 'the poll that finds the VM failed');
      assert.equal(s.recreations, 2);
      assert.equal(s.state, 'Running');

      reading = { state: 'Stopped' };
      await e.env.sleep(60 * 60 * 1000);
      const err = await failureOf(h.result());
      assert.ok(err.cause instanceof ApplicationFailure);
      assert.equal(err.cause.type, 'VM_LOST');
      assert.match(err.cause.message, /maxRecreations is 2/);
      s = await status(h);
      assert.equal(s.state, 'Failed');
      assert.equal(s.recreations, 2);

      assert.deepEqual(
        f.of<PlacedProxy>('createProxyVm').map((c) => c.host),
        ['h2', 'h2', 'h2'],
        'every create on the placed host',
      );
      assert.equal(f.count('surveyHosts'), 1, 'no new placement for a recreation');
      assert.deepEqual(
        f.of<PlacedProxy>('deleteProxyVm').map((c) => c.host),
        ['h2'],
        'compensation after the last loss',
      );
    });
  });

  it(
    'a recreation that meets a full pool waits and retries on its host; the workflow task never fails',
    opts,
    async () => {
      const f = new Fakes(e);
      let reading: VmReading = RUNNING;
      f.read = () => reading;
      f.create = (input, n) => {
        if (n > 0) throw capacityError();
        return created(input);
      };
      await withProxy(e, f, async ({ handle: h }) => {
        await statusWhen(h, (s) => s.state === 'Running', 'Running');
        await idle(h, 'first poll');
        reading = { state: 'Missing' };
        await e.env.sleep(60 * 60 * 1000);
        // Let the create's retries (if any) run out, then look at what became of the workflow.
        const outcome = await skipUntil(
          e,
          async () => {
            const taskFailures = await workflowTaskFailures(h);
            if (taskFailures.length > 0) return { taskFailures };
            // A query of a workflow whose task fails does not return: bound it.
            const s = await withTimeout(status(h), 2_000, 'status').catch(() => undefined);
            if (s?.state === 'WaitingForCapacity' || s?.state === 'Failed') return { state: s.state, taskFailures };
            return undefined;
          },
          'the recreation to give up or wait',
          10_000,
        );
        assert.deepEqual(
          outcome.taskFailures,
          [],
          'a capacity error during a recreation must not fail the workflow task (the workflow is stuck, retrying it)',
        );
      });
    },
  );
});
