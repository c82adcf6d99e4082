/**
 * The health loop of a Running proxy on the time-skipping test server with fake activities, one
 * poll per `step` (an hour-long interval skipped): probe hysteresis, the H3 address grace on both
 * sides of its bound, continue-as-new carrying everything, and a probe activity that fails.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import type { PlacedProxy } from '../../activities/proxy.ts';
import type { proxyLifecycle } from '../../workflows/proxy/index.ts';
import { proxyDeleteUpdate, proxyStatusQuery } from '../../contracts/messages.ts';
import type { ProbeOutcome, ProxyStatus, VmReading } from '../../contracts/proxy.ts';
import { pollUntil } from '../support/temporal.ts';
import {
  Fakes,
  Gate,
  INTERVAL_MS,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  events,
  failure,
  held,
  idle,
  idleNow,
  resolvedProxy,
  searchAttributes,
  fileEnv,
  startProxy,
  status,
  statusWhen,
  step,
  withWorker,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };
const IP = '10.0.0.5';
const RUNNING: VmReading = { state: 'Running', ip: IP, source: 'lease' };
const NO_ADDRESS: VmReading = { state: 'Running' };
const OK: ProbeOutcome = { ok: true, latencyMs: 12 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'squid refused the CONNECT' };

/** Starts a proxy and waits until its first health poll is done. */
async function running(f: Fakes, tq: string, started: WorkflowHandle[], extra = {}) {
  f.taskQueue = tq;
  const p = await startProxy(e, tq, started, extra);
  await statusWhen(p.handle, (s) => s.state === 'Running', 'Running');
  await idle(p.handle, 'the first health poll');
  return p;
}

describe('proxy health loop', () => {
  it('hysteresis: healthyAfter=2, unhealthyAfter=3; counters and the Healthy condition follow', opts, async () => {
    const f = new Fakes(e);
    let outcome: ProbeOutcome = OK;
    f.probe = () => outcome;
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started);
        let s = await status(h);
        assert.equal(s.health.consecutiveOk, 1);
        assert.equal(s.conditions.Healthy.status, 'Unknown', 'ok ×1: not yet healthy');

        s = await step(e, h, 'probe ok #2');
        assert.equal(s.conditions.Healthy.status, 'True', 'ok ×2: healthy');
        assert.equal(s.conditions.Healthy.reason, 'ProbePassed');
        assert.deepEqual(
          { ...s.health, lastProbeAt: undefined },
          {
            consecutiveOk: 2,
            consecutiveFailed: 0,
            totalOk: 2,
            totalFailed: 0,
            lastLatencyMs: 12,
            lastProbeAt: undefined,
          },
        );
        assert.equal((await searchAttributes(h))['ProxyHealthy'], true);
        const healthySince = s.conditions.Healthy.since;

        outcome = REFUSED;
        s = await step(e, h, 'probe fail #1');
        assert.equal(s.conditions.Healthy.status, 'True', 'fail ×1: still healthy');
        assert.equal(s.health.consecutiveFailed, 1);
        assert.equal(s.health.consecutiveOk, 0);
        s = await step(e, h, 'probe fail #2');
        assert.equal(s.conditions.Healthy.status, 'True', 'fail ×2: still healthy');
        assert.equal(s.conditions.Healthy.since, healthySince, 'since moves only when the status changes');
        assert.equal(s.health.consecutiveFailed, 2);
        assert.equal((await searchAttributes(h))['ProxyHealthy'], true);

        s = await step(e, h, 'probe fail #3');
        assert.equal(s.conditions.Healthy.status, 'False', 'fail ×3: unhealthy');
        assert.equal(s.conditions.Healthy.reason, 'ProbeFailed');
        assert.equal(s.conditions.Healthy.message, 'PROBE_REFUSED: squid refused the CONNECT');
        assert.notEqual(s.conditions.Healthy.since, healthySince);
        assert.deepEqual(
          {
            consecutiveOk: s.health.consecutiveOk,
            consecutiveFailed: s.health.consecutiveFailed,
            totalOk: s.health.totalOk,
            totalFailed: s.health.totalFailed,
            lastError: s.health.lastError,
          },
          {
            consecutiveOk: 0,
            consecutiveFailed: 3,
            totalOk: 2,
            totalFailed: 3,
            lastError: 'PROBE_REFUSED: squid refused the CONNECT',
          },
        );
        assert.equal((await searchAttributes(h))['ProxyHealthy'], false);
        assert.equal(s.state, 'Running', 'an unhealthy proxy stays Running');

        outcome = OK;
        s = await step(e, h, 'probe ok after failures #1');
        assert.equal(s.conditions.Healthy.status, 'False', 'one pass does not make it healthy again');
        s = await step(e, h, 'probe ok after failures #2');
        assert.equal(s.conditions.Healthy.status, 'True');
        assert.equal(f.count('probeProxy'), 7);
      },
      started,
    );
  });

  it('H3 grace: addressGracePolls=2 missed polls keep the IP and Healthy; one more demotes', opts, async () => {
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
        let s = await step(e, h, 'second ok poll');
        assert.equal(s.conditions.Healthy.status, 'True');
        const addressSince = s.conditions.AddressAssigned.since;

        // Inside the bound: a poll without an address, then a poll whose read fails.
        reading = NO_ADDRESS;
        s = await step(e, h, 'missed poll 1 (no address read)');
        assert.equal(s.ip, IP, 'missed 1 of 2: the IP is kept');
        assert.equal(s.conditions.AddressAssigned.status, 'True');
        assert.equal(s.conditions.AddressAssigned.since, addressSince);
        assert.equal(s.conditions.Healthy.status, 'True');
        reading = 'error';
        s = await step(e, h, 'missed poll 2 (the read failed)');
        assert.equal(s.ip, IP, 'missed 2 of 2: the IP is still kept');
        assert.equal(s.conditions.AddressAssigned.status, 'True');
        assert.equal(s.conditions.Healthy.status, 'True');
        assert.equal(s.lastError?.code, 'LIBVIRT_RPC');
        assert.equal((await searchAttributes(h))['ProxyHealthy'], true);
        const probes = f.count('probeProxy');

        // Past the bound: demoted.
        reading = NO_ADDRESS;
        s = await step(e, h, 'missed poll 3');
        assert.equal(s.ip, undefined, 'missed 3 of 2: the IP is dropped');
        assert.equal(s.conditions.AddressAssigned.status, 'False');
        assert.equal(s.conditions.AddressAssigned.reason, 'NoAddress');
        assert.equal(s.conditions.AddressAssigned.message, 'no address read (VM Running)');
        assert.equal(s.conditions.Healthy.status, 'False');
        assert.equal(s.conditions.Healthy.reason, 'AddressLost');
        assert.equal(s.health.consecutiveOk, 0);
        assert.equal(s.state, 'Running');
        assert.equal(f.count('probeProxy'), probes, 'no probe without an address');
        assert.equal((await searchAttributes(h))['ProxyHealthy'], false);

        // The address comes back: assigned at once, healthy again after healthyAfter probes.
        reading = RUNNING;
        s = await step(e, h, 'address back');
        assert.equal(s.ip, IP);
        assert.equal(s.conditions.AddressAssigned.status, 'True');
        assert.equal(s.conditions.Healthy.status, 'False');
        s = await step(e, h, 'second ok poll after the address came back');
        assert.equal(s.conditions.Healthy.status, 'True');
      },
      started,
    );
  });

  it('continue-as-new after 3 polls: the next run starts with the same status; nothing lost', opts, async () => {
    const f = new Fakes(e);
    const resumeGate = new Gate();
    // Poll 1, 2, 3 (no boot poll: the create started the domain).
    const readings: VmReading[] = [RUNNING, RUNNING, NO_ADDRESS];
    f.resolve = (spec) => resolvedProxy(spec, { health: { addressGracePolls: 1 } });
    f.read = async (_, n) => {
      if (n === 3) await held(resumeGate); // the new run's first poll
      return readings[n] ?? NO_ADDRESS;
    };
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const { handle: h } = await running(f, tq, started, { continueAsNewAfterPolls: 3 });
        const firstRun = h.firstExecutionRunId;
        await step(e, h, 'poll 2');
        await e.env.sleep(INTERVAL_MS); // poll 3, then continue-as-new
        await pollUntil(() => Promise.resolve(f.count('readProxyVm') === 4 ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: "the new run's first poll",
        });
        const before: ProxyStatus = await e.env.client.workflow
          .getHandle(h.workflowId, firstRun)
          .query(proxyStatusQuery);
        const next = e.env.client.workflow.getHandle<typeof proxyLifecycle>(h.workflowId);
        const d = await next.describe();
        assert.notEqual(d.runId, firstRun, 'a new run');
        const startedEvent = (await events(next))[0]?.workflowExecutionStartedEventAttributes;
        assert.equal(startedEvent?.continuedExecutionRunId, firstRun);
        const after = await next.query(proxyStatusQuery);

        // Before the new run's first poll is read, its status is the old run's, field by field.
        assert.deepEqual({ ...after, updatedAt: '' }, { ...before, updatedAt: '' });
        assert.equal(after.state, 'Running');
        assert.equal(after.host, 'h2');
        assert.equal(after.ip, IP, 'held through one missed poll (grace 1)');
        assert.equal(after.recreations, 0);
        assert.equal(after.health.consecutiveOk, 3);
        assert.equal(after.health.totalOk, 3);
        assert.equal(after.conditions.Healthy.status, 'True');
        assert.ok(after.runningSince);
        assert.equal(after.createdAt, before.createdAt);
        const sa = await searchAttributes(next);
        assert.deepEqual(
          { state: sa['ProxyState'], host: sa['ProxyHost'], entry: sa['ProviderEntry'] },
          { state: 'Running', host: 'h2', entry: 'e1' },
        );

        // The missed-poll count was carried too: the second miss (in the new run) demotes.
        resumeGate.open();
        const s = await statusWhen(next, (x) => x.ip === undefined, 'demotion in the new run');
        assert.equal(s.conditions.AddressAssigned.status, 'False');
        assert.equal(s.conditions.Healthy.reason, 'AddressLost');
        assert.equal(f.count('resolveProxy'), 1, 'the new run does not resolve again');
        assert.equal(f.count('createProxyVm'), 1, 'nor create');

        await next.executeUpdate(proxyDeleteUpdate);
        assert.equal((await next.result()).state, 'Deleted');
        assert.deepEqual(
          f.of<PlacedProxy>('deleteProxyVm').map((c) => c.host),
          ['h2'],
        );
      },
      started,
    );
  });

  it(
    'a probe activity that fails (timeout, worker restart) is a failed probe; the proxy stays Running',
    opts,
    async () => {
      const f = new Fakes(e);
      f.probe = (_, n) => {
        if (n === 1) throw failure('UNCLASSIFIED', 'Transient', 'activity StartToClose timeout');
        return OK;
      };
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const { handle: h } = await running(f, tq, started);
          await e.env.sleep(INTERVAL_MS);
          const outcome = await pollUntil(
            async () => {
              const d = await h.describe();
              if (d.status.name !== 'RUNNING') return d.status.name;
              return f.count('probeProxy') >= 2 && ((await idleNow(h)).timers ?? 0) >= 2 ? 'RUNNING' : undefined;
            },
            { timeoutMs: WAIT_MS, what: 'the poll with the failing probe to end' },
          );
          assert.equal(
            outcome,
            'RUNNING',
            `the workflow ended ${outcome} because one probe activity failed; ` +
              `compensation ${f.count('deleteProxyVm') === 0 ? 'did NOT run (the VM is left behind)' : 'ran'}`,
          );
          const s = await status(h);
          assert.equal(s.health.totalFailed, 1);
        },
        started,
      );
    },
  );
});
