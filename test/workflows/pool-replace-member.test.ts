/**
 * The pool's `replaceMember` update (a banned exit reported by an operator or a client) on the
 * time-skipping test server: the real poolWorkflow, stand-in members (test/support/pool-harness.ts).
 * The member leaves discovery at once, a spare takes its place, a replacement is made, the event is
 * counted; the validator refuses (nothing in the history) unknown members, members already leaving,
 * empty or overlong reasons, a pool being deleted, and requests past replacement.requestedPerHour
 * in a sliding hour; continue-as-new carries the count and the hour's requests. Every status the
 * pool published (its memo upserts, from the history) is checked, not a sample of queries.
 *
 * EP_RECORD_POOL_REPLAY=1 writes the first test's history to test/replay/pool-replace-member.sdk-<version>.json.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import {
  poolDeleteUpdate,
  poolPauseUpdate,
  poolReplaceMemberUpdate,
  poolResumeUpdate,
  poolSpecUpdate,
} from '../../contracts/messages.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import { resolvePoolSpec } from '../../contracts/pool.ts';
import type { PoolState } from '../../contracts/pool-state.ts';
import { publishedMemos, TEST_TIMEOUT_MS } from '../support/workflow-harness.ts';
import { recordReplay } from '../support/replay-record.ts';
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

const e = poolFileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };
const HOUR_MS = 3_600_000;

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

const names = (s: PoolStatus): string[] => s.members.map((m) => m.name);

describe('pool replaceMember', () => {
  it(
    'the member leaves discovery at once, a spare takes its place, a replacement boots; counted, not a failure',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const h = await startPool(e, tq, started, testPoolSpec({ size: 2, spares: 1, drainDelayMs: 30_000 }));
        const s = await poolWhen(h, readyAt(2), 'Ready');
        const banned = s.members.find((m) => m.role === 'serving')!.name;
        const spare = s.members.find((m) => m.role === 'spare')!.name;
        const before = (await publishedMemos(h)).length;
        const atMs = Date.parse((await poolStatus(h)).updatedAt);

        const brief = await h.executeUpdate(poolReplaceMemberUpdate, {
          args: [{ name: banned, reason: 'banned by shop.example: 403 on every request' }],
        });
        assert.equal(brief.replacedOnRequest, 1, 'the answer counts it');
        assert.equal(brief.replacements, 0, 'not a failure');
        assert.equal('members' in brief, false, 'a brief answer');

        const now = await poolStatus(h);
        const gone = now.members.find((m) => m.name === banned)!;
        assert.equal(gone.role, 'leaving');
        assert.equal(gone.available, false, 'out of discovery at once');
        assert.equal(gone.condemned, 'replaced on request: banned by shop.example: 403 on every request');

        // The spare serves in its place (one signal round trip), the old one is told to stop.
        const promoted = await poolWhen(
          h,
          (x) => x.available === 2 && x.members.find((m) => m.name === spare)?.role === 'serving',
          'the spare in discovery',
        );
        assert.ok(!promoted.members.some((m) => m.name === banned && m.available));
        assert.deepEqual((await f.view(banned)).served, [true, false], 'told it no longer serves');
        // A replacement (the new spare) boots; the old one is deleted after its drain.
        await poolWhen(h, (x) => x.members.filter((m) => m.role !== 'leaving').length === 3, 'a replacement');
        assert.equal(f.starts().length, 4);
        await e.env.sleep(31_000);
        const after = await poolWhen(h, (x) => readyAt(2)(x) && !names(x).includes(banned), 'whole again');
        assert.ok(f.deletes().includes(banned));
        assert.equal(after.replacedOnRequest, 1);
        assert.equal(after.replacements, 0);
        assert.equal(after.degraded, undefined);

        // Every status published after the request: fewer than 2 in discovery only for the
        // moment between the pass that took the member out and the spare's acknowledgement.
        const memos = (await publishedMemos(h)).slice(before);
        const dips = memos.filter((p) => (p.memo['available'] as number) < 2);
        assert.ok(dips.length > 0, 'the moment at 1 (the spare not acknowledged yet) is among them');
        assert.ok(
          dips.every((p) => p.atMs - atMs < 10_000),
          `below 2 in discovery past 10 s: ${JSON.stringify(dips)}`,
        );
        assert.equal(memos.at(-1)?.memo['available'], 2);
        await h.executeUpdate(poolDeleteUpdate);
        assert.equal((await h.result()).phase, 'Deleted');
        await recordReplay(h, 'pool-replace-member', 'EP_RECORD_POOL_REPLAY');
      });
    },
  );

  it(
    'refused before the history: unknown member, one already leaving, bad reasons, past the hour’s limit, a deleting pool',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const spec = testPoolSpec({ size: 3, replacement: { requestedPerHour: 2 }, drainDelayMs: 60_000 });
        const h = await startPool(e, tq, started, spec);
        const pool = `${spec.entry}/${spec.name}`;
        const s = await poolWhen(h, readyAt(3), 'Ready');
        const [a, b, c] = names(s) as [string, string, string];
        const replace = (name: string, reason: string) =>
          h.executeUpdate(poolReplaceMemberUpdate, { args: [{ name, reason }] });

        assert.equal(
          await refusal(replace('nobody-12345', 'banned')),
          `no member nobody-12345 in pool ${pool}; list them with \`egressctl pool get\``,
        );
        assert.match(await refusal(replace(a, '')), /^reason must say why in 1 to 200 characters .*got 0 characters$/);
        assert.match(await refusal(replace(a, '   ')), /reason must say why in 1 to 200 characters/);
        assert.match(await refusal(replace(a, 'x'.repeat(201))), /got 201 characters$/);
        assert.match(
          await refusal(h.executeUpdate(poolSpecUpdate, { args: [{ replacement: { requestedPerHour: 101 } }] })),
          /replacement\.requestedPerHour/,
        );
        assert.equal(await updateEvents(h), 0, 'no update event in the history');

        const firstAtMs = Date.parse((await poolStatus(h)).updatedAt);
        await replace(a, 'x'.repeat(200));
        assert.match(
          await refusal(replace(a, 'again')),
          new RegExp(`^member ${a} of pool ${pool} is already leaving \\(replaced on request: x+\\)$`),
        );
        await e.env.sleep(60_000);
        await replace(b, 'banned');
        const limited = await refusal(replace(c, 'banned'));
        const next = /the next request is allowed at (\S+);/.exec(limited)?.[1];
        assert.ok(next !== undefined, limited);
        assert.match(limited, /replacement\.requestedPerHour 2\b/);
        assert.match(limited, /raise replacement\.requestedPerHour to allow more$/);
        // The hour slides from the first request: allowed again an hour after it, not after the second.
        const nextMs = Date.parse(next);
        assert.ok(Math.abs(nextMs - (firstAtMs + HOUR_MS)) < 5_000, `next ${next}, first at ${firstAtMs}`);
        assert.equal(await updateEvents(h), 4, 'only the two accepted requests are in the history');
        assert.equal((await poolStatus(h)).replacedOnRequest, 2);

        await e.env.sleep(HOUR_MS - 55_000);
        const brief = await replace(c, 'banned');
        assert.equal(brief.replacedOnRequest, 3, 'allowed once the first request left the hour');

        // 0 refuses every request, naming the field.
        await h.executeUpdate(poolSpecUpdate, { args: [{ replacement: { requestedPerHour: 0 } }] });
        const live = (await poolStatus(h)).members.find((m) => m.role !== 'leaving')!.name;
        assert.match(
          await refusal(replace(live, 'banned')),
          /takes no replacement requests \(replacement\.requestedPerHour is 0\)/,
        );

        await h.executeUpdate(poolDeleteUpdate);
        assert.equal(await refusal(replace(live, 'banned')), `pool ${pool} is being deleted`);
      });
    },
  );

  it(
    'a run carried from a build before it (no count, no limit in its spec) takes requests at the default limit',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const spec = testPoolSpec({ size: 1 });
        const resolved = resolvePoolSpec(spec);
        const { requestedPerHour: _absent, ...replacement } = resolved.replacement;
        const at = new Date().toISOString();
        // The state as the previous build carried it: neither replacedOnRequest nor replaceRequestsMs.
        const carried = {
          rng: 7,
          spec: { ...resolved, replacement },
          revision: 1,
          revisions: [{ revision: 1, template: spec.template, at }],
          members: [],
          paused: false,
          failures: [],
          backoffs: 0,
          replacements: 0,
          rollbacks: 0,
          removedOld: 0,
          deleting: false,
          drainingHosts: [],
          createdAt: at,
        } as unknown as PoolState;
        const h = await startPool(e, tq, started, spec, { carried });
        const s = await poolWhen(h, readyAt(1), 'Ready');
        assert.equal(s.replacedOnRequest, 0);
        assert.equal(s.spec.replacement.requestedPerHour, 6, 'the default, shown in the spec');
        const brief = await h.executeUpdate(poolReplaceMemberUpdate, {
          args: [{ name: s.members[0]!.name, reason: 'banned' }],
        });
        assert.equal(brief.replacedOnRequest, 1);
        await poolWhen(
          h,
          (x) => readyAt(1)(x) && x.members.length === 1 && x.members[0]!.name !== s.members[0]!.name,
          'replaced',
        );
      });
    },
  );

  /** The pass limit: above the passes the setup takes, so the run continues as new when the test drives it. */
  const PASSES = 30;
  it('continue-as-new carries the count and the hour’s requests', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const spec = testPoolSpec({ size: 2, replacement: { requestedPerHour: 1 } });
      const h = await startPool(e, tq, started, spec, { continueAsNewAfterPasses: PASSES });
      const s = await poolWhen(h, readyAt(2), 'Ready');
      await h.executeUpdate(poolReplaceMemberUpdate, { args: [{ name: s.members[0]!.name, reason: 'banned' }] });
      await poolWhen(h, (x) => readyAt(2)(x) && x.members.length === 2, 'replaced');
      // Passes (each update is one) until the run continues as new; no query meanwhile (pool.test.ts says why).
      const run = (await h.describe()).runId;
      for (let i = 0; i <= PASSES && (await h.describe()).runId === run; i++) {
        await h.executeUpdate(i % 2 === 0 ? poolPauseUpdate : poolResumeUpdate);
      }
      assert.notEqual((await h.describe()).runId, run, 'the pool continued as new');
      const resumed = await h.executeUpdate(poolResumeUpdate);
      assert.equal(resumed.replacedOnRequest, 1, 'the count carried');
      const other = (await poolStatus(h)).members[0]!.name;
      assert.match(
        await refusal(h.executeUpdate(poolReplaceMemberUpdate, { args: [{ name: other, reason: 'banned' }] })),
        /replaced 1 member on request in the last hour/,
        "the hour's request carried",
      );
    });
  });
});
