/**
 * Which members the pool's audit checks against the open workflows (workflows/pool/model.ts
 * auditable): with the `pool-audit-started` marker, not a member whose start waits for a slot or
 * is in flight (it has no workflow yet: a scale-up to 1,000 that outlasted an audit lost every
 * member not yet started, docs/benchmarks.md "N = 1,000"), and a started one only AUDIT_MIN_AGE
 * after its start; runs from before the marker count from the member's creation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MemberRecord } from '../../contracts/pool-state.ts';
import { auditable } from '../../workflows/pool/model.ts';

const MIN = 120_000;
const member = (name: string, over: Partial<MemberRecord> = {}): MemberRecord => ({
  name,
  revision: 1,
  createdAtMs: 0,
  role: 'spare',
  sentServing: false,
  everReady: false,
  ...over,
});

describe('the pool audit', () => {
  const waiting = member('waiting', { starting: true });
  const justStarted = member('just-started', { startedAtMs: 290_000 });
  const startedLongAgo = member('started', { startedAtMs: 10_000 });
  const carried = member('carried'); // a member of a run from before startedAtMs
  const members = [waiting, justStarted, startedLongAgo, carried];

  it('checks only members whose start went through, AUDIT_MIN_AGE after it', () => {
    assert.deepEqual(
      auditable(members, 300_000, MIN, true).map((m) => m.name),
      ['started', 'carried'],
    );
  });

  it('runs from before the marker check every member old enough since its creation, as they did', () => {
    assert.deepEqual(
      auditable(members, 300_000, MIN, false).map((m) => m.name),
      ['waiting', 'just-started', 'started', 'carried'],
    );
  });
});
