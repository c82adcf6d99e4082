/**
 * The ensure-image workflow on the time-skipping test server with fake activities: upload progress
 * signalled to it shows in its current details (what the Web UI shows) and its status query; a
 * ready base that the upload activity already broadcast to its waiters (`toldWaiters`) is not
 * signalled to them again by the workflow, and a waiter the activity did not reach still is.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { imageWorkflowId } from '../../contracts/image.ts';
import type { EnsuredBaseTold, ImageProgressSignal } from '../../contracts/image.ts';
import { PROXY_WORKFLOW_TYPE } from '../../contracts/proxy.ts';
import {
  imageJoinSignal,
  imageLeaveSignal,
  imageProgressSignal,
  imageReadySignal,
  imageStatusQuery,
} from '../../contracts/messages.ts';
import { imageWaiters } from '../../client/images.ts';
import {
  BASE,
  ENTRY,
  events,
  Fakes,
  fileEnv,
  Gate,
  held,
  proxyId,
  statusWhen,
  TEST_TIMEOUT_MS,
  withProxy,
} from '../support/workflow-harness.ts';
import { pollUntil } from '../support/temporal.ts';

const e = fileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };

/** The run's current details, as the Web UI reads them (the SDK's built-in metadata query). */
async function currentDetails(h: WorkflowHandle): Promise<string> {
  const meta = await h.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  return meta.currentDetails ?? '';
}

async function signalsSent(h: WorkflowHandle): Promise<number> {
  return (await events(h)).filter((ev) => ev.signalExternalWorkflowExecutionInitiatedEventAttributes != null).length;
}

describe('ensure-image workflow: progress and the ready broadcast', () => {
  it('progress signalled to the image workflow shows in its current details and status query', opts, async () => {
    const f = new Fakes(e);
    const gate = new Gate();
    f.ensureBase = async () => {
      await held(gate);
      return BASE;
    };
    await withProxy(e, f, async ({ handle, imageKey }) => {
      const image = e.env.client.workflow.getHandle(imageWorkflowId('h2', ENTRY, imageKey));
      await statusWhen(handle, (s) => s.state === 'Provisioning' && f.count('ensureBaseImage') === 1, 'uploading');
      assert.match(await currentDetails(image), /1 waiting: fetching$/);
      const p: ImageProgressSignal = {
        workflowId: image.workflowId,
        bytes: 3 * 1048576,
        totalBytes: 12 * 1048576,
        bytesPerSecond: 1048576,
        at: '2026-12-01T10:00:00.000Z',
      };
      await image.signal(imageProgressSignal, p);
      const details = await pollUntil(
        async () => {
          const d = await currentDetails(image);
          return d.includes('uploaded') ? d : undefined;
        },
        { timeoutMs: 15_000, intervalMs: 50, what: 'progress in the current details' },
      );
      assert.match(details, /uploaded 3\.0 of 12\.0 MiB \(25 %\) at 1\.0 MiB\/s, as of 2026-12-01T10:00:00\.000Z$/);
      assert.deepEqual((await image.query(imageStatusQuery)).progress, p);
      gate.open();
      await statusWhen(handle, (s) => s.state === 'Running', 'Running');
      assert.match(await currentDetails(image), /: ready \(/);
    });
  });

  it('waiters the upload activity told are not signalled again; one it did not reach is', opts, async () => {
    const f = new Fakes(e);
    const gate = new Gate();
    let firstName = '';
    f.ensureBase = async (input): Promise<EnsuredBaseTold> => {
      await held(gate);
      // As the real activity: the ready base straight to the waiters it reached (here, the first).
      const result = { ok: true as const, base: BASE, workflowId: input.workflowId };
      await e.env.client.workflow.getHandle(proxyId(firstName)).signal(imageReadySignal, result);
      return { ...BASE, toldWaiters: [proxyId(firstName)] };
    };
    await withProxy(e, f, async ({ handle, name, imageKey, taskQueue, started }) => {
      firstName = name;
      const image = e.env.client.workflow.getHandle(imageWorkflowId('h2', ENTRY, imageKey));
      await statusWhen(handle, (s) => s.state === 'Provisioning' && f.count('ensureBaseImage') === 1, 'uploading');
      // A second proxy on the same image key joins the same image workflow on h2.
      const second = `${name}-b`;
      const other = await e.env.client.workflow.start(PROXY_WORKFLOW_TYPE, {
        taskQueue,
        workflowId: proxyId(second),
        args: [{ name: second, entry: ENTRY, imageKey }],
      });
      started.push(other);
      await pollUntil(async () => ((await image.query(imageStatusQuery)).waiters.length === 2 ? true : undefined), {
        timeoutMs: 15_000,
        intervalMs: 50,
        what: 'two waiters',
      });
      gate.open();
      await statusWhen(handle, (s) => s.state === 'Running', 'the first proxy Running');
      await statusWhen(other, (s) => s.state === 'Running', 'the second proxy Running');
      await image.result();
      assert.equal(await signalsSent(image), 1, 'the workflow signalled only the waiter the activity had not told');
    });
  });

  it('the waiters are read from the history (joins less leaves), as the ready broadcast reads them', opts, async () => {
    const f = new Fakes(e);
    const gate = new Gate();
    f.ensureBase = async () => {
      await held(gate);
      return BASE;
    };
    await withProxy(e, f, async ({ handle, name, imageKey }) => {
      const id = imageWorkflowId('h2', ENTRY, imageKey);
      await statusWhen(handle, (s) => s.state === 'Provisioning' && f.count('ensureBaseImage') === 1, 'uploading');
      assert.deepEqual(await imageWaiters(e.env.client, id, 5_000), [proxyId(name)]);
      await e.env.client.workflow.getHandle(id).signal(imageJoinSignal, { waiter: 'proxy/e1/other' });
      await e.env.client.workflow.getHandle(id).signal(imageLeaveSignal, { waiter: proxyId(name) });
      // Signals that arrive during a workflow task enter the history when it completes: bounded wait.
      await pollUntil(
        async () => {
          const w = await imageWaiters(e.env.client, id, 5_000);
          return w.length === 1 && w[0] === 'proxy/e1/other' ? true : undefined;
        },
        { timeoutMs: 15_000, intervalMs: 50, what: 'the join and the leave in the history' },
      );
      gate.open();
    });
  });
});
