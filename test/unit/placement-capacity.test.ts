/**
 * Capacity-aware placement (workflows/proxy/placement.ts): a host takes a proxy only when its VM
 * fits the host's memory and vCPUs within the overcommit ratios, its free memory and its
 * `maxProxies`; when none fits, the reason names each host and what it lacks. A survey without
 * capacity figures (recorded before they were read) decides exactly as placement did before.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostSurvey } from '../../contracts/fleet.ts';
import { hostLacks, PLACEMENT_NEED_BYTES, pickHost } from '../../workflows/proxy/placement.ts';

const GiB = 1024 ** 3;
const VM = { memoryMiB: 1024, vcpus: 1 };

/** A reachable host with room in its pool and no capacity figures (an old survey). */
function bare(name: string, over: Partial<HostSurvey> = {}): HostSurvey {
  return { entry: 'e1', host: name, weight: 1, reachable: true, poolAvailableBytes: 100 * GiB, proxies: 0, ...over };
}

/** A host as a capacity-reading survey reports it: 8 GiB, 2 CPUs, nothing running. */
function sized(name: string, over: Partial<HostSurvey> = {}): HostSurvey {
  return bare(name, {
    memoryTotalMiB: 8192,
    memoryFreeMiB: 8000,
    memoryCommittedMiB: 0,
    cpus: 2,
    vcpusCommitted: 0,
    memoryOvercommit: 1,
    cpuOvercommit: 4,
    ...over,
  });
}

describe('hostLacks', () => {
  it('memory: committed + need may reach total × overcommit, not pass it', () => {
    assert.deepEqual(hostLacks(sized('h', { memoryCommittedMiB: 7168 }), PLACEMENT_NEED_BYTES, VM), []);
    const over = hostLacks(sized('h', { memoryCommittedMiB: 7169 }), PLACEMENT_NEED_BYTES, VM);
    assert.deepEqual(over, ['memory: 7169 of 8192 MiB committed (8192 MiB × 1), 1024 more do not fit']);
    // × 1.5: 12288 MiB may be committed.
    const ratio = { memoryOvercommit: 1.5, memoryCommittedMiB: 11264 };
    assert.deepEqual(hostLacks(sized('h', ratio), PLACEMENT_NEED_BYTES, VM), []);
    assert.equal(hostLacks(sized('h', { ...ratio, memoryCommittedMiB: 11265 }), PLACEMENT_NEED_BYTES, VM).length, 1);
  });

  it('free memory: the VM must fit in what the host has free now, whatever the ratio', () => {
    const h = sized('h', { memoryOvercommit: 4, memoryFreeMiB: 1023 });
    assert.deepEqual(hostLacks(h, PLACEMENT_NEED_BYTES, VM), ['1023 MiB of memory free, 1024 needed']);
    assert.deepEqual(hostLacks({ ...h, memoryFreeMiB: 1024 }, PLACEMENT_NEED_BYTES, VM), []);
  });

  it('vCPUs: committed + need may reach CPUs × overcommit (default 4 when the survey lacks the ratio)', () => {
    assert.deepEqual(hostLacks(sized('h', { vcpusCommitted: 7 }), PLACEMENT_NEED_BYTES, VM), []);
    assert.deepEqual(hostLacks(sized('h', { vcpusCommitted: 8 }), PLACEMENT_NEED_BYTES, VM), [
      'vCPUs: 8 of 8 committed (2 CPUs × 4), 1 more do not fit',
    ]);
    assert.deepEqual(
      hostLacks(sized('h', { vcpusCommitted: 2, cpuOvercommit: 1 }), PLACEMENT_NEED_BYTES, { memoryMiB: 1, vcpus: 1 }),
      ['vCPUs: 2 of 2 committed (2 CPUs × 1), 1 more do not fit'],
    );
    const noRatio = sized('h', { vcpusCommitted: 8 });
    delete noRatio.cpuOvercommit;
    assert.equal(hostLacks(noRatio, PLACEMENT_NEED_BYTES, VM).length, 1);
  });

  it('maxProxies: a host holding that many of our proxies takes no more (0: none)', () => {
    assert.deepEqual(hostLacks(sized('h', { proxies: 2, maxProxies: 3 }), PLACEMENT_NEED_BYTES, VM), []);
    assert.deepEqual(hostLacks(sized('h', { proxies: 3, maxProxies: 3 }), PLACEMENT_NEED_BYTES, VM), [
      '3 of 3 proxies',
    ]);
    assert.deepEqual(hostLacks(bare('h', { maxProxies: 0 }), PLACEMENT_NEED_BYTES), ['0 of 0 proxies']);
  });

  it('lists every shortage of a host at once', () => {
    const h = sized('h', {
      poolAvailableBytes: 5,
      proxies: 1,
      maxProxies: 1,
      memoryCommittedMiB: 8192,
      vcpusCommitted: 8,
    });
    assert.equal(hostLacks(h, PLACEMENT_NEED_BYTES, VM).length, 4);
  });

  it('a survey without capacity figures, or a call without the VM, never keeps a proxy off', () => {
    assert.deepEqual(hostLacks(bare('h'), PLACEMENT_NEED_BYTES, { memoryMiB: 1_000_000, vcpus: 1000 }), []);
    assert.deepEqual(hostLacks(sized('h', { memoryCommittedMiB: 8192, vcpusCommitted: 8 }), PLACEMENT_NEED_BYTES), []);
  });
});

describe('pickHost and cordoned hosts', () => {
  it('never picks a cordoned host, however empty and roomy it is', () => {
    const survey = [sized('h1', { proxies: 0, cordoned: true }), sized('h2', { proxies: 7 })];
    for (let i = 0; i < 50; i++) assert.equal(pickHost(survey, `p${i}`, VM).host, 'h2');
  });

  it('only cordoned hosts reachable: a capacity wait whose reason names the cordon', () => {
    const pick = pickHost(
      [sized('h1', { cordoned: true }), { entry: 'e1', host: 'h2', weight: 1, reachable: false, error: 'X: down' }],
      'p',
      VM,
    );
    assert.ok(pick.host === undefined && pick.capacity);
    assert.equal(
      pick.reason,
      'every reachable host is cordoned; uncordon one or add a host (h1: cordoned; h2: unreachable)',
    );
  });

  it('the uncordoned hosts lack room: the reason names what they lack and the cordoned ones', () => {
    const pick = pickHost([sized('h1', { cordoned: true }), sized('h2', { proxies: 2, maxProxies: 2 })], 'p', VM);
    assert.ok(pick.host === undefined && pick.capacity);
    assert.equal(pick.reason, 'no host has room for a VM of 1024 MiB and 1 vCPUs (h2: 2 of 2 proxies; h1: cordoned)');
  });

  it('cordoned: false, or no flag (surveys before cordons), schedules as before', () => {
    const survey = [sized('h1', { cordoned: false }), sized('h2')];
    for (let i = 0; i < 50; i++) {
      assert.deepEqual(pickHost(survey, `p${i}`, VM), pickHost([sized('h1'), sized('h2')], `p${i}`, VM));
    }
  });
});

describe('pickHost with capacity', () => {
  it('skips a host where the VM does not fit and spreads over the others as before', () => {
    const survey = [sized('h1', { memoryCommittedMiB: 7500 }), sized('h2'), sized('h3')];
    const got = new Set<string>();
    for (let i = 0; i < 60; i++) {
      const pick = pickHost(survey, `p${i}`, VM);
      assert.ok(pick.host !== undefined);
      got.add(pick.host);
    }
    assert.deepEqual([...got].sort(), ['h2', 'h3']);
    // The same survey without the VM's needs: h1 takes its share again.
    assert.ok(Array.from({ length: 60 }, (_, i) => pickHost(survey, `p${i}`).host).includes('h1'));
  });

  it('the least loaded host that fits wins, even when a less loaded one is full', () => {
    const survey = [sized('h1', { proxies: 0, vcpusCommitted: 8 }), sized('h2', { proxies: 5 })];
    for (let i = 0; i < 20; i++) assert.equal(pickHost(survey, `p${i}`, VM).host, 'h2');
  });

  it('none fits: a capacity reason naming each host and what it lacks, unreachable hosts included', () => {
    const big = { memoryMiB: 9000, vcpus: 2 };
    const pick = pickHost(
      [
        sized('h1'),
        sized('h2', { proxies: 4, maxProxies: 4 }),
        { entry: 'e1', host: 'h3', weight: 1, reachable: false, error: 'X: down' },
      ],
      'p',
      big,
    );
    assert.equal(pick.host, undefined);
    assert.ok(pick.host === undefined && pick.capacity);
    assert.equal(
      pick.reason,
      'no host has room for a VM of 9000 MiB and 2 vCPUs (' +
        'h1: memory: 0 of 8192 MiB committed (8192 MiB × 1), 9000 more do not fit, 8000 MiB of memory free, 9000 needed; ' +
        'h2: 4 of 4 proxies, memory: 0 of 8192 MiB committed (8192 MiB × 1), 9000 more do not fit, 8000 MiB of memory free, 9000 needed; ' +
        'h3: unreachable)',
    );
  });

  it('only pool space short: the reason placement has always given (recorded histories keep it)', () => {
    const pick = pickHost([sized('h1', { poolAvailableBytes: 10 }), bare('h2', { poolAvailableBytes: 20 })], 'p', VM);
    assert.ok(pick.host === undefined);
    assert.equal(
      pick.reason,
      `no host has ${PLACEMENT_NEED_BYTES} bytes free in its pool (h1: 10 bytes free; h2: 20 bytes free)`,
    );
  });

  it('pool space short on one host and memory on the other: both named', () => {
    const pick = pickHost([sized('h1', { poolAvailableBytes: 10 }), sized('h2', { memoryFreeMiB: 5 })], 'p', VM);
    assert.ok(pick.host === undefined);
    assert.match(
      pick.reason,
      /^no host has room for a VM of 1024 MiB and 1 vCPUs \(h1: pool: 10 bytes free, \d+ needed; h2: 5 MiB of memory free, 1024 needed\)$/,
    );
  });

  it('an old survey (no capacity fields) decides exactly as without the VM, for any VM', () => {
    const survey = [
      bare('h1', { proxies: 3 }),
      bare('h2', { proxies: 2, weight: 2 }),
      bare('h3', { poolAvailableBytes: 1 }),
    ];
    for (let i = 0; i < 200; i++) {
      assert.deepEqual(pickHost(survey, `p${i}`, { memoryMiB: 65536, vcpus: 64 }), pickHost(survey, `p${i}`));
    }
    const full = [bare('h1', { poolAvailableBytes: 1 })];
    assert.deepEqual(pickHost(full, 'p', VM), pickHost(full, 'p'));
  });
});
