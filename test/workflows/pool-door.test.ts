/**
 * The pool's door report (poolDoorSignal, sent by bin/door on every change of its exits) on the
 * time-skipping test server, with the real poolWorkflow and stand-in members: the status shows the
 * last report (address, exits and HAProxy's up or down), a malformed report is dropped, and
 * continue-as-new carries it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { poolDoorSignal, poolPauseUpdate, poolResumeUpdate } from '../../contracts/messages.ts';
import type { DoorReport } from '../../contracts/pool.ts';
import { TEST_TIMEOUT_MS } from '../support/workflow-harness.ts';
import {
  PoolFakes,
  poolFileEnv,
  poolStatus,
  poolWhen,
  readyAt,
  startPool,
  testPoolSpec,
  withPool,
} from '../support/pool-harness.ts';

const e = poolFileEnv();
const PASSES = 30;

describe('pool door report', () => {
  it(
    'the status shows the last report, drops a malformed one, and carries it across continue-as-new',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const h = await startPool(e, tq, started, testPoolSpec({ size: 2 }), { continueAsNewAfterPasses: PASSES });
        const s = await poolWhen(h, readyAt(2), 'Ready');
        assert.equal(s.door, undefined, 'no door reported yet');
        const [a, b] = s.members.map((m) => m.name) as [string, string];
        const report: DoorReport = {
          listen: '127.0.0.1:3130',
          exits: [
            { name: a, role: 'serving', up: true },
            { name: b, role: 'serving', up: false },
          ],
          at: '2026-12-06T12:00:00.000Z',
        };
        await h.signal(poolDoorSignal, report);
        assert.deepEqual((await poolWhen(h, (x) => x.door !== undefined, 'the door shown')).door, report);
        // Not a report: dropped, the last good one stays.
        await h.signal(poolDoorSignal, { listen: 42, exits: 'none' } as unknown as DoorReport);
        await h.signal(poolDoorSignal, {
          ...report,
          exits: [{ name: '../x', role: 'serving', up: true }, report.exits[0]!],
        });
        assert.deepEqual(
          (await poolStatus(h)).door?.exits,
          [report.exits[0]],
          'an exit that is not a member name is dropped',
        );
        const run = (await h.describe()).runId;
        for (let i = 0; i <= PASSES && (await h.describe()).runId === run; i++) {
          await h.executeUpdate(i % 2 === 0 ? poolPauseUpdate : poolResumeUpdate);
        }
        assert.notEqual((await h.describe()).runId, run, 'the pool continued as new');
        assert.deepEqual((await poolStatus(h)).door?.exits, [report.exits[0]], 'carried');
      });
    },
  );
});
