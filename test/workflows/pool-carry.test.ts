/**
 * What a pool carries over continue-as-new, on the time-skipping test server with the real
 * poolWorkflow and stand-in members: the continue-as-new input holds each member in a few dozen
 * bytes beyond its name and addresses (workflows/pool/carry.ts), not a full record with its field
 * names, and the next run reads it back to the same members and goes on from them.
 *
 * EP_RECORD_POOL_REPLAY=1 writes the second run's history to test/replay/pool-carried-packed.sdk-<version>.json.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { poolDeleteUpdate, poolPauseUpdate, poolResumeUpdate } from '../../contracts/messages.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import type { PoolWorkflowInput } from '../../contracts/pool-state.ts';
import type { poolWorkflow } from '../../workflows/pool/index.ts';
import { recordReplay } from '../support/replay-record.ts';
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
/** The pass limit: above the passes the setup takes, so the run continues as new when the test drives it. */
const PASSES = 40;
/**
 * Bytes a member may add to the carried state. A member here: its name (about 26 characters),
 * revision, role, flags, creation, start and role times, and its report: Running, True, two
 * times, port, host, address. Packed that is about 110 bytes; a record with its report, field
 * names and all, was about 380 (450 with an exit IP).
 */
const CARRIED_BYTES_PER_MEMBER = 160;

/** The continue-as-new input of a run that ended so. */
async function continuedWith(h: WorkflowHandle): Promise<{ input: PoolWorkflowInput; bytes: number }> {
  const events = (await h.fetchHistory()).events ?? [];
  const can = events.find((ev) => ev.workflowExecutionContinuedAsNewEventAttributes);
  const data = can?.workflowExecutionContinuedAsNewEventAttributes?.input?.payloads?.[0]?.data;
  assert.ok(data, 'the run continued as new with an input');
  return { input: JSON.parse(Buffer.from(data).toString('utf8')) as PoolWorkflowInput, bytes: data.length };
}

const view = (x: PoolStatus): string[] =>
  x.members.map(
    (m) => `${m.name} ${m.role} ${m.state}/${m.healthy} r${m.revision} ${m.host} ${m.address} ${m.createdAt}`,
  );

describe('pool carried state', () => {
  it(
    'continue-as-new carries each member in under 160 bytes, and the next run has the same members',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const f = new PoolFakes(e);
      await withPool(e, f, async (tq, started) => {
        const spec = testPoolSpec({ size: 8, spares: 2 });
        const h = await startPool(e, tq, started, spec, { continueAsNewAfterPasses: PASSES });
        const before = await poolWhen(h, (s) => readyAt(8)(s) && s.members.length === 10, 'Ready with 2 spares');
        // Passes (each update is one) until the run continues as new, with no query meanwhile: the
        // test server may never answer a query sent while a run continues as new.
        const first = (await h.describe()).runId;
        for (let i = 0; i <= PASSES && (await h.describe()).runId === first; i++) {
          await h.executeUpdate(i % 2 === 0 ? poolPauseUpdate : poolResumeUpdate);
        }
        const second = (await h.describe()).runId;
        assert.notEqual(second, first, 'the pool continued as new');

        const { input, bytes } = await continuedWith(e.env.client.workflow.getHandle(h.workflowId, first));
        const carried = input.carried!;
        const { members: _m, packedMembers: _p, ...withoutMembers } = carried;
        const withoutBytes = Buffer.byteLength(JSON.stringify({ ...input, carried: withoutMembers }));
        const perMember = (bytes - withoutBytes) / before.members.length;
        assert.ok(
          perMember <= CARRIED_BYTES_PER_MEMBER,
          `${perMember.toFixed(0)} bytes a member carried (${bytes} in all for ${before.members.length} members)`,
        );

        const run = e.env.client.workflow.getHandle<typeof poolWorkflow>(h.workflowId, second);
        await run.executeUpdate(poolResumeUpdate);
        const after = await poolStatus(run);
        assert.deepEqual(view(after), view(before), 'the same members, roles, states, hosts and addresses');
        assert.equal(after.phase, 'Ready');
        // It goes on from them: a Failed member is replaced, the others kept.
        const victim = after.members.find((m) => m.role === 'serving')!.name;
        const startsBefore = f.starts().length;
        await f.play(victim, { state: 'Failed', lastError: 'KVM2_DOMAIN_GONE: gone' });
        const replaced = await poolWhen(
          run,
          (s) => readyAt(8)(s) && s.members.length === 10 && !s.members.some((m) => m.name === victim),
          'the Failed member replaced',
        );
        assert.equal(f.starts().length, startsBefore + 1, 'one start: the carried members were not started again');
        assert.equal(replaced.replacements, before.replacements + 1);
        await run.executeUpdate(poolDeleteUpdate);
        assert.equal((await run.result()).phase, 'Deleted');
        await recordReplay(run, 'pool-carried-packed', 'EP_RECORD_POOL_REPLAY');
      });
    },
  );
});
