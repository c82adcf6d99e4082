/**
 * Failover that clients do not notice, on the time-skipping test server (the real poolWorkflow,
 * stand-in members: test/support/pool-harness.ts). A member whose report says its host does not
 * answer leaves discovery at once, whatever its Healthy condition still says and before any grace;
 * a spare takes its place at once; the host rule replaces it at hostFailureGraceMs, not before.
 * Every status the pool published (its memo upserts, read from the history) is checked, so a dip
 * that no query happened to sample cannot pass.
 *
 * EP_RECORD_POOL_REPLAY=1 writes the first test's history to test/replay/pool-host-silent-spare.sdk-<version>.json.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PoolStatus } from '../../contracts/pool.ts';
import { poolDeleteUpdate } from '../../contracts/messages.ts';
import { publishedMemos, TEST_TIMEOUT_MS } from '../support/workflow-harness.ts';
import { recordReplay } from '../support/replay-record.ts';
import type { PublishedMemo } from '../support/workflow-harness.ts';
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

const names = (s: PoolStatus): string[] => s.members.map((m) => m.name);
const available = (p: PublishedMemo): number => p.memo['available'] as number;

describe('pool failover', () => {
  it(
    'a member whose host stops answering leaves discovery at once (still Healthy), a spare takes its place at once, replaced at the grace',
    opts,
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        // Long graces: what takes the member out is its host not answering, not a grace running out.
        const spec = testPoolSpec({
          size: 2,
          spares: 1,
          replacement: { hostFailureGraceMs: 60_000, unhealthyGraceMs: 600_000 },
        });
        const h = await startPool(e, tq, started, spec);
        const s = await poolWhen(h, readyAt(2), 'Ready');
        const dead = s.members.find((m) => m.role === 'serving')!.name;
        const spare = s.members.find((m) => m.role === 'spare')!.name;
        const before = (await publishedMemos(h)).length;
        const since = (await poolStatus(h)).updatedAt; // the pool's clock
        const sinceMs = Date.parse(since);
        // The member's first read that its host did not answer: its Healthy condition is still True
        // (the probes' hysteresis has not run out), only hostUnreachableSince says so.
        await f.play(dead, { hostUnreachableSince: since, lastError: 'SSH_CONNECT_TIMEOUT: no answer' });

        const out = await poolWhen(
          h,
          (x) => x.members.some((m) => m.name === dead && m.hostUnreachableSince === since),
          'the report seen',
        );
        const d = out.members.find((m) => m.name === dead)!;
        assert.equal(d.healthy, 'True', 'its health still says True');
        assert.equal(d.available, false, 'out of discovery at once, before any grace');
        // The spare in discovery without time passing (one signal round trip), the dead one told to stop.
        const whole = await poolWhen(
          h,
          (x) => x.available === 2 && x.members.find((m) => m.name === spare)?.available === true,
          'the spare in discovery',
        );
        assert.ok(Date.parse(whole.updatedAt) - sinceMs < 10_000, `N again at ${whole.updatedAt}, failure ${since}`);
        assert.deepEqual((await f.view(dead)).served, [true, false], 'the dead member told it no longer serves');
        assert.equal(f.starts().length, 3, 'no replacement before the grace');

        await e.env.sleep(50_000);
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(f.starts().length, 3, 'still none within hostFailureGraceMs');
        await e.env.sleep(11_000);
        const after = await poolWhen(
          h,
          (x) => readyAt(2)(x) && x.members.length === 3 && !names(x).includes(dead),
          'replaced after the grace',
        );
        assert.equal(after.replacements, 1);
        assert.ok(f.starts()[3]!.avoidHosts?.includes(d.host!), 'the replacement avoids the dead host');

        // Every published status from the failure on: below 2 only within 10 s of it.
        const memos = (await publishedMemos(h)).slice(before);
        assert.ok(memos.length > 0);
        const dips = memos.filter((p) => available(p) < 2);
        // The pass that took it out published 1 (the spare had not acknowledged yet): the check sees
        // a dip that lasted one signal round trip.
        assert.ok(dips.length > 0, 'the moment at 1 is among the published statuses');
        assert.ok(
          dips.every((p) => p.atMs - sinceMs < 10_000),
          `below 2 in discovery past 10 s: ${JSON.stringify(dips)}`,
        );
        assert.equal(available(memos.at(-1)!), 2);
        await h.executeUpdate(poolDeleteUpdate);
        assert.equal((await h.result()).phase, 'Deleted');
        await recordReplay(h, 'pool-host-silent-spare', 'EP_RECORD_POOL_REPLAY');
      });
    },
  );

  it('without a spare: out of discovery at once, back when its host answers again within the grace', opts, async () => {
    const f = new PoolFakes(e);
    await withPool(e, f, async (tq, started) => {
      const spec = testPoolSpec({ size: 2, replacement: { hostFailureGraceMs: 60_000, unhealthyGraceMs: 600_000 } });
      const h = await startPool(e, tq, started, spec);
      const s = await poolWhen(h, readyAt(2), 'Ready');
      const dead = s.members[0]!.name;
      const since = (await poolStatus(h)).updatedAt;
      await f.play(dead, { hostUnreachableSince: since, lastError: 'LIBVIRT_KEEPALIVE_TIMEOUT: no answer' });
      await poolWhen(
        h,
        (x) => x.available === 1 && x.members.some((m) => m.name === dead && m.role === 'spare'),
        'out of discovery, demoted',
      );
      assert.deepEqual((await f.view(dead)).served, [true, false]);
      await e.env.sleep(20_000);
      // Its host answers again: it serves again; nothing was replaced.
      await f.play(dead, { hostUnreachableSince: null });
      await poolWhen(h, readyAt(2), 'Ready again');
      assert.deepEqual((await f.view(dead)).served, [true, false, true]);
      assert.equal(f.starts().length, 2, 'nothing replaced');
      assert.equal((await poolStatus(h)).replacements, 0);
    });
  });
});
