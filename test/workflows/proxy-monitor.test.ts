/**
 * The health monitor loop (workflows/proxy/monitor-loop.ts with activities/monitor.ts's loop over
 * fake reads and probes) on the time-skipping test server, one poll per skipped interval: quiet
 * polls add no history, the hysteresis and the H3 grace return only on their transitions, a
 * monitor lost with its worker resumes from its heartbeat, delete and resize cancel it, and the
 * checkpoint continues as new.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { freshProxyStatus, monitorHeartbeat } from '../../client/health.ts';
import { proxyDeleteUpdate, proxyResizeUpdate } from '../../contracts/messages.ts';
import type { ProbeOutcome, VmReading } from '../../contracts/proxy.ts';
import type { proxyLifecycle } from '../../workflows/proxy/index.ts';
import { pollUntil } from '../support/temporal.ts';
import {
  events,
  Fakes,
  fileEnv,
  Gate,
  monitorStep,
  monitorWaiting,
  resolvedProxy,
  searchAttributes,
  startProxy,
  status,
  statusWhen,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  failure,
  withWorker,
} from '../support/workflow-harness.ts';

const e = fileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };
const IP = '10.0.0.5';
const RUNNING: VmReading = { state: 'Running', ip: IP, source: 'lease' };
const NO_ADDRESS: VmReading = { state: 'Running' };
const OK: ProbeOutcome = { ok: true, latencyMs: 12 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'squid refused the CONNECT' };

/** Starts a proxy on the monitor loop and waits until its monitor waits after the first poll. */
async function running(f: Fakes, tq: string, started: WorkflowHandle[], extra = {}) {
  f.taskQueue = tq;
  const p = await startProxy(e, tq, started, { healthLoop: 'monitor', ...extra });
  await statusWhen(p.handle, (s) => s.state === 'Running', 'Running');
  await monitorWaiting(f, 0, 'the first health poll');
  return p;
}

/** Activities the run scheduled, by type, in order. */
async function scheduled(h: WorkflowHandle): Promise<string[]> {
  return (await events(h))
    .map((ev) => ev.activityTaskScheduledEventAttributes?.activityType?.name)
    .filter((n): n is string => n !== undefined && n !== null);
}

describe('proxy health monitor', () => {
  it('100 quiet healthy polls add no history events; the fresh status counts them', opts, async () => {
    const f = new Fakes(e);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started);
        // The second poll makes it Healthy (healthyAfter 2): a transition, recorded.
        let s = await monitorStep(e, f, h, 'poll 2');
        assert.equal(s.conditions.Healthy.status, 'True');
        await pollUntil(async () => ((await status(h)).conditions.Healthy.status === 'True' ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'the Healthy transition recorded',
        });
        const before = (await events(h)).length;
        for (let i = 0; i < 100; i++) s = await monitorStep(e, f, h, `quiet poll ${i + 1}`);
        const after = (await events(h)).length;
        assert.ok(after - before <= 5, `100 healthy polls added ${after - before} events (at most 5 expected)`);
        assert.equal(f.count('probeProxy'), 102);
        assert.equal(s.health.totalOk, 102, 'the fresh status (heartbeat details) counts every probe');
        assert.equal(s.health.consecutiveOk, 102);
        assert.equal((await status(h)).health.totalOk, 2, 'the query alone shows the last transition');
        const beat = await monitorHeartbeat(h);
        assert.ok(beat?.at, 'the server holds the last heartbeat time');
        assert.equal(f.count('monitorProxy'), 3, 'returns on the address read and on Healthy, not after');
      },
      started,
    );
  });

  it(
    'hysteresis both ways: Healthy changes only past it; the monitor also returns at the second failure in a row',
    opts,
    async () => {
      const f = new Fakes(e);
      let outcome: ProbeOutcome = OK;
      f.probe = () => outcome;
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const { handle: h } = await running(f, tq, started);
          let s = await freshProxyStatus(h);
          assert.equal(s.conditions.Healthy.status, 'Unknown', 'ok ×1: not yet healthy');
          s = await monitorStep(e, f, h, 'ok #2');
          assert.equal(s.conditions.Healthy.status, 'True', 'ok ×2: healthy');
          assert.equal((await searchAttributes(h))['ProxyHealthy'], true);
          outcome = REFUSED;
          s = await monitorStep(e, f, h, 'fail #1');
          assert.equal(s.conditions.Healthy.status, 'True', 'fail ×1: still healthy');
          assert.equal(s.health.consecutiveFailed, 1);
          s = await monitorStep(e, f, h, 'fail #2');
          assert.equal(s.conditions.Healthy.status, 'True', 'fail ×2: still healthy');
          assert.equal(s.health.consecutiveFailed, 2);
          // Two in a row: discovery's rule (contracts/health.ts probesFailing), heard of at once.
          await statusWhen(h, (x) => x.health.consecutiveFailed === 2, 'the second failure recorded');
          assert.equal(f.count('monitorProxy'), 4, 'a return at the second failure, none at the first');
          s = await monitorStep(e, f, h, 'fail #3');
          assert.equal(s.conditions.Healthy.status, 'False', 'fail ×3: unhealthy');
          assert.equal(s.conditions.Healthy.message, 'PROBE_REFUSED: squid refused the CONNECT');
          assert.equal((await status(h)).conditions.Healthy.status, 'False', 'recorded by the workflow');
          assert.equal((await searchAttributes(h))['ProxyHealthy'], false);
          assert.equal(s.state, 'Running');
          outcome = OK;
          s = await monitorStep(e, f, h, 'ok after failures #1');
          assert.equal(s.conditions.Healthy.status, 'False', 'one pass does not make it healthy again');
          s = await monitorStep(e, f, h, 'ok after failures #2');
          assert.equal(s.conditions.Healthy.status, 'True');
          assert.equal((await searchAttributes(h))['ProxyHealthy'], true);
          assert.equal(f.count('probeProxy'), 7);
          assert.equal(
            f.count('monitorProxy'),
            6,
            'one monitor per transition (address, True, two failures, False, True) plus the last',
          );
        },
        started,
      );
    },
  );

  it('H3 grace: 2 missed polls keep the IP and Healthy without a return; the third demotes', opts, async () => {
    const f = new Fakes(e);
    let reading: VmReading | 'error' = RUNNING;
    f.read = () => {
      if (reading === 'error') throw failure('LIBVIRT_RPC', 'Transient', 'every address source failed');
      return reading;
    };
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started);
        let s = await monitorStep(e, f, h, 'second ok poll');
        assert.equal(s.conditions.Healthy.status, 'True');
        const monitors = f.count('monitorProxy');
        reading = NO_ADDRESS;
        s = await monitorStep(e, f, h, 'missed 1');
        assert.equal(s.ip, IP, 'missed 1 of 2: the IP is kept');
        reading = 'error';
        s = await monitorStep(e, f, h, 'missed 2 (the read failed)');
        assert.equal(s.ip, IP, 'missed 2 of 2: the IP is still kept');
        assert.equal(s.conditions.Healthy.status, 'True');
        assert.equal(f.count('monitorProxy'), monitors, 'inside the grace: no return');
        const probes = f.count('probeProxy');
        reading = NO_ADDRESS;
        s = await monitorStep(e, f, h, 'missed 3');
        assert.equal(s.ip, undefined, 'missed 3 of 2: the IP is dropped');
        assert.equal(s.conditions.AddressAssigned.status, 'False');
        assert.equal(s.conditions.Healthy.reason, 'AddressLost');
        assert.equal(s.lastError?.code, 'LIBVIRT_RPC', 'the failed read is the last error');
        assert.equal(f.count('probeProxy'), probes, 'no probe without an address');
        assert.equal((await status(h)).ip, undefined, 'recorded by the workflow');
        assert.equal((await searchAttributes(h))['ProxyHealthy'], false);
        reading = RUNNING;
        s = await monitorStep(e, f, h, 'address back');
        assert.equal(s.ip, IP);
        assert.equal((await status(h)).conditions.AddressAssigned.status, 'True');
      },
      started,
    );
  });

  it('a monitor lost with its worker: the heartbeat timeout retries it, resumed with its counters', opts, async () => {
    const f = new Fakes(e);
    const frozen = new Gate();
    // A 1 s interval: the monitor polls on its own (real time) and its heartbeat timeout is 10 s.
    // bootMs 1: past the boot deadline at once, so failures count from the first probe (a booting
    // proxy's Unknown is proxy-booting-exit-ip.test.ts's).
    f.resolve = (spec) => resolvedProxy(spec, { health: { intervalMs: 1_000 }, timeouts: { bootMs: 1 } });
    f.probe = (_, n) => {
      if (n === 1) f.freezeNextWait = frozen; // after the second failing probe, the worker "dies"
      return REFUSED;
    };
    const started: WorkflowHandle[] = [];
    try {
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          f.taskQueue = tq;
          const { handle: h } = await startProxy(e, tq, started, { healthLoop: 'monitor' });
          const s = await statusWhen(h, (x) => x.conditions.Healthy.status === 'False', 'Unhealthy after the takeover');
          const monitors = f.calls.filter((c) => c.activity === 'monitorProxy');
          const retried = monitors.find((c) => c.attempt === 2);
          assert.ok(retried, `the lost attempt was retried (attempts ${monitors.map((c) => c.attempt).join(', ')})`);
          const lost = monitors.at(-2)!;
          const tookMs = retried.scheduledMs - lost.scheduledMs;
          assert.ok(tookMs <= 10_000 + 1_000 + 5_000, `retried ${tookMs} ms after the lost attempt began`);
          assert.equal(f.count('probeProxy'), 3, 'the third failing probe (the first after the takeover) decides');
          assert.equal(s.health.consecutiveFailed, 3, 'the two failures before the loss were kept');
          assert.equal(s.health.totalFailed, 3);
          assert.equal(s.conditions.Healthy.reason, 'ProbeFailed');
        },
        started,
      );
    } finally {
      frozen.open();
    }
  });

  it('delete during the loop cancels the monitor and deletes the VM', opts, async () => {
    const f = new Fakes(e);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started);
        await monitorStep(e, f, h, 'healthy');
        await h.executeUpdate(proxyDeleteUpdate);
        const out = await h.result();
        assert.equal(out.state, 'Deleted');
        assert.equal(f.count('deleteProxyVm'), 1);
        const cancelRequested = (await events(h)).some((ev) => ev.activityTaskCancelRequestedEventAttributes);
        assert.ok(cancelRequested, 'the monitor activity was cancelled');
      },
      started,
    );
  });

  it(
    'resize during the loop: the monitor is cancelled, the VM resized, a new monitor sees the new size',
    opts,
    async () => {
      const f = new Fakes(e);
      f.resize = () => ({ changed: true });
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const { handle: h } = await running(f, tq, started);
          await monitorStep(e, f, h, 'healthy');
          const before = f.count('monitorProxy');
          const s = await h.executeUpdate(proxyResizeUpdate, { args: [{ memoryMiB: 1024 }] });
          assert.equal(s.vm.memoryMiB, 1024);
          assert.equal(f.count('resizeProxyVm'), 1);
          await pollUntil(() => Promise.resolve(f.count('monitorProxy') > before ? true : undefined), {
            timeoutMs: WAIT_MS,
            what: 'a monitor after the resize',
          });
          const last = f.of<{ proxy: { vm: { memoryMiB: number } } }>('monitorProxy').at(-1)!;
          assert.equal(last.proxy.vm.memoryMiB, 1024);
          assert.ok(
            (await events(h)).some((ev) => ev.activityTaskCancelRequestedEventAttributes),
            'the monitor was cancelled for the resize',
          );
          assert.equal((await status(h)).state, 'Running');
        },
        started,
      );
    },
  );

  it('a VM gone under the monitor returns at once and is recreated', opts, async () => {
    const f = new Fakes(e);
    let reading: VmReading = RUNNING;
    f.read = () => reading;
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started);
        await monitorStep(e, f, h, 'healthy');
        reading = { state: 'Missing' };
        f.read = () => {
          const r = reading;
          reading = RUNNING; // the recreated VM is there
          return r;
        };
        f.ticks += 1;
        const s = await statusWhen(h, (x) => x.recreations === 1 && x.state === 'Running', 'recreated');
        assert.equal(f.count('createProxyVm'), 2);
        assert.equal(s.conditions.VmRunning.status, 'True');
      },
      started,
    );
  });

  it('the checkpoint continues as new with everything carried', opts, async () => {
    const f = new Fakes(e);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started, { continueAsNewAfterPolls: 4 });
        const firstRun = h.firstExecutionRunId;
        await monitorStep(e, f, h, 'poll 2');
        await monitorStep(e, f, h, 'poll 3');
        f.ticks += 1; // poll 4: the checkpoint
        const next = e.env.client.workflow.getHandle<typeof proxyLifecycle>(h.workflowId);
        await pollUntil(async () => ((await next.describe()).runId !== firstRun ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'the new run',
        });
        const startedEvent = (await events(next))[0]?.workflowExecutionStartedEventAttributes;
        assert.equal(startedEvent?.continuedExecutionRunId, firstRun);
        const s = await statusWhen(next, (x) => x.health.totalOk === 4, 'the carried status');
        assert.equal(s.state, 'Running');
        assert.equal(s.ip, IP);
        assert.equal(s.conditions.Healthy.status, 'True');
        assert.equal(s.health.consecutiveOk, 4);
        const sa = await searchAttributes(next);
        assert.deepEqual(
          { state: sa['ProxyState'], host: sa['ProxyHost'], entry: sa['ProviderEntry'] },
          { state: 'Running', host: 'h2', entry: 'e1' },
        );
        await monitorWaiting(f, f.monitorWaits - 1, "the new run's monitor");
        assert.equal(f.count('resolveProxy'), 1, 'the new run does not resolve again');
        assert.equal(f.count('createProxyVm'), 1, 'nor create');
        assert.deepEqual(await scheduled(next), ['monitorProxy'], 'the new run goes straight to its monitor');
        await next.executeUpdate(proxyDeleteUpdate);
        assert.equal((await next.result()).state, 'Deleted');
      },
      started,
    );
  });
});
