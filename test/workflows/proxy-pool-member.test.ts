/**
 * A proxy that is a pool's member (input.pool), on the time-skipping test server with fake
 * activities: it reports each change of its summary to the pool's workflow ID by signal (seen
 * here in the history of an open stand-in workflow at that ID), applies the pool's `serving`
 * signal to its status (which discovery reads), is placed away from the hosts the pool avoids or
 * finds crowded (the fewest of its pool, under maxPerHost), and a proxy outside a pool signals nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { discovered } from '../../api/routes-ops.ts';
import { CATALOG_WORKFLOW_TYPE } from '../../contracts/catalog.ts';
import { memberServingSignal, proxyDeleteUpdate } from '../../contracts/messages.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import { poolWorkflowId } from '../../contracts/pool.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import type { catalogWorkflow } from '../../workflows/catalog.ts';
import type { PoolMembership } from '../../contracts/proxy-run.ts';
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
  WAIT_MS,
  withWorker,
} from '../support/workflow-harness.ts';

const e = fileEnv();
/** History event types (`temporal.api.enums.v1.EventType`). */
const COMPLETED = 2;
const SIGNAL_INITIATED = 37;
const EXTERNAL_SIGNALED = 39;
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

/** The member reports the stand-in received, in order (its history's signal events). */
async function reports(pool: WorkflowHandle): Promise<MemberReport[]> {
  const out: MemberReport[] = [];
  for (const ev of await events(pool)) {
    const a = ev.workflowExecutionSignaledEventAttributes;
    if (a?.signalName !== 'member') continue;
    const data = a.input?.payloads?.[0]?.data;
    if (data) out.push(JSON.parse(Buffer.from(data).toString('utf8')) as MemberReport);
  }
  return out;
}

async function reportWhen(pool: WorkflowHandle, pred: (r: MemberReport) => boolean, what: string) {
  return pollUntil(async () => (await reports(pool)).find(pred), { timeoutMs: WAIT_MS, intervalMs: 25, what });
}

/** Starts a member on the monitor loop and steps its monitor until Healthy (bounded). */
async function healthyMember(f: Fakes, tq: string, started: WorkflowHandle[], pool: Partial<PoolMembership> = {}) {
  f.taskQueue = tq;
  const poolHandle = await standInPool(tq, started);
  const membership: PoolMembership = { workflowId: poolHandle.workflowId, serving: false, ...pool };
  const p = await startProxy(e, tq, started, { healthLoop: 'monitor', pool: membership });
  await statusWhen(p.handle, (s) => s.state === 'Running', 'Running');
  await monitorWaiting(f, 0, 'the first health poll');
  let st: ProxyStatus = await status(p.handle);
  for (let i = 0; i < 6 && st.conditions.Healthy.status !== 'True'; i++) {
    st = await monitorStep(e, f, p.handle, `health poll ${i + 1}`);
  }
  assert.equal(st.conditions.Healthy.status, 'True', 'the member became Healthy');
  return { ...p, pool: poolHandle };
}

describe('a pool member', () => {
  it(
    'reports the changes of its summary to the pool, and stays out of discovery until the pool says it serves',
    opts,
    async () => {
      const f = new Fakes(e);
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const m = await healthyMember(f, tq, started);
          const healthy = await reportWhen(
            m.pool,
            (r) => r.state === 'Running' && r.health === 'True',
            'a Healthy report',
          );
          assert.equal(healthy.name, m.name);
          assert.equal(healthy.serving, false);
          assert.ok(healthy.ip, 'the report carries the address');
          assert.ok(healthy.host, 'the report carries the host');
          // The way up (Pending … Running) is held and sent as one report at most (the
          // `pool-report-hold` marker: test/workflows/pool-member-reports.test.ts).
          const states = (await reports(m.pool)).map((r) => r.state);
          assert.ok(states.indexOf('Running') <= 1, `states reported: ${states.join(',')}`);
          // Healthy but a spare: not handed out.
          const st = await status(m.handle);
          assert.deepEqual(st.pool, { workflowId: m.pool.workflowId, serving: false });
          assert.equal(discovered(st, Date.now()), undefined);

          await m.handle.signal(memberServingSignal, { serving: true });
          const serving = await statusWhen(m.handle, (s) => s.pool?.serving === true, 'serving');
          assert.equal(discovered(serving, Date.now())?.address, `${serving.ip}:${serving.port}`);
          await reportWhen(m.pool, (r) => r.serving, 'the report that it serves');

          await m.handle.signal(memberServingSignal, { serving: false });
          const out = await statusWhen(m.handle, (s) => s.pool?.serving === false, 'out of discovery');
          assert.equal(discovered(out, Date.now()), undefined);
          const last = await pollUntil(
            async () => {
              const rs = await reports(m.pool);
              return rs.length > 0 && !rs[rs.length - 1]!.serving && rs.some((r) => r.serving) ? rs : undefined;
            },
            { timeoutMs: WAIT_MS, intervalMs: 25, what: 'the report that it left discovery' },
          );
          // Quiet polls send nothing: one report per change, none repeated.
          const keys = last.map(({ at: _a, lastError: _e, ...rest }) => JSON.stringify(rest));
          assert.ok(
            keys.every((k, i) => i === 0 || k !== keys[i - 1]),
            `no report repeats the one before: ${keys.join('\n')}`,
          );

          await m.handle.executeUpdate(proxyDeleteUpdate);
          await m.handle.result();
          await reportWhen(m.pool, (r) => r.state === 'Deleted', 'the Deleted report');
          // The run waited for its last signal to be delivered before it completed (a server drops
          // the signal of a sender that has completed).
          const tail = (await events(m.handle)).map((ev) => Number(ev.eventType));
          const delivered = tail.lastIndexOf(EXTERNAL_SIGNALED);
          assert.ok(delivered > tail.lastIndexOf(SIGNAL_INITIATED), 'the last signal was confirmed delivered');
          assert.ok(delivered < tail.lastIndexOf(COMPLETED), 'before the run completed');
        },
        started,
      );
    },
  );

  it('keeps the role the pool gave it while its health monitor ran, when the monitor returns', opts, async () => {
    const f = new Fakes(e);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const m = await healthyMember(f, tq, started);
        // The monitor is running (it started with serving false); the pool puts the member in discovery.
        await m.handle.signal(memberServingSignal, { serving: true });
        await statusWhen(m.handle, (s) => s.pool?.serving === true, 'serving');
        // Probes fail until the monitor returns on the Healthy -> False transition.
        f.probe = () => ({ ok: false, code: 'PROBE_FAILED', message: 'refused' });
        let st = await status(m.handle);
        for (let i = 0; i < 6 && st.conditions.Healthy.status !== 'False'; i++) {
          st = await monitorStep(e, f, m.handle, `failing poll ${i + 1}`);
        }
        const after = await statusWhen(m.handle, (s) => s.conditions.Healthy.status === 'False', 'Unhealthy recorded');
        assert.equal(after.pool?.serving, true, 'the serving role survived the monitor returning');
        const rs = await reports(m.pool);
        assert.equal(rs[rs.length - 1]!.serving, true, 'and the last report says so');
      },
      started,
    );
  });

  it(
    'is placed away from the hosts its pool avoids, and on the host with the fewest members of its pool, under maxPerHost',
    opts,
    async () => {
      const f = new Fakes(e);
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          f.taskQueue = tq;
          const pool = await standInPool(tq, started);
          const a = await startProxy(e, tq, started, {
            healthLoop: 'monitor',
            pool: { workflowId: pool.workflowId, serving: false, avoidHosts: ['h1'] },
          });
          const b = await startProxy(e, tq, started, {
            healthLoop: 'monitor',
            pool: { workflowId: pool.workflowId, serving: false, hostCounts: { h2: 1 } },
          });
          assert.equal((await statusWhen(a.handle, (s) => s.host !== undefined, 'placed')).host, 'h2');
          assert.equal((await statusWhen(b.handle, (s) => s.host !== undefined, 'placed')).host, 'h1');
          // Two members created together, no host counted yet: they take the tied hosts in turn.
          const [s0, s1] = await Promise.all(
            [0, 1].map((spreadSlot) =>
              startProxy(e, tq, started, {
                healthLoop: 'monitor',
                pool: { workflowId: pool.workflowId, serving: false, hostCounts: {}, spreadSlot },
              }),
            ),
          );
          assert.equal((await statusWhen(s0!.handle, (s) => s.host !== undefined, 'placed')).host, 'h1');
          assert.equal((await statusWhen(s1!.handle, (s) => s.host !== undefined, 'placed')).host, 'h2');
          // Every host at the pool's maxPerHost: the member waits for room rather than crowd one.
          const c = await startProxy(e, tq, started, {
            healthLoop: 'monitor',
            pool: { workflowId: pool.workflowId, serving: false, hostCounts: { h1: 2, h2: 2 }, maxPerHost: 2 },
          });
          const waiting = await statusWhen(c.handle, (s) => s.state === 'WaitingForCapacity', 'waiting for room');
          assert.equal(waiting.host, undefined);
        },
        started,
      );
    },
  );

  it('a proxy outside a pool signals no other workflow', opts, async () => {
    const f = new Fakes(e);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        f.taskQueue = tq;
        const p = await startProxy(e, tq, started, { healthLoop: 'monitor' });
        await statusWhen(p.handle, (s) => s.state === 'Running', 'Running');
        await p.handle.executeUpdate(proxyDeleteUpdate);
        await p.handle.result();
        const signalled = (await events(p.handle)).filter(
          (ev) => ev.signalExternalWorkflowExecutionInitiatedEventAttributes != null,
        );
        assert.equal(signalled.length, 0);
        assert.equal((await status(p.handle)).pool, undefined);
      },
      started,
    );
  });
});
