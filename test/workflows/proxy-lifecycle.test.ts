/**
 * The proxy lifecycle on the time-skipping test server with fake activities: placement and the
 * capacity wait, image join, create and boot, failures with compensation, bad input, and a VM
 * that disappears under a Running proxy.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { ProxySpecError, toFailure } from '../../activities/errors.ts';
import type { PlacedProxy } from '../../activities/proxy.ts';
import { InsufficientCapacity } from '../../lib/kvm2/errors.ts';
import { imageWorkflowId } from '../../contracts/image.ts';
import type { ImageResult } from '../../contracts/image.ts';
import type { ProxyOutcome, ProxyStatus, VmReading } from '../../contracts/proxy.ts';
import {
  BASE,
  created,
  ENTRY,
  Fakes,
  Gate,
  TEST_TIMEOUT_MS,
  conditionsOf,
  failure,
  failureOf,
  fullSurvey,
  h1Survey,
  held,
  idle,
  resolvedProxy,
  roomySurvey,
  searchAttributes,
  skipUntil,
  startEnv,
  status,
  statusWhen,
  step,
  upsertedStates,
  withProxy,
  workflowTaskFailures,
} from '../support/workflow-harness.ts';
import type { ensureImageWorkflow } from '../../workflows/image.ts';
import type { Env } from '../support/workflow-harness.ts';
import { withTimeout } from '../support/temporal.ts';

let e: Env;
before(async () => {
  e = await startEnv();
});
after(async () => {
  await e?.close();
});

const opts = { timeout: TEST_TIMEOUT_MS };
const RUNNING: VmReading = { state: 'Running', ip: '10.0.0.5', source: 'lease' };
const capacityError = (): Error => toFailure(new InsufficientCapacity('default', 2 * 1024 ** 3, 1024 ** 2));
const waitingForCapacity = (s: ProxyStatus): boolean => s.state === 'WaitingForCapacity';
/** Consecutive duplicates removed: the states as a client watching the search attribute saw them. */
const distinct = (xs: string[]): string[] => xs.filter((x, i) => i === 0 || xs[i - 1] !== x);

void describe('proxy lifecycle: provisioning', () => {
  void test('happy path: resolve → survey → image → create → Booting → Running; delete → Deleted', opts, async () => {
    const f = new Fakes(e);
    const imageGate = new Gate();
    const bootGate = new Gate();
    f.ensureBase = async () => {
      await held(imageGate);
      return BASE;
    };
    f.read = async (_, n) => {
      if (n === 0) await held(bootGate);
      return RUNNING;
    };
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

      const booting = await statusWhen(h, (s) => s.state === 'Booting', 'Booting');
      assert.equal(booting.image, undefined, 'image progress is cleared once the image is ready');
      assert.equal(booting.conditions.VmRunning.status, 'Unknown');
      bootGate.open();

      await statusWhen(h, (s) => s.state === 'Running', 'Running');
      await idle(h, 'first health poll');
      let s = await status(h);
      assert.equal(s.host, 'h2');
      assert.equal(s.ip, '10.0.0.5');
      assert.equal(s.conditions.VmRunning.status, 'True');
      assert.equal(s.conditions.AddressAssigned.status, 'True');
      assert.equal(s.health.consecutiveOk, 1);
      assert.equal(s.conditions.Healthy.status, 'Unknown', 'one passing probe of healthyAfter=2');
      assert.ok(s.runningSince);
      assert.deepEqual(await searchAttributes(h), {
        ProxyState: 'Running',
        ProxyHost: 'h2',
        ProviderEntry: ENTRY,
        ProxyHealthy: false,
      });
      s = await step(e, h, 'second health poll');
      assert.equal(s.conditions.Healthy.status, 'True');
      assert.equal((await searchAttributes(h))['ProxyHealthy'], true);

      const accepted = await h.executeUpdate<{ accepted: true; fromState: string }, []>('delete');
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
      assert.deepEqual(distinct(f.sequence()).slice(0, 7), [
        'resolveProxy',
        'surveyHosts',
        'findBaseImage',
        'joinImage',
        'ensureBaseImage',
        'createProxyVm',
        'readProxyVm',
      ]);
      assert.equal(f.sequence().at(-1), 'deleteProxyVm');

      const end = await status(h);
      assert.equal(end.state, 'Deleted');
      assert.equal(end.ip, undefined);
      assert.ok(end.deletedAt);
      for (const c of conditionsOf(end)) assert.equal(c.status, 'False');
      assert.deepEqual(distinct(await upsertedStates(h)), [
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
    });
  });

  void test('a base already in the pool: used at once, no image workflow joined', opts, async () => {
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

  void test(
    'capacity wait and its exit: no pool space → WaitingForCapacity; space appears → Running by itself',
    opts,
    async () => {
      const f = new Fakes(e);
      f.survey = (_, n) => (n < 2 ? fullSurvey() : roomySurvey());
      await withProxy(e, f, async ({ handle: h }) => {
        const waiting = await statusWhen(h, (s) => s.state === 'WaitingForCapacity', 'WaitingForCapacity');
        assert.match(waiting.reason ?? '', /no host has \d+ bytes free in its pool/);
        assert.match(waiting.reason ?? '', /h1: 10485760 bytes free; h2: 20971520 bytes free/);
        assert.equal(waiting.host, undefined);
        assert.equal((await searchAttributes(h))['ProxyState'], 'WaitingForCapacity');
        assert.equal(f.count('createProxyVm'), 0);

        // Nothing but time: the durable timer re-checks (30 s, then 60 s) and leaves the wait itself.
        await idle(h, 'the first backoff timer', waitingForCapacity);
        await e.env.sleep(30_000);
        await pollUntilCount(f, 'surveyHosts', 2);
        await idle(h, 'the second backoff timer', waitingForCapacity);
        assert.equal((await status(h)).state, 'WaitingForCapacity');
        await e.env.sleep(60_000);
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running after space appeared');
        assert.equal(running.host, 'h2');
        assert.equal(running.reason, undefined);
        const [s0, s1, s2] = f.calls.filter((c) => c.activity === 'surveyHosts');
        assert.equal(f.count('surveyHosts'), 3);
        assert.ok(s1!.scheduledMs - s0!.scheduledMs >= 30_000, 'first backoff is 30 s of workflow time');
        assert.ok(s1!.scheduledMs - s0!.scheduledMs < 60_000);
        assert.ok(s2!.scheduledMs - s1!.scheduledMs >= 60_000, 'second backoff doubles to 60 s');
        assert.deepEqual(distinct(await upsertedStates(h)).slice(0, 5), [
          'Pending',
          'WaitingForCapacity',
          'Provisioning',
          'Booting',
          'Running',
        ]);
      });
    },
  );

  void test(
    'create fails with KVM2_INSUFFICIENT_CAPACITY → compensation → WaitingForCapacity → later Running',
    opts,
    async () => {
      const f = new Fakes(e);
      let poolFull = true;
      f.create = (input) => {
        if (poolFull) throw capacityError();
        return created(input);
      };
      await withProxy(e, f, async ({ handle: h }) => {
        // The activity preset may retry the Transient capacity error first: skip that time.
        const waiting = await skipUntil(
          e,
          async () => {
            const s = await status(h);
            return s.state === 'WaitingForCapacity' ? s : undefined;
          },
          'WaitingForCapacity after the failed create',
          5_000,
        );
        assert.match(waiting.reason ?? '', /has 1048576 bytes available; 2147483648 are needed/);
        assert.equal(waiting.host, undefined, 'the host is released for a new placement');
        assert.equal(waiting.lastError?.code, 'KVM2_INSUFFICIENT_CAPACITY');
        assert.equal(waiting.lastError?.kind, 'Transient');
        const deletes = f.of<PlacedProxy>('deleteProxyVm');
        assert.equal(deletes.length, 1, 'the failed create was compensated');
        assert.equal(deletes[0]!.host, 'h2');
        const seq = f.sequence();
        assert.ok(seq.lastIndexOf('createProxyVm') < seq.indexOf('deleteProxyVm'));

        poolFull = false;
        await idle(h, 'the capacity backoff timer', waitingForCapacity);
        await e.env.sleep(30_000);
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running after the wait');
        assert.equal(running.host, 'h2');
        assert.equal(f.count('surveyHosts'), 2, 'placed again after the wait');
        assert.equal(f.count('deleteProxyVm'), 1);
        assert.deepEqual(
          f.of<PlacedProxy>('createProxyVm').map((c) => c.host),
          f.of<PlacedProxy>('createProxyVm').map(() => 'h2'),
        );
      });
    },
  );

  void test('a capacity failure of createProxyVm is not retried: the wait starts after one attempt', opts, async () => {
    const f = new Fakes(e);
    f.create = () => {
      throw capacityError();
    };
    await withProxy(e, f, async ({ handle: h }) => {
      await skipUntil(
        e,
        async () => ((await status(h)).state === 'WaitingForCapacity' ? true : undefined),
        'WaitingForCapacity',
        5_000,
      );
      const first = f.calls.find((c) => c.activity === 'deleteProxyVm');
      const attempts = f.calls.filter(
        (c) => c.activity === 'createProxyVm' && (!first || c.scheduledMs <= first.scheduledMs),
      );
      assert.equal(
        attempts.length,
        1,
        `createProxyVm was attempted ${attempts.length} times (attempts ${attempts.map((c) => c.attempt).join(',')}) ` +
          'before the proxy showed WaitingForCapacity; the state said Provisioning meanwhile',
      );
    });
  });

  void test(
    'boot timeout: the VM never runs → Failed with BOOT_TIMEOUT after bootMs; compensation ran',
    opts,
    async () => {
      const f = new Fakes(e);
      const bootMs = 20_000;
      f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs } });
      f.read = () => ({ state: 'Provisioning' });
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'BOOT_TIMEOUT');
        assert.equal(err.cause.nonRetryable, true);
        const outcome = err.cause.details?.[0] as ProxyOutcome;
        assert.equal(outcome.state, 'Failed');
        assert.equal(outcome.host, 'h2');
        assert.match(outcome.reason ?? '', /did not run within bootMs \(20000 ms\)/);

        const s = await status(h);
        assert.equal(s.state, 'Failed');
        assert.equal(s.lastError?.code, 'BOOT_TIMEOUT');
        assert.deepEqual(s.consoleTail, ['[  OK  ] Reached target Cloud-init', 'login:'], "the console's last lines");
        const deletes = f.of<PlacedProxy>('deleteProxyVm');
        assert.equal(deletes.length, 1, 'compensation deleted what the create made');
        assert.equal(deletes[0]!.host, 'h2');
        const createdAt = f.calls.find((c) => c.activity === 'createProxyVm')!.scheduledMs;
        const lastRead = f.calls.filter((c) => c.activity === 'readProxyVm').at(-1)!.scheduledMs;
        assert.ok(lastRead - createdAt >= bootMs, `gave up ${lastRead - createdAt} ms after create, before bootMs`);
        assert.ok(lastRead - createdAt < bootMs + 10_000, `gave up ${lastRead - createdAt} ms after create`);
        assert.equal((await searchAttributes(h))['ProxyState'], 'Failed');
      });
    },
  );

  void test(
    'boot timeout: Running but never an address → Failed with BOOT_TIMEOUT after bootMs; compensation ran',
    opts,
    async () => {
      const f = new Fakes(e);
      const bootMs = 60_000;
      const intervalMs = 10_000;
      f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs }, health: { intervalMs } });
      f.read = () => ({ state: 'Running' });
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'BOOT_TIMEOUT');
        assert.match(err.cause.message, /no address was read within bootMs \(60000 ms\)/);
        const s = await status(h);
        assert.equal(s.state, 'Failed');
        assert.equal(s.ip, undefined);
        assert.equal(s.conditions.AddressAssigned.status, 'False');
        assert.equal(f.count('probeProxy'), 0, 'nothing to probe without an address');
        assert.equal(f.of<PlacedProxy>('deleteProxyVm').length, 1);
        assert.equal(f.of<PlacedProxy>('deleteProxyVm')[0]!.host, 'h2');
        const createdAt = f.calls.find((c) => c.activity === 'createProxyVm')!.scheduledMs;
        const lastRead = f.calls.filter((c) => c.activity === 'readProxyVm').at(-1)!.scheduledMs;
        assert.ok(lastRead - createdAt > bootMs, `gave up ${lastRead - createdAt} ms after create, before bootMs`);
        assert.ok(
          lastRead - createdAt <= bootMs + intervalMs + 5_000,
          `gave up ${lastRead - createdAt} ms after create`,
        );
      });
    },
  );

  void test(
    'boot timeout whose console read fails: compensation still runs, the failure stays BOOT_TIMEOUT',
    opts,
    async () => {
      const f = new Fakes(e);
      f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs: 20_000 } });
      f.read = () => ({ state: 'Provisioning' });
      // PROBE_ACTIVITY allows one attempt: a worker restart during the read is an activity failure.
      f.consoleTail = () => {
        throw failure('UNCLASSIFIED', 'Transient', 'activity StartToClose timeout');
      };
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.equal(
          f.count('deleteProxyVm'),
          1,
          `compensation did not run: the VM is left behind (the workflow ended with ${String(err.cause)})`,
        );
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'BOOT_TIMEOUT');
      });
    },
  );

  void test(
    'bad input: resolveProxy fails with PROXY_SPEC_INVALID naming imageKey → Failed at once, nothing created',
    opts,
    async () => {
      const f = new Fakes(e);
      f.resolve = () => {
        throw toFailure(new ProxySpecError('imageKey', 'entry e1 has no image "nope" (known: img)'));
      };
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'PROXY_SPEC_INVALID');
        assert.equal(err.cause.nonRetryable, true);
        assert.match(err.cause.message, /imageKey: entry e1 has no image "nope"/);
        assert.deepEqual(f.sequence(), ['resolveProxy'], 'one attempt, then nothing: no survey, create or delete');
        const s = await status(h);
        assert.equal(s.state, 'Failed');
        assert.equal(s.host, undefined);
        assert.deepEqual(
          { kind: s.lastError?.kind, code: s.lastError?.code },
          { kind: 'Permanent', code: 'PROXY_SPEC_INVALID' },
        );
        assert.equal((await searchAttributes(h))['ProxyState'], 'Failed');
      });
    },
  );
});

void describe('proxy lifecycle: a VM that disappears under a Running proxy', () => {
  void test('it is recreated on the same host, recreations counted; after maxRecreations → Failed', opts, async () => {
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

  void test(
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

async function pollUntilCount(f: Fakes, activity: string, n: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (f.count(activity) < n) {
    if (Date.now() > deadline) throw new Error(`${activity} was not called ${n} times`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
