/**
 * The pool workflow on the time-skipping test server: the real poolWorkflow with fakes of its
 * activities (test/support/pool-harness.ts); members are stand-in workflows under the members'
 * IDs that report to the pool (`poolMemberSignal`) and apply its `serving` signals. The policies
 * themselves are unit-tested in test/unit/pool-plan.test.ts; here: the workflow applies them,
 * its updates refuse bad requests before the history, and continue-as-new carries the members.
 *
 * EP_RECORD_POOL_REPLAY=1 writes the histories of the rollout, rollback, drain, host-failure, start-in-flight,
 * start-window and continue-settled tests to test/replay/pool-*.sdk-<version>.json (replayed by
 * test/unit/replay.test.ts). The carried-run test's second run is no longer written: the
 * pool-carried history it made holds members carried as records, which this build no longer writes
 * and must still read (pool-carry.test.ts records one begun from packed members).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/activity';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import {
  poolDeleteUpdate,
  poolHostDrainSignal,
  poolPauseUpdate,
  poolResumeUpdate,
  poolRollbackUpdate,
  poolScaleUpdate,
  poolSpecUpdate,
} from '../../contracts/messages.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import type { PoolWorkflowInput } from '../../contracts/pool-state.ts';
import {
  ENTRY,
  Fakes,
  monitorStep,
  monitorWaiting,
  publishedMemos,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  withWorker,
} from '../support/workflow-harness.ts';
import { createPoolActivities } from '../../activities/pool.ts';
import type { StartMemberInput } from '../../activities/pool.ts';
import { discovered } from '../../api/routes-ops.ts';
import { freshProxyStatus } from '../../client/health.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { patchIds, pollUntil } from '../support/temporal.ts';
import { POOL_CONTINUE_WHEN_SETTLED_PATCH } from '../../workflows/pool/index.ts';
import type { poolWorkflow } from '../../workflows/pool/index.ts';
import { uncarried } from '../../workflows/pool/carry.ts';
import {
  PoolFakes,
  poolFileEnv,
  withPool,
  poolStatus,
  poolWhen,
  readyAt,
  startPool,
  testPoolSpec,
} from '../support/pool-harness.ts';
import type { PoolHandle } from '../support/pool-harness.ts';
import { recordReplay } from '../support/replay-record.ts';

const e = poolFileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };

/** Update events (accepted or completed) in the pool's history: a refused update leaves none. */
async function updateEvents(h: WorkflowHandle): Promise<number> {
  const history = await h.fetchHistory();
  return (history.events ?? []).filter(
    (ev) => ev.workflowExecutionUpdateAcceptedEventAttributes || ev.workflowExecutionUpdateCompletedEventAttributes,
  ).length;
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof WorkflowUpdateFailedError, `a WorkflowUpdateFailedError, got ${String(err)}`);
    return err.cause?.message ?? err.message;
  }
  throw new Error('the update was accepted; a refusal was expected');
}

/** Writes the run's history as a replay file when asked to (EP_RECORD_POOL_REPLAY=1). */
const record = (h: WorkflowHandle, name: string): Promise<void> => recordReplay(h, name, 'EP_RECORD_POOL_REPLAY');

const names = (s: PoolStatus): string[] => s.members.map((m) => m.name);

/**
 * The `available` of every status the pool published from its `from`-th memo upsert on, read from
 * its history: each one, however briefly it held (a query sampled every 25 ms of wall time while
 * time skips could miss a dip; this cannot).
 */
async function publishedAvailable(h: WorkflowHandle, from: number): Promise<number[]> {
  const memos = (await publishedMemos(h)).slice(from);
  assert.ok(memos.length > 0, 'the pool published statuses');
  return memos.map((p) => p.memo['available'] as number);
}

/** Holds the third start of `f` until the returned function is called. */
function holdThirdStart(f: PoolFakes): () => void {
  let release = (): void => undefined;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  f.holdStart = () => (f.starts().length === 3 ? gate : undefined);
  return () => release();
}

describe('pool workflow', () => {
  it('creates N members, each told to serve once Healthy: Ready with N in discovery', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 2, spares: 1 }));
      const s = await poolWhen(h, readyAt(2), 'Ready');
      assert.equal(f.starts().length, 3);
      assert.equal(s.members.filter((m) => m.role === 'spare').length, 1);
      assert.equal(s.stableRevision, 1);
      for (const m of s.members) {
        const view = await f.view(m.name);
        assert.deepEqual(
          view.served,
          m.role === 'serving' ? [true] : [],
          `${m.name} (${m.role}) was told ${JSON.stringify(view.served)}`,
        );
        if (m.role === 'serving') assert.ok(m.available && m.address, `${m.name} available with an address`);
      }
    });
  });

  it('replaces a Failed member at once; a start that fails is replaced too', opts, async () => {
    const f = new PoolFakes(e);
    let refused = 0;
    f.beforeStart = () => {
      if (f.starts().length === 2 && refused++ === 0) {
        throw ApplicationFailure.create({
          type: 'POOL_MEMBER_CONFLICT',
          message: 'the ID is taken',
          nonRetryable: true,
        });
      }
    };
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }));
      const s = await poolWhen(h, readyAt(2), 'Ready');
      assert.equal(f.starts().length, 3, 'the refused start was replaced');
      assert.equal(s.replacements, 1);
      const victim = s.members[0]!.name;
      await f.play(victim, { state: 'Failed', lastError: 'KVM2_DOMAIN_GONE: destroyed' });
      const after = await poolWhen(h, (x) => readyAt(2)(x) && !names(x).includes(victim), 'replaced');
      assert.equal(after.replacements, 2);
      assert.equal(f.starts().length, 4);
    });
  });

  it('refuses bad updates before they enter the history, with the reason', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 1 }));
      await poolWhen(h, readyAt(1), 'Ready');
      assert.match(await refusal(h.executeUpdate(poolScaleUpdate, { args: [{ size: 1001 }] })), /size .*1000/);
      assert.match(await refusal(h.executeUpdate(poolRollbackUpdate, { args: [{}] })), /only one revision/);
      assert.match(
        await refusal(h.executeUpdate(poolSpecUpdate, { args: [{ rollout: { maxSurge: 0, maxUnavailable: 0 } }] })),
        /maxSurge and rollout.maxUnavailable are both 0/,
      );
      assert.match(
        await refusal(h.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: 'Not An Id' } }] })),
        /template.imageKey/,
      );
      assert.equal(await updateEvents(h), 0, 'no update event in the history');
      const s = await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
      assert.equal(s.desired, 2);
      assert.equal(await updateEvents(h), 2, 'an accepted update is in the history (accepted, completed)');
      await poolWhen(h, readyAt(2), 'Ready at 2');
    });
  });

  it(
    "an update answers a brief status: what the pool's history keeps of it does not grow with its members",
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }));
        await poolWhen(h, readyAt(2), 'Ready at 2');
        const small = await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
        assert.equal(small.memberCount, 2);
        assert.equal('members' in small, false, 'no members in the answer');
        await h.executeUpdate(poolScaleUpdate, { args: [{ size: 12 }] });
        await poolWhen(h, readyAt(12), 'Ready at 12');
        const large = await h.executeUpdate(poolScaleUpdate, { args: [{ size: 12 }] });
        assert.equal(large.memberCount, 12);
        const answers = ((await h.fetchHistory()).events ?? [])
          .map((ev) => ev.workflowExecutionUpdateCompletedEventAttributes?.outcome?.success?.payloads?.[0]?.data)
          .filter((d): d is Uint8Array => d != null)
          .map((d) => d.length);
        assert.equal(answers.length, 3);
        const [atTwo, , atTwelve] = answers as [number, number, number];
        assert.ok(atTwelve - atTwo < 300, `the answer at 12 members is ${atTwelve} bytes, at 2 ${atTwo}`);
      });
    },
  );

  it('create → scale → a template rolls through → delete ends Deleted after its members', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h: PoolHandle = await startPool(e, tq, started, testPoolSpec({ size: 1 }));
      await poolWhen(h, readyAt(1), 'Ready at 1');
      await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
      const before = await poolWhen(h, readyAt(2), 'Ready at 2');
      const from = (await publishedMemos(h)).length;
      const updated = await h.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: 'img-b' } }] });
      assert.equal(updated.revision, 2);
      const rolled = await poolWhen(h, (s) => readyAt(2, 2)(s) && s.stableRevision === 2, 'rolled to revision 2');
      const seen = await publishedAvailable(h, from);
      assert.equal(Math.min(...seen), 2, `never fewer than 2 in discovery in any published status: ${seen.join(' ')}`);
      assert.ok(rolled.members.every((m) => m.imageKey === 'img-b'));
      assert.deepEqual(f.deletes().sort(), names(before).sort(), 'the old members were deleted');
      for (const old of names(before)) assert.deepEqual((await f.view(old)).served, [true, false]);
      assert.equal(f.starts().filter((c) => c.imageKey === 'img-b').length, 2);
      await h.executeUpdate(poolDeleteUpdate);
      const end = await h.result();
      assert.equal(end.phase, 'Deleted');
      assert.deepEqual(end.members, []);
      assert.deepEqual(f.deletes().sort(), [...names(before), ...names(rolled)].sort());
      assert.equal(f.open.size, 0);
      await record(h, 'pool-rollout');
    });
  });

  it('a replacement, then a rollout past its progress deadline rolls back to the stable revision', opts, async () => {
    const f = new PoolFakes(e);
    f.fate = (input) => (input.template.imageKey === 'img-bad' ? 'hang' : 'healthy');
    await withPool(e, f, async (tq, started) => {
      const spec = testPoolSpec({ size: 1, rollout: { minHealthyMs: 0, progressDeadlineMs: 10_000 } });
      const h = await startPool(e, tq, started, spec);
      const s = await poolWhen(h, readyAt(1), 'Ready');
      await f.play(s.members[0]!.name, { state: 'Failed', lastError: 'KVM2_DOMAIN_GONE: destroyed' });
      await poolWhen(h, (x) => readyAt(1)(x) && x.replacements === 1, 'replaced');
      await h.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: 'img-bad' } }] });
      await poolWhen(h, (x) => x.members.some((m) => m.revision === 2), 'a member of revision 2');
      assert.equal((await poolStatus(h)).rollbacks, 0);
      await e.env.sleep(11_000);
      const back = await poolWhen(h, (x) => x.rollbacks === 1 && readyAt(1, 1)(x), 'rolled back, Ready');
      assert.match(back.reason ?? '', /rolled back to revision 1/);
      assert.equal(back.revision, 1);
      const stuck = f.starts().find((c) => c.imageKey === 'img-bad')!.name!;
      assert.ok(f.deletes().includes(stuck), 'the stuck member of the bad revision was deleted');
      await h.executeUpdate(poolDeleteUpdate);
      assert.equal((await h.result()).phase, 'Deleted');
      await record(h, 'pool-replace-rollback');
    });
  });

  it('pause holds a rollout; resume rolls it through', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }));
      await poolWhen(h, readyAt(2), 'Ready');
      const paused = await h.executeUpdate(poolPauseUpdate);
      assert.equal(paused.paused, true);
      await h.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: 'img-b' } }] });
      await poolWhen(h, (s) => s.phase === 'Paused' && s.revision === 2, 'Paused on revision 2');
      // Bounded: for a second of real time (and a minute skipped) nothing of revision 2 starts.
      await e.env.sleep(60_000);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal(f.starts().length, 2, 'no member started while paused');
      assert.equal((await poolStatus(h)).phase, 'Paused');
      await h.executeUpdate(poolResumeUpdate);
      await poolWhen(h, readyAt(2, 2), 'rolled to revision 2 after resume');
      assert.equal(f.starts().length, 4);
    });
  });

  it('the loop guard: members that never come up stop creation (Degraded), then it creates again', opts, async () => {
    const f = new PoolFakes(e);
    f.fate = () => 'fail';
    await withPool(e, f, async (tq, started) => {
      const spec = testPoolSpec({ size: 1, replacement: { maxFailures: 3, windowMs: 60_000, backoffMs: 30_000 } });
      const h = await startPool(e, tq, started, spec);
      const s = await poolWhen(h, (x) => x.phase === 'Degraded', 'Degraded');
      assert.equal(f.starts().length, 3, 'no creation past the third failure');
      assert.equal(s.degraded?.failures.length, 3);
      assert.ok(s.degraded?.failures.every((x) => /KVM2_BOOT_TIMEOUT/.test(x.reason)));
      assert.match(s.reason ?? '', /never became healthy/);
      f.fate = () => 'healthy';
      await e.env.sleep(31_000);
      await poolWhen(h, readyAt(1), 'Ready after the backoff');
      assert.equal(f.starts().length, 4);
    });
  });

  it('an Unhealthy member past its grace is replaced, new one first', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 2, replacement: { unhealthyGraceMs: 30_000 } }));
      const s = await poolWhen(h, readyAt(2), 'Ready');
      const sick = s.members[0]!.name;
      await f.play(sick, { health: 'False', lastError: 'PROBE_FAILED: refused' });
      await poolWhen(h, (x) => x.members.some((m) => m.name === sick && m.healthy === 'False'), 'Unhealthy seen');
      assert.equal(f.starts().length, 2, 'nothing within the grace');
      await e.env.sleep(31_000);
      const after = await poolWhen(h, (x) => readyAt(2)(x) && !names(x).includes(sick), 'replaced');
      assert.equal(after.replacements, 1);
      const order = f.calls.filter((c) => c.activity !== 'listPoolMembers').map((c) => `${c.activity} ${c.name}`);
      const created = order.findIndex((c) => c.startsWith('startPoolMember') && !names(s).some((n) => c.endsWith(n)));
      assert.ok(created >= 0 && created < order.indexOf(`deletePoolMember ${sick}`), order.join(', '));
    });
  });

  it('a spare takes a failed member’s place at once; a new spare boots behind it', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 1, spares: 1 }));
      const s = await poolWhen(h, readyAt(1), 'Ready');
      const spare = s.members.find((m) => m.role === 'spare')!.name;
      const serving = s.members.find((m) => m.role === 'serving')!.name;
      await f.play(serving, { state: 'Failed' });
      const after = await poolWhen(
        h,
        (x) => readyAt(1)(x) && x.members.length === 2 && !names(x).includes(serving),
        'whole again',
      );
      assert.equal(after.members.find((m) => m.role === 'serving')?.name, spare, 'the spare was promoted');
      assert.deepEqual((await f.view(spare)).served, [true]);
      assert.equal(f.starts().length, 3);
    });
  });

  it('scale-down (oldest): the member leaves discovery, drains drainDelayMs, then is deleted', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(
        e,
        tq,
        started,
        testPoolSpec({ size: 1, drainDelayMs: 30_000, scaleDownPolicy: 'oldest' }),
      );
      const first = (await poolWhen(h, readyAt(1), 'Ready at 1')).members[0]!.name;
      await e.env.sleep(1_000);
      await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
      await poolWhen(h, readyAt(2), 'Ready at 2');
      await h.executeUpdate(poolScaleUpdate, { args: [{ size: 1 }] });
      await pollUntil(async () => ((await f.view(first)).served.length === 2 ? true : undefined), {
        timeoutMs: WAIT_MS,
        intervalMs: 25,
        what: 'the oldest member told to stop serving',
      });
      assert.deepEqual((await f.view(first)).served, [true, false]);
      const draining = await poolStatus(h);
      assert.equal(draining.members.find((m) => m.name === first)?.role, 'leaving');
      assert.ok(!f.deletes().includes(first), 'not deleted before its drain');
      await e.env.sleep(31_000);
      await poolWhen(h, (x) => readyAt(1)(x) && !names(x).includes(first), 'deleted after the drain');
      assert.deepEqual(f.deletes(), [first]);
    });
  });

  it('rotation: members past maxAgeMs (with jitter) are replaced, never below N in discovery', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const spec = testPoolSpec({ size: 2, rotation: { maxAgeMs: 60_000, jitter: 0.5 } });
      const h = await startPool(e, tq, started, spec);
      const first = names(await poolWhen(h, readyAt(2), 'Ready'));
      const from = (await publishedMemos(h)).length;
      for (let i = 0; i < 8 && !first.every((n) => f.deletes().includes(n)); i++) {
        await e.env.sleep(20_000);
        await poolWhen(h, readyAt(2), `Ready after ${i + 1} × 20 s`);
      }
      assert.ok(
        first.every((n) => f.deletes().includes(n)),
        'both first members rotated out',
      );
      const seen = await publishedAvailable(h, from);
      assert.equal(Math.min(...seen), 2, `never fewer than 2 in discovery in any published status: ${seen.join(' ')}`);
    });
  });

  it(
    'with real member proxies (the activities that start and delete them, fake VMs): Ready, in discovery, deleted',
    opts,
    async () => {
      const f = new Fakes(e);
      let tq = '';
      const pool = (): ReturnType<typeof createPoolActivities> => createPoolActivities(e.env.client, tq);
      const activities = {
        ...f.activities(),
        startPoolMember: (input: StartMemberInput) => pool().startPoolMember(input),
        deletePoolMember: (input: { entry: string; name: string }) => pool().deletePoolMember(input),
        listPoolMembers: () => Promise.resolve([]), // the test server has no visibility list; no audit runs here
      };
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        activities,
        async (queue) => {
          tq = queue;
          f.taskQueue = queue;
          const h = await startPool(e, queue, started, testPoolSpec({ size: 1 }));
          const member = await poolWhen(h, (x) => x.members[0]?.state === 'Running', 'the member Running');
          const name = member.members[0]!.name;
          const proxy = e.env.client.workflow.getHandle(proxyWorkflowId(ENTRY, name));
          started.push(proxy);
          await monitorWaiting(f, 0, 'the member’s first health poll');
          let st = await freshProxyStatus(proxy);
          for (let i = 0; i < 6 && st.conditions.Healthy.status !== 'True'; i++) {
            st = await monitorStep(e, f, proxy, `health poll ${i + 1}`);
          }
          assert.equal(st.conditions.Healthy.status, 'True');
          const ready = await poolWhen(h, readyAt(1), 'Ready with the real member');
          assert.equal(ready.members[0]?.address, `${st.ip}:${st.port}`);
          const served = await pollUntil(
            async () => {
              const x = await freshProxyStatus(proxy);
              return discovered(x, Date.now()) === undefined ? undefined : x;
            },
            { timeoutMs: WAIT_MS, intervalMs: 25, what: 'the member in discovery' },
          );
          assert.deepEqual(served.pool, { workflowId: h.workflowId, serving: true });
          await h.executeUpdate(poolDeleteUpdate);
          assert.equal((await h.result()).phase, 'Deleted');
          assert.equal((await freshProxyStatus(proxy)).state, 'Deleted');
        },
        started,
      );
    },
  );

  it(
    'a drain notice: the member on that host is replaced elsewhere, new first, then deleted; undrain stops it',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }));
        const s = await poolWhen(h, readyAt(2), 'Ready');
        const onH1 = s.members.filter((m) => m.host === 'h1').map((m) => m.name);
        assert.equal(onH1.length, 1, JSON.stringify(s.members.map((m) => m.host)));
        const from = (await publishedMemos(h)).length;
        await h.signal(poolHostDrainSignal, { host: 'h1', draining: true });
        const drained = await poolWhen(h, (x) => readyAt(2)(x) && x.members.every((m) => m.host !== 'h1'), 'off h1');
        assert.deepEqual(drained.drainingHosts, ['h1']);
        const seen = await publishedAvailable(h, from);
        assert.equal(
          Math.min(...seen),
          2,
          `never fewer than 2 in discovery in any published status: ${seen.join(' ')}`,
        );
        assert.deepEqual(f.deletes(), onH1, 'the member on h1 was deleted');
        const fresh = f.starts().slice(2);
        assert.equal(fresh.length, 1);
        assert.ok(fresh[0]!.avoidHosts?.includes('h1'), `the new member avoids h1: ${JSON.stringify(fresh[0])}`);
        const order = f.calls.filter((c) => c.activity !== 'listPoolMembers').map((c) => `${c.activity} ${c.name}`);
        assert.ok(
          order.indexOf(`startPoolMember ${fresh[0]!.name}`) < order.indexOf(`deletePoolMember ${onH1[0]}`),
          order.join(', '),
        );
        assert.equal(drained.replacements, 0, 'a drain is not a replacement');
        await h.signal(poolHostDrainSignal, { host: 'h1', draining: false });
        await poolWhen(h, (x) => x.drainingHosts.length === 0, 'h1 no longer draining');
        await h.executeUpdate(poolScaleUpdate, { args: [{ size: 3 }] });
        await poolWhen(h, readyAt(3), 'Ready at 3');
        assert.deepEqual(f.starts().at(-1)?.avoidHosts, [], 'h1 may be used again');
        await h.executeUpdate(poolDeleteUpdate);
        assert.equal((await h.result()).phase, 'Deleted');
        await record(h, 'pool-host-drain');
      });
    },
  );

  it(
    'a member whose host stops answering is replaced on another host after hostFailureGraceMs, not before',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        // A long Unhealthy grace: what replaces the member is the host rule, not its health.
        const spec = testPoolSpec({ size: 2, replacement: { hostFailureGraceMs: 30_000, unhealthyGraceMs: 600_000 } });
        const h = await startPool(e, tq, started, spec);
        const s = await poolWhen(h, readyAt(2), 'Ready');
        const dead = s.members.find((m) => m.host === 'h1')!.name;
        const since = (await poolStatus(h)).updatedAt; // the pool's clock (time is skipped)
        await f.play(dead, { health: 'False', hostUnreachableSince: since, lastError: 'HOST_UNREACHABLE: no answer' });
        const seen = await poolWhen(
          h,
          (x) => x.members.some((m) => m.name === dead && m.healthy === 'False'),
          'the report seen',
        );
        await e.env.sleep(20_000);
        await new Promise((r) => setTimeout(r, 1_000));
        assert.equal(f.starts().length, 2, 'nothing replaced within the grace');
        assert.equal(seen.members.find((m) => m.name === dead)?.hostUnreachableSince, since, 'the status shows it');
        await e.env.sleep(11_000);
        const after = await poolWhen(h, (x) => readyAt(2)(x) && !names(x).includes(dead), 'replaced');
        assert.ok(f.deletes().includes(dead), 'the old member was asked to delete itself');
        assert.equal(after.replacements, 1);
        assert.equal(after.degraded, undefined);
        const fresh = f.starts()[2]!;
        assert.ok(fresh.avoidHosts?.includes('h1'), `the replacement avoids h1: ${JSON.stringify(fresh)}`);
        assert.equal(after.members.find((m) => m.name === fresh.name)?.host, 'h2');
        await h.executeUpdate(poolDeleteUpdate);
        assert.equal((await h.result()).phase, 'Deleted');
        await record(h, 'pool-host-failure');
      });
    },
  );

  it('members that came up are told to serve while another member’s start is still in flight', opts, async () => {
    const f = new PoolFakes(e);
    const release = holdThirdStart(f);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 3 }));
      try {
        const s = await poolWhen(h, (x) => x.available === 2, 'two members available while the third start waits');
        assert.deepEqual(
          s.members.map((m) => m.state).sort(),
          ['Running', 'Running', 'Starting'],
          'the third has not started',
        );
      } finally {
        release();
      }
      await poolWhen(h, readyAt(3), 'Ready once the third started');
      assert.equal(f.starts().length, 3);
      await h.executeUpdate(poolDeleteUpdate);
      assert.equal((await h.result()).phase, 'Deleted');
      await record(h, 'pool-start-in-flight');
    });
  });

  it('at most startWindow member starts are in flight; the others start as slots free', opts, async () => {
    const f = new PoolFakes(e);
    let inFlight = 0;
    let most = 0;
    let releaseAll: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      releaseAll = r;
    });
    // Every start waits until released; a start counts from its call to its end.
    f.holdStart = () => {
      inFlight++;
      most = Math.max(most, inFlight);
      return held.finally(() => inFlight--);
    };
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 5 }), { startWindow: 2 });
      try {
        await pollUntil(() => Promise.resolve(f.starts().length >= 2 ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'two starts called',
        });
        // Long enough for a pool without a window to have called all five.
        await new Promise((r) => setTimeout(r, 1_500));
        assert.equal(f.starts().length, 2, 'only the two starts of the window were called');
        const s = await poolStatus(h);
        assert.equal(s.members.length, 5, 'all five members are planned');
      } finally {
        releaseAll();
      }
      await poolWhen(h, readyAt(5), 'Ready once every start went through the window');
      assert.equal(f.starts().length, 5);
      assert.ok(most <= 2, `at most 2 starts in flight, saw ${most}`);
      await h.executeUpdate(poolDeleteUpdate);
      assert.equal((await h.result()).phase, 'Deleted');
      await record(h, 'pool-start-window');
    });
  });

  it('a member that leaves while its start is in flight is deleted only after the start', opts, async () => {
    const f = new PoolFakes(e);
    const release = holdThirdStart(f);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }));
      await poolWhen(h, readyAt(2), 'Ready at 2');
      await h.executeUpdate(poolScaleUpdate, { args: [{ size: 3 }] });
      const third = (await poolWhen(h, (x) => x.members.length === 3, 'a third member')).members.find(
        (m) => m.state === 'Starting',
      )!.name;
      try {
        await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
        await poolWhen(h, (x) => x.members.find((m) => m.name === third)?.role === 'leaving', 'the third leaving');
        await new Promise((r) => setTimeout(r, 1_000));
        assert.deepEqual(f.deletes(), [], 'not deleted while its start is in flight');
      } finally {
        release();
      }
      await poolWhen(h, (x) => readyAt(2)(x) && !names(x).includes(third), 'deleted after its start');
      assert.deepEqual(f.deletes(), [third]);
      assert.ok(!f.open.has(third), 'its stand-in was deleted, not left running');
    });
  });

  it(
    'due to continue as new with a start in flight, the run goes on telling members to serve and continues once it settles',
    opts,
    async () => {
      const f = new PoolFakes(e);
      const release = holdThirdStart(f);
      await withPool(e, f, async (tq, started) => {
        // Due after its first pass, which launches the three starts; the third is held.
        const h = await startPool(e, tq, started, testPoolSpec({ size: 3 }), { continueAsNewAfterPasses: 1 });
        const first = (await h.describe()).runId;
        try {
          await pollUntil(() => Promise.resolve(f.starts().length === 3 ? true : undefined), {
            timeoutMs: WAIT_MS,
            what: 'three starts called',
          });
          const s = await poolWhen(h, (x) => x.available === 2, 'two members serving while the third start is held');
          assert.deepEqual(s.members.map((m) => m.state).sort(), ['Running', 'Running', 'Starting']);
          assert.equal((await h.describe()).runId, first, 'no continue-as-new while a start is in flight');
        } finally {
          release();
        }
        const moved = await pollUntil(
          async () => {
            const run = (await h.describe()).runId;
            return run !== first ? run : undefined;
          },
          { timeoutMs: WAIT_MS, what: 'the pool continued as new once the third start settled' },
        );
        assert.ok(moved);
        const firstRun = e.env.client.workflow.getHandle(h.workflowId, first);
        const history = await firstRun.fetchHistory();
        assert.ok(
          (history.events ?? []).some((ev) => ev.workflowExecutionContinuedAsNewEventAttributes),
          'the first run ended by continue-as-new',
        );
        assert.ok(
          patchIds(history).includes(POOL_CONTINUE_WHEN_SETTLED_PATCH),
          `markers: ${patchIds(history).join(', ')}`,
        );
        await record(firstRun, 'pool-continue-settled');
        // This run continues as new after every pass (its limit is 1): end it here.
        await h.terminate('test done');
      });
    },
  );

  /** The pass limit of the continue-as-new test: above the passes its setup takes, so the run continues as new only when the test drives it. */
  const PASSES = 40;
  it(
    'continue-as-new carries members serving, spare, Unhealthy and leaving; the pool keeps working',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const spec = testPoolSpec({ size: 3, drainDelayMs: 60_000, replacement: { unhealthyGraceMs: 600_000 } });
        const h = await startPool(e, tq, started, spec, { continueAsNewAfterPasses: PASSES });
        await poolWhen(h, readyAt(3), 'Ready');
        // A serving member leaves (and drains for a minute), a spare is added, a serving member
        // turns Unhealthy (within its grace, so it stays, out of discovery).
        await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
        const leaving = (
          await poolWhen(h, (x) => x.members.some((m) => m.role === 'leaving'), 'a member leaving')
        ).members.find((m) => m.role === 'leaving')!.name;
        await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2, spares: 1 }] });
        const withSpare = await poolWhen(h, (x) => x.available === 2 && x.members.length === 4, 'a spare booted');
        const sick = withSpare.members.find((m) => m.role === 'serving')!.name;
        await f.play(sick, { health: 'False', lastError: 'PROBE_FAILED: refused' });
        const mixed = await poolWhen(
          h,
          (x) => x.available === 2 && x.members.some((m) => m.name === sick && m.healthy === 'False'),
          'the Unhealthy member seen, 2 in discovery',
        );
        const view = (x: PoolStatus): string[] =>
          x.members.map((m) => `${m.name} ${m.role} ${m.healthy} r${m.revision} ${m.createdAt}`).sort();
        assert.deepEqual(new Set(mixed.members.map((m) => m.role)), new Set(['serving', 'spare', 'leaving']));
        assert.equal(
          mixed.members.find((m) => m.name === sick)?.role,
          'spare',
          'the Unhealthy member is out of discovery',
        );
        // Passes (each update is one) until the run continues as new, with no query meanwhile: the
        // test server may never answer a query sent while a run continues as new (and then holds
        // time-skipping locked). Bounded by the pass limit.
        const run = (await h.describe()).runId;
        for (let i = 0; i <= PASSES && (await h.describe()).runId === run; i++) {
          await h.executeUpdate(i % 2 === 0 ? poolPauseUpdate : poolResumeUpdate);
        }
        assert.notEqual((await h.describe()).runId, run, 'the pool continued as new');
        await h.executeUpdate(poolResumeUpdate);
        const carried = await poolStatus(h);
        assert.deepEqual(view(carried), view(mixed), 'the members, roles, health and revisions carried over');
        assert.equal(carried.replacements, mixed.replacements);
        // Still working: the leaving member is deleted after its drain, a failed one is replaced.
        await e.env.sleep(61_000);
        await poolWhen(h, (x) => !names(x).includes(leaving), 'the leaving member gone after its drain');
        assert.ok(f.deletes().includes(leaving));
        const victim = carried.members.find((m) => m.role === 'serving')!.name;
        const startsBefore = f.starts().length;
        await f.play(victim, { state: 'Failed' });
        await poolWhen(h, (x) => x.available === 2 && !names(x).includes(victim), 'replaced after continue-as-new');
        assert.ok(f.starts().length > startsBefore);
      });
    },
  );

  /** The pass limit of the carried-run test: above its first run's setup and its second run's whole life. */
  const CARRIED_PASSES = 20;
  it(
    'a run begun from carried state has the first run’s members and revisions, scales and deletes from them',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const h = await startPool(e, tq, started, testPoolSpec({ size: 1 }), {
          continueAsNewAfterPasses: CARRIED_PASSES,
        });
        await poolWhen(h, readyAt(1), 'Ready at 1');
        await h.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: 'img-b' } }] });
        const mine = await poolWhen(h, (s) => readyAt(1, 2)(s) && s.stableRevision === 2, 'rolled to revision 2');
        const startsBefore = f.starts().length;
        // Passes (each update is one) until the run continues as new; no query meanwhile (see above).
        const first = (await h.describe()).runId;
        for (let i = 0; i <= CARRIED_PASSES && (await h.describe()).runId === first; i++) {
          await h.executeUpdate(i % 2 === 0 ? poolPauseUpdate : poolResumeUpdate);
        }
        const second = (await h.describe()).runId;
        assert.notEqual(second, first, 'the pool continued as new');
        const run = e.env.client.workflow.getHandle<typeof poolWorkflow>(h.workflowId, second);
        await run.executeUpdate(poolResumeUpdate);

        // The second run's input is the first run's state, and its status says so.
        const startedEvent = (await run.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
        const input = JSON.parse(
          Buffer.from(startedEvent!.input!.payloads![0]!.data!).toString('utf8'),
        ) as PoolWorkflowInput;
        assert.deepEqual(
          uncarried(input.carried!).members.map((m) => m.name),
          names(mine),
          'the members are in its input',
        );
        assert.equal(input.carried?.revision, 2);
        const carried = await poolStatus(run);
        const view = (x: PoolStatus) => ({
          members: x.members.map((m) => `${m.name} ${m.role} ${m.healthy} r${m.revision} ${m.host} ${m.createdAt}`),
          revision: x.revision,
          stableRevision: x.stableRevision,
          history: x.history,
          replacements: x.replacements,
          createdAt: x.createdAt,
        });
        assert.deepEqual(view(carried), view(mine), 'members, revisions and history carried over');
        assert.equal(carried.phase, 'Ready');

        // It goes on from there: the carried member stays, one new member of revision 2.
        await run.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
        const scaled = await poolWhen(run, readyAt(2, 2), 'Ready at 2 on revision 2');
        assert.ok(
          names(mine).every((n) => names(scaled).includes(n)),
          'the carried member is kept',
        );
        assert.equal(f.starts().length, startsBefore + 1, 'one start: the carried member was not started again');
        assert.equal(f.starts().at(-1)?.imageKey, 'img-b');
        await run.executeUpdate(poolDeleteUpdate);
        assert.equal((await run.result()).phase, 'Deleted');
        assert.deepEqual(f.deletes().slice(-2).sort(), names(scaled).sort());
        const history = await run.fetchHistory();
        assert.ok(
          !(history.events ?? []).some((ev) => ev.workflowExecutionContinuedAsNewEventAttributes),
          'the second run ended Deleted, not by another continue-as-new',
        );
      });
    },
  );

  it('continue-as-new carries the draining hosts: new members still avoid them', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const h = await startPool(e, tq, started, testPoolSpec({ size: 1 }), { continueAsNewAfterPasses: PASSES });
      await poolWhen(h, readyAt(1), 'Ready');
      await h.signal(poolHostDrainSignal, { host: 'h9', draining: true });
      await poolWhen(h, (x) => x.drainingHosts.includes('h9'), 'h9 draining');
      const run = (await h.describe()).runId;
      for (let i = 0; i <= PASSES && (await h.describe()).runId === run; i++) {
        await h.executeUpdate(i % 2 === 0 ? poolPauseUpdate : poolResumeUpdate);
      }
      assert.notEqual((await h.describe()).runId, run, 'the pool continued as new');
      await h.executeUpdate(poolResumeUpdate);
      assert.deepEqual((await poolStatus(h)).drainingHosts, ['h9']);
      await h.executeUpdate(poolScaleUpdate, { args: [{ size: 2 }] });
      await poolWhen(h, readyAt(2), 'Ready at 2');
      assert.deepEqual(f.starts().at(-1)?.avoidHosts, ['h9'], 'the new run’s member avoids h9');
    });
  });
});
