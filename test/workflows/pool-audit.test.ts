/**
 * The pool's audit on the time-skipping test server with stand-in members
 * (test/support/pool-harness.ts): every AUDIT_INTERVAL_MS the pool lists its members' open
 * workflows and marks one it knows but that is no longer open as ended (replaced), and with the
 * `pool-audit-started` marker it checks only members whose start went through
 * (test/unit/pool-audit.test.ts has the rule).
 *
 * EP_RECORD_POOL_REPLAY=1 writes the pool's history to
 * test/replay/pool-audit-started.sdk-<version>.json (replayed by test/unit/replay.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { poolDeleteUpdate } from '../../contracts/messages.ts';
import { AUDIT_INTERVAL_MS } from '../../workflows/pool/effects.ts';
import { pollUntil } from '../support/temporal.ts';
import { PoolFakes, poolFileEnv, poolWhen, readyAt, startPool, testPoolSpec } from '../support/pool-harness.ts';
import { TEST_TIMEOUT_MS, WAIT_MS, withWorker } from '../support/workflow-harness.ts';
import { recordReplay } from '../support/replay-record.ts';

const e = poolFileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };

/** Writes the run's history as a replay file when asked to (EP_RECORD_POOL_REPLAY=1). */
const record = (h: WorkflowHandle, name: string): Promise<void> => recordReplay(h, name, 'EP_RECORD_POOL_REPLAY');

describe('the pool audit', () => {
  it('replaces a member whose workflow is gone, found by the audit', opts, async () => {
    const f = new PoolFakes(e);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        f.taskQueue = tq;
        f.started = started;
        const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }));
        const ready = await poolWhen(h, readyAt(2), 'Ready at 2');
        // One member's workflow ends without a word to the pool (terminated).
        const gone = ready.members[0]!.name;
        await f.member(gone).terminate('gone behind the pool');
        f.open.delete(gone);
        const audits = (): number => f.calls.filter((c) => c.activity === 'listPoolMembers').length;
        const before = audits();
        await e.env.sleep(AUDIT_INTERVAL_MS + 1_000);
        await pollUntil(() => Promise.resolve(audits() > before ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'an audit',
        });
        const after = await poolWhen(
          h,
          (s) => readyAt(2)(s) && !s.members.some((m) => m.name === gone),
          'Ready at 2 without the member gone',
        );
        assert.equal(after.replacements, 1);
        assert.equal(f.starts().length, 3, 'one replacement started');
        await h.executeUpdate(poolDeleteUpdate);
        assert.equal((await h.result()).phase, 'Deleted');
        await record(h, 'pool-audit-started');
      },
      started,
    );
  });
});
