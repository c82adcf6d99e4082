/**
 * Creating a proxy on the time-skipping test server with fake activities: resolve, placement,
 * the image (joined, or a base already in the pool), create and boot, the health loop's first
 * polls, and a delete at the end.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PlacedProxy } from '../../activities/proxy.ts';
import { imageWorkflowId } from '../../contracts/image.ts';
import type { ImageResult } from '../../contracts/image.ts';
import { proxyDeleteUpdate } from '../../contracts/messages.ts';
import type { ProxyOutcome, VmReading } from '../../contracts/proxy.ts';
import type { ensureImageWorkflow } from '../../workflows/image.ts';
import { PROXY_BASELINE_PATCH } from '../../workflows/retiring.ts';
import { patchIds } from '../support/temporal.ts';
import {
  BASE,
  conditionsOf,
  distinctStates,
  ENTRY,
  created,
  Fakes,
  Gate,
  held,
  idle,
  searchAttributes,
  fileEnv,
  status,
  statusWhen,
  step,
  TEST_TIMEOUT_MS,
  upsertedStates,
  withProxy,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };
const RUNNING: VmReading = { state: 'Running', ip: '10.0.0.5', source: 'lease' };

describe('proxy create', () => {
  it('happy path: resolve → survey → image → create → Running; delete → Deleted', opts, async () => {
    const f = new Fakes(e);
    const imageGate = new Gate();
    f.ensureBase = async () => {
      await held(imageGate);
      return BASE;
    };
    f.read = () => RUNNING;
    await withProxy(e, f, async ({ handle: h, name, imageKey }) => {
      const imageId = imageWorkflowId('h2', ENTRY, imageKey);

      // Provisioning on h2 (h1 is loaded), waiting on the image; progress shows.
      await statusWhen(h, (s) => s.state === 'Provisioning' && f.count('ensureBaseImage') === 1, 'Provisioning');
      await f.progress(imageId, 512, 1024);
      const prov = await statusWhen(h, (s) => s.image?.bytes === 512, 'image progress in the status');
      assert.equal(prov.host, 'h2');
      assert.deepEqual(prov.image, { workflowId: imageId, bytes: 512, totalBytes: 1024, bytesPerSecond: 1000 });
      assert.deepEqual((await searchAttributes(h))['ProxyState'], 'Provisioning');
      imageGate.open();

      // The create started the domain, so libvirt runs it: Running at once, no boot poll first.
      const running = await statusWhen(h, (s) => s.state === 'Running', 'Running');
      assert.equal(running.image, undefined, 'image progress is cleared once the image is ready');
      assert.equal(running.conditions.VmRunning.status, 'True');
      await idle(h, 'first health poll');
      let s = await status(h);
      assert.equal(s.host, 'h2');
      assert.equal(s.ip, '10.0.0.5');
      assert.equal(s.conditions.VmRunning.status, 'True');
      assert.equal(s.conditions.AddressAssigned.status, 'True');
      assert.equal(s.health.consecutiveOk, 1);
      assert.equal(s.conditions.Healthy.status, 'Unknown', 'one passing probe of healthyAfter=2');
      assert.ok(s.runningSince);
      const sa = await searchAttributes(h);
      assert.deepEqual(
        { state: sa['ProxyState'], host: sa['ProxyHost'], entry: sa['ProviderEntry'], healthy: sa['ProxyHealthy'] },
        { state: 'Running', host: 'h2', entry: ENTRY, healthy: false },
      );
      s = await step(e, h, 'second health poll');
      assert.equal(s.conditions.Healthy.status, 'True');
      assert.equal((await searchAttributes(h))['ProxyHealthy'], true);

      const accepted = await h.executeUpdate(proxyDeleteUpdate);
      assert.deepEqual(accepted, { accepted: true, fromState: 'Running' });
      const outcome: ProxyOutcome = await h.result();
      assert.equal(outcome.state, 'Deleted');
      assert.equal(outcome.host, 'h2');
      assert.deepEqual(outcome.deleted, { domain: 'deleted', overlay: 'deleted', seed: 'deleted' });

      const deletes = f.of<PlacedProxy>('deleteProxyVm');
      assert.equal(deletes.length, 1);
      assert.equal(deletes[0]!.host, 'h2');
      assert.equal(deletes[0]!.proxy.name, name);
      const creates = f.of<PlacedProxy & { base: unknown }>('createProxyVm');
      assert.equal(creates.length, 1);
      assert.equal(creates[0]!.host, 'h2');
      assert.deepEqual(creates[0]!.base, BASE);
      assert.deepEqual(distinctStates(f.sequence()).slice(0, 7), [
        'resolveProxy',
        'surveyHosts',
        'findBaseImage',
        'joinImage',
        'ensureBaseImage',
        'createProxyVm',
        'readProxyVm',
      ]);
      // The health loop's first poll (a read, then a probe) follows the create: no boot poll before it.
      const seq = f.sequence();
      const at = seq.indexOf('createProxyVm');
      assert.deepEqual(seq.slice(at, at + 3), ['createProxyVm', 'readProxyVm', 'probeProxy'], seq.join(', '));
      assert.equal(f.sequence().at(-1), 'deleteProxyVm');

      const end = await status(h);
      assert.equal(end.state, 'Deleted');
      assert.equal(end.ip, undefined);
      assert.ok(end.deletedAt);
      for (const c of conditionsOf(end)) assert.equal(c.status, 'False');
      assert.deepEqual(distinctStates(await upsertedStates(h)), [
        'Pending',
        'Provisioning',
        'Booting',
        'Running',
        'Deleting',
        'Deleted',
      ]);
      assert.equal((await searchAttributes(h))['ProxyState'], 'Deleted');
      const image = e.env.client.workflow.getHandle<typeof ensureImageWorkflow>(imageId);
      const imageResult: ImageResult = await image.result();
      assert.equal(imageResult.ok, true);

      // A new run asks no patch: its one marker is the retiring baseline's (workflows/retiring.ts),
      // with at most one TemporalChangeVersion upsert in its whole life.
      const history = await h.fetchHistory();
      assert.deepEqual(patchIds(history), [PROXY_BASELINE_PATCH]);
      const versionUpserts = (history.events ?? []).filter(
        (ev) =>
          ev.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.['TemporalChangeVersion'],
      );
      assert.ok(versionUpserts.length <= 1, `${versionUpserts.length} TemporalChangeVersion upserts`);
    });
  });

  it(
    'a create that found its domain already there polls until libvirt runs it (Booting in between)',
    opts,
    async () => {
      const f = new Fakes(e);
      const bootGate = new Gate();
      f.create = (input) => ({ ...created(input), started: false });
      f.read = async (_, n) => {
        if (n === 0) await held(bootGate);
        return RUNNING;
      };
      await withProxy(e, f, async ({ handle: h }) => {
        const booting = await statusWhen(h, (s) => s.state === 'Booting', 'Booting');
        assert.equal(booting.conditions.VmRunning.status, 'Unknown');
        bootGate.open();
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running');
        assert.equal(running.conditions.VmRunning.status, 'True');
        await idle(h, 'first health poll');
        const seq = f.sequence();
        const at = seq.indexOf('createProxyVm');
        // The boot poll, then the health loop's first poll (a read, then a probe).
        assert.deepEqual(
          seq.slice(at, at + 4),
          ['createProxyVm', 'readProxyVm', 'readProxyVm', 'probeProxy'],
          seq.join(', '),
        );
      });
    },
  );

  it('a base already in the pool: used at once, no image workflow joined', opts, async () => {
    const f = new Fakes(e);
    f.findBase = () => ({ ...BASE, cached: true });
    await withProxy(e, f, async ({ handle: h }) => {
      await idle(h, 'the health loop');
      assert.equal(f.count('joinImage'), 0);
      assert.equal(f.count('ensureBaseImage'), 0);
      const creates = f.of<PlacedProxy & { base: unknown }>('createProxyVm');
      assert.deepEqual(creates[0]?.base, { ...BASE, cached: true });
      assert.deepEqual(f.of('findBaseImage')[0], { entry: ENTRY, host: 'h2', key: (await status(h)).imageKey });
    });
  });

  it('a join that finds the base in the pool creates at once, without waiting for the signal', opts, async () => {
    // The late joiner: not in the pool at the first look, there when the join looks again (the
    // upload finished in between), while the image workflow has not told anyone yet.
    const f = new Fakes(e);
    const imageGate = new Gate();
    f.ensureBase = async () => {
      await held(imageGate);
      return BASE;
    };
    f.joinFinds = () => ({ ...BASE, cached: true });
    f.read = () => RUNNING;
    try {
      await withProxy(e, f, async ({ handle: h }) => {
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running');
        assert.equal(running.image, undefined);
        // The image workflow's upload is still held: nothing told the proxy but its own join.
        assert.equal(f.count('joinImage'), 1);
        const creates = f.of<PlacedProxy & { base: unknown }>('createProxyVm');
        assert.deepEqual(creates[0]?.base, { ...BASE, cached: true });
        // No timer for the wait in its history, and no patch asked.
        const history = await h.fetchHistory();
        const events = history.events ?? [];
        assert.deepEqual(patchIds(history), [PROXY_BASELINE_PATCH]);
        const createAt = events.findIndex(
          (ev) => ev.activityTaskScheduledEventAttributes?.activityType?.name === 'createProxyVm',
        );
        assert.equal(events.slice(0, createAt).filter((ev) => ev.timerStartedEventAttributes).length, 0);
        imageGate.open();
      });
    } finally {
      imageGate.open();
    }
  });
});
