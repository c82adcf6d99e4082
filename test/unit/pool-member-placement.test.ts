/**
 * Where a pool member may go (workflows/proxy/phases.ts memberSurvey): never an avoided host;
 * among reachable hosts with room for its VM, those with the fewest of its pool (in turn by
 * spreadSlot), under maxPerHost; never a cordoned host; a fuller host with room rather than a
 * wait; a proxy outside a pool sees every host.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostSurvey } from '../../contracts/fleet.ts';
import { memberSurvey } from '../../workflows/proxy/phases.ts';
import { pickHost } from '../../workflows/proxy/placement.ts';
import type { PoolMembership } from '../../contracts/proxy-run.ts';

const GiB = 1024 ** 3;
const host = (name: string, o: Partial<HostSurvey> = {}): HostSurvey => ({
  entry: 'e',
  host: name,
  weight: 1,
  reachable: true,
  poolAvailableBytes: 100 * GiB,
  memoryTotalMiB: 8192,
  memoryFreeMiB: 8192,
  memoryCommittedMiB: 0,
  cpus: 4,
  vcpusCommitted: 0,
  ...o,
});
const input = (pool?: Partial<PoolMembership>) => ({
  name: 'p-abcde',
  entry: 'e',
  imageKey: 'k',
  ...(pool === undefined ? {} : { pool: { workflowId: 'pool/e/p', serving: false, ...pool } }),
});
const names = (s: HostSurvey[]): string[] => s.map((h) => h.host);
const VM = { vcpus: 1, memoryMiB: 1024, diskGiB: 2 };

describe('memberSurvey', () => {
  const survey = [host('h1'), host('h2'), host('h3')];

  it('outside a pool: every host', () => {
    assert.deepEqual(names(memberSurvey(survey, input(), VM)), ['h1', 'h2', 'h3']);
  });

  it('never an avoided host; the fewest of the pool among the rest', () => {
    const got = memberSurvey(survey, input({ avoidHosts: ['h1'], hostCounts: { h2: 2, h3: 1 } }), VM);
    assert.deepEqual(names(got), ['h3']);
  });

  it('members created together take the tied hosts in turn', () => {
    const slots = [0, 1, 2, 3].map((spreadSlot) =>
      names(memberSurvey(survey, input({ hostCounts: {}, spreadSlot }), VM)),
    );
    assert.deepEqual(slots, [['h1'], ['h2'], ['h3'], ['h1']]);
  });

  it('a host without room for the VM is not preferred: a fuller host with room is', () => {
    const tight = [host('h1', { memoryFreeMiB: 512 }), host('h2')];
    const got = memberSurvey(tight, input({ hostCounts: { h2: 3 } }), VM);
    assert.deepEqual(names(got), ['h2']);
  });

  it('a cordoned host is never preferred, even with the fewest of the pool', () => {
    const cordon = [host('h1', { cordoned: true }), host('h2'), host('h3')];
    const got = memberSurvey(cordon, input({ hostCounts: { h2: 2, h3: 3 } }), VM);
    assert.deepEqual(names(got), ['h2']);
    const slots = [0, 1, 2].map((spreadSlot) => names(memberSurvey(cordon, input({ hostCounts: {}, spreadSlot }), VM)));
    assert.deepEqual(slots, [['h2'], ['h3'], ['h2']]);
  });

  it('only cordoned hosts open: the member waits, and the reason names the cordon', () => {
    const cordon = [host('h1', { cordoned: true }), host('h2', { cordoned: true }), host('h3')];
    const m = input({ avoidHosts: ['h3'], hostCounts: {} });
    const pick = pickHost(memberSurvey(cordon, m, VM), m.name, VM);
    assert.ok(pick.host === undefined);
    assert.match(pick.reason, /cordoned.*h1: cordoned; h2: cordoned/);
  });

  it('every host at maxPerHost: none (the member waits for room)', () => {
    assert.deepEqual(
      names(memberSurvey(survey, input({ hostCounts: { h1: 1, h2: 1, h3: 1 }, maxPerHost: 1 }), VM)),
      [],
    );
  });
});
