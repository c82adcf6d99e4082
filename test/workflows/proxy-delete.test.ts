/**
 * Deleting a proxy (the `delete` update) in every state, and cancelling its workflow, on the
 * time-skipping test server with fake activities: the workflow ends Deleted (or Cancelled), the
 * work in flight is cancelled, and cleanup ran: the image workflow is left when the proxy waited
 * on it, the VM deleted when something may have been created.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CancelledFailure } from '@temporalio/common';
import type { PlacedProxy } from '../../activities/proxy.ts';
import { imageWorkflowId } from '../../contracts/image.ts';
import { imageStatusQuery, proxyDeleteUpdate } from '../../contracts/messages.ts';
import type { ImageResult } from '../../contracts/image.ts';
import type { ProxyOutcome, ProxyState, ProxyStatus } from '../../contracts/proxy.ts';
import {
  ENTRY,
  created,
  Fakes,
  Gate,
  TEST_TIMEOUT_MS,
  conditionsOf,
  WAIT_MS,
  failureOf,
  fullSurvey,
  held,
  idle,
  searchAttributes,
  fileEnv,
  status,
  statusWhen,
  upsertedStates,
  withProxy,
} from '../support/workflow-harness.ts';
import type { ensureImageWorkflow } from '../../workflows/image.ts';
import type { Started } from '../support/workflow-harness.ts';
import { pollUntil } from '../support/temporal.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };

/**
 * The image workflow cancels its upload without waiting for it (TRY_CANCEL): the activity hears
 * of it on its next heartbeat, shortly after the workflow ended.
 */
async function seen(flag: () => boolean, what: string): Promise<void> {
  await pollUntil(() => Promise.resolve(flag() ? true : undefined), { timeoutMs: WAIT_MS, intervalMs: 20, what });
}

/** Sends `delete`, checks the state it was accepted in, and waits for the Deleted outcome. */
async function deleteProxy(
  h: Started['handle'],
  from: ProxyState,
): Promise<{ outcome: ProxyOutcome; end: ProxyStatus }> {
  const accepted = await h.executeUpdate(proxyDeleteUpdate);
  assert.deepEqual(accepted, { accepted: true, fromState: from });
  const outcome = await h.result();
  assert.equal(outcome.state, 'Deleted');
  const end = await status(h);
  assert.equal(end.state, 'Deleted');
  assert.ok(end.deletedAt);
  assert.equal(end.ip, undefined);
  assert.equal((await searchAttributes(h))['ProxyState'], 'Deleted');
  const states = await upsertedStates(h);
  assert.deepEqual(states.slice(-2), ['Deleting', 'Deleted']);
  return { outcome, end };
}

describe('delete during every state', () => {
  it('Pending (resolve in flight): the resolve is cancelled; nothing to delete', opts, async () => {
    const f = new Fakes(e);
    const gate = new Gate();
    let cancelled = false;
    f.resolve = async () => {
      await held(gate, () => (cancelled = true));
      throw new Error('unreachable: the gate never opens');
    };
    await withProxy(e, f, async ({ handle: h }) => {
      await statusWhen(h, (s) => s.state === 'Pending' && f.count('resolveProxy') === 1, 'Pending');
      const { outcome } = await deleteProxy(h, 'Pending');
      assert.equal(outcome.deleted, undefined);
      assert.ok(cancelled, 'the resolve activity saw its cancellation');
      assert.deepEqual(f.sequence(), ['resolveProxy']);
    });
  });

  it('WaitingForCapacity: ends Deleted at once; no create, no delete', opts, async () => {
    const f = new Fakes(e);
    f.survey = () => fullSurvey();
    await withProxy(e, f, async ({ handle: h }) => {
      await idle(h, 'the capacity backoff', (s) => s.state === 'WaitingForCapacity');
      const { outcome } = await deleteProxy(h, 'WaitingForCapacity');
      assert.equal(outcome.deleted, undefined);
      assert.equal(f.count('createProxyVm'), 0);
      assert.equal(f.count('deleteProxyVm'), 0);
      assert.equal(f.count('joinImage'), 0);
    });
  });

  it(
    'Provisioning, waiting on the image: the proxy leaves the image workflow, whose upload is aborted',
    opts,
    async () => {
      const f = new Fakes(e);
      const gate = new Gate();
      let uploadCancelled = false;
      f.ensureBase = async () => {
        await held(gate, () => (uploadCancelled = true));
        throw new Error('unreachable: the gate never opens');
      };
      await withProxy(e, f, async ({ handle: h, imageKey }) => {
        const imageId = imageWorkflowId('h2', ENTRY, imageKey);
        const prov = await statusWhen(
          h,
          (s) => s.state === 'Provisioning' && f.count('ensureBaseImage') === 1,
          'Provisioning, waiting on the image',
        );
        assert.equal(prov.image?.workflowId, imageId);
        const image = e.env.client.workflow.getHandle<typeof ensureImageWorkflow>(imageId);
        assert.deepEqual((await image.query(imageStatusQuery)).waiters, [h.workflowId]);

        await deleteProxy(h, 'Provisioning');
        assert.equal(f.count('deleteProxyVm'), 0, 'nothing was created');
        const result: ImageResult = await image.result();
        assert.deepEqual(result, {
          ok: false,
          kind: 'Transient',
          code: 'IMAGE_ABANDONED',
          message: 'every waiter left',
        });
        assert.deepEqual((await image.query(imageStatusQuery)).waiters, []);
        await seen(() => uploadCancelled, 'the upload activity to see its cancellation');
      });
    },
  );

  it('Provisioning, create in flight: the create is cancelled, then the VM is deleted', opts, async () => {
    const f = new Fakes(e);
    const gate = new Gate();
    let createCancelled = false;
    f.create = async () => {
      await held(gate, () => (createCancelled = true));
      throw new Error('unreachable: the gate never opens');
    };
    await withProxy(e, f, async ({ handle: h, name }) => {
      await statusWhen(h, (s) => s.state === 'Provisioning' && f.count('createProxyVm') === 1, 'create in flight');
      const { outcome } = await deleteProxy(h, 'Provisioning');
      assert.ok(createCancelled, 'the create activity saw its cancellation');
      const deletes = f.of<PlacedProxy>('deleteProxyVm');
      assert.deepEqual(
        deletes.map((d) => [d.host, d.proxy.name]),
        [['h2', name]],
      );
      assert.equal(outcome.host, 'h2');
      assert.ok(outcome.deleted);
    });
  });

  it('Booting: the VM is deleted', opts, async () => {
    const f = new Fakes(e);
    // The create found the domain there already, so the workflow polls it while it boots.
    f.create = (input) => ({ ...created(input), started: false });
    f.read = () => ({ state: 'Provisioning' });
    await withProxy(e, f, async ({ handle: h }) => {
      await idle(h, 'a boot poll', (s) => s.state === 'Booting');
      await deleteProxy(h, 'Booting');
      assert.deepEqual(
        f.of<PlacedProxy>('deleteProxyVm').map((d) => d.host),
        ['h2'],
      );
    });
  });

  it('Running: the VM is deleted', opts, async () => {
    const f = new Fakes(e);
    await withProxy(e, f, async ({ handle: h }) => {
      await idle(h, 'the health loop');
      const { end } = await deleteProxy(h, 'Running');
      for (const c of conditionsOf(end)) assert.equal(c.reason, 'Deleted');
      assert.deepEqual(
        f.of<PlacedProxy>('deleteProxyVm').map((d) => d.host),
        ['h2'],
      );
    });
  });
});

describe('workflow cancellation', () => {
  it('cancel mid-image-wait: ends Cancelled; the image workflow is left and its upload aborted', opts, async () => {
    const f = new Fakes(e);
    const gate = new Gate();
    let uploadCancelled = false;
    f.ensureBase = async () => {
      await held(gate, () => (uploadCancelled = true));
      throw new Error('unreachable: the gate never opens');
    };
    await withProxy(e, f, async ({ handle: h, imageKey }) => {
      await statusWhen(h, (s) => s.state === 'Provisioning' && f.count('ensureBaseImage') === 1, 'image wait');
      await h.cancel();
      const err = await failureOf(h.result());
      assert.ok(err.cause instanceof CancelledFailure, `ended with ${String(err.cause)}`);
      assert.equal((await h.describe()).status.name, 'CANCELLED');
      const image = e.env.client.workflow.getHandle<typeof ensureImageWorkflow>(imageWorkflowId('h2', ENTRY, imageKey));
      const result: ImageResult = await image.result();
      assert.equal(result.ok, false);
      assert.equal(!result.ok && result.code, 'IMAGE_ABANDONED');
      await seen(() => uploadCancelled, 'the upload activity to see its cancellation');
      assert.equal(f.count('deleteProxyVm'), 0, 'nothing was created');
      assert.equal((await status(h)).state, 'Deleted');
    });
  });

  it('cancel while Running: ends Cancelled after deleting the VM', opts, async () => {
    const f = new Fakes(e);
    await withProxy(e, f, async ({ handle: h }) => {
      await idle(h, 'the health loop');
      await h.cancel();
      const err = await failureOf(h.result());
      assert.ok(err.cause instanceof CancelledFailure);
      assert.deepEqual(
        f.of<PlacedProxy>('deleteProxyVm').map((d) => d.host),
        ['h2'],
      );
    });
  });
});
