/**
 * The proxy lifecycle's pure helpers (workflows/proxy/placement.ts and status.ts): placement,
 * probe hysteresis, the H3 address grace and the capacity backoff, each at and around its bounds.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { ProbeOutcome, ProxyStatus } from '../../contracts/proxy.ts';
import { PLACEMENT_NEED_BYTES, capacityBackoffMs, pickHost } from '../../workflows/proxy/placement.ts';
import { applyAddress, applyProbe, initialStatus, setCondition } from '../../workflows/proxy/status.ts';

const GiB = 1024 ** 3;
const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:01:00.000Z';
const T2 = '2026-01-01T00:02:00.000Z';

function host(name: string, over: Partial<HostSurvey> = {}): HostSurvey {
  return { entry: 'e1', host: name, weight: 1, reachable: true, poolAvailableBytes: 100 * GiB, proxies: 0, ...over };
}

/** How many of `n` distinct proxy names each host gets. */
function shares(survey: HostSurvey[], n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const pick = pickHost(survey, `proxy-${i}`);
    assert.ok(pick.host !== undefined);
    out[pick.host] = (out[pick.host] ?? 0) + 1;
  }
  return out;
}

describe('pickHost', () => {
  it('no reachable host: the reason names each host and its error; not a capacity wait', () => {
    const pick = pickHost(
      [host('h1', { reachable: false, error: 'SSH_CONNECT: refused' }), host('h2', { reachable: false })],
      'p',
    );
    assert.equal(pick.host, undefined);
    assert.ok(pick.host === undefined);
    assert.equal(pick.reason, 'no reachable host (h1: SSH_CONNECT: refused; h2: unreachable)');
    assert.equal(pick.capacity, false);
  });

  it('no host with room: a capacity wait whose reason gives each pool free space', () => {
    const pick = pickHost([host('h1', { poolAvailableBytes: 5 }), host('h2', { poolAvailableBytes: undefined })], 'p');
    assert.ok(pick.host === undefined);
    assert.equal(pick.capacity, true);
    assert.equal(
      pick.reason,
      `no host has ${PLACEMENT_NEED_BYTES} bytes free in its pool (h1: 5 bytes free; h2: 0 bytes free)`,
    );
  });

  it('free space: exactly the need fits, one byte less does not', () => {
    const survey = [
      host('h1', { poolAvailableBytes: PLACEMENT_NEED_BYTES - 1 }),
      host('h2', { poolAvailableBytes: PLACEMENT_NEED_BYTES }),
    ];
    for (let i = 0; i < 50; i++) assert.equal(pickHost(survey, `p${i}`).host, 'h2');
    assert.equal(pickHost([host('h1')], 'p', undefined, 200 * GiB).host, undefined, 'needBytes is honoured');
  });

  it('an unreachable host is never picked, however empty', () => {
    const survey = [host('h1', { reachable: false, proxies: 0 }), host('h2', { proxies: 30 })];
    for (let i = 0; i < 50; i++) assert.equal(pickHost(survey, `p${i}`).host, 'h2');
  });

  it('load per weight: a host one proxy or more ahead of the least loaded is not picked', () => {
    const survey = [host('h1', { proxies: 3 }), host('h2', { proxies: 3 }), host('h3', { proxies: 4 })];
    const s = shares(survey, 400);
    assert.equal(s['h3'], undefined);
    assert.ok((s['h1'] ?? 0) > 100 && (s['h2'] ?? 0) > 100, JSON.stringify(s));
    // Weight 4 with 4 proxies is as loaded as weight 1 with 1; weight 4 with 8 is not.
    assert.equal(pickHost([host('big', { weight: 4, proxies: 8 }), host('small', { proxies: 1 })], 'x').host, 'small');
  });

  it('ties spread by rendezvous in proportion to the weights', () => {
    const even = shares([host('h1'), host('h2')], 2000);
    assert.ok(Math.abs((even['h1'] ?? 0) / 2000 - 0.5) < 0.05, JSON.stringify(even));
    const weighted = shares([host('big', { weight: 4, proxies: 4 }), host('small', { weight: 1, proxies: 1 })], 2000);
    assert.ok(Math.abs((weighted['big'] ?? 0) / 2000 - 0.8) < 0.05, JSON.stringify(weighted));
  });

  it('the same proxy always gets the same host, whatever the survey order', () => {
    const survey = [host('h1'), host('h2'), host('h3')];
    for (let i = 0; i < 50; i++) {
      const a = pickHost(survey, `p${i}`).host;
      assert.equal(pickHost([...survey].reverse(), `p${i}`).host, a);
      assert.equal(pickHost(survey, `p${i}`).host, a);
    }
  });
});

function runningStatus(over: Partial<ProxyStatus> = {}): ProxyStatus {
  const st = initialStatus({ name: 'p', entry: 'e1', imageKey: 'img' }, T0);
  return { ...st, state: 'Running', host: 'h1', ...over };
}

const OK: ProbeOutcome = { ok: true, latencyMs: 7 };
const FAIL: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'refused' };
const H = { healthyAfter: 2, unhealthyAfter: 3 };

describe('applyProbe (hysteresis)', () => {
  it('healthyAfter consecutive passes set Healthy True; one fewer does not', () => {
    let st = runningStatus();
    st = applyProbe(st, OK, H, T1);
    assert.equal(st.conditions.Healthy.status, 'Unknown');
    assert.deepEqual(st.health, {
      consecutiveOk: 1,
      consecutiveFailed: 0,
      totalOk: 1,
      totalFailed: 0,
      lastLatencyMs: 7,
      lastProbeAt: T1,
    });
    st = applyProbe(st, OK, H, T2);
    assert.deepEqual(st.conditions.Healthy, { status: 'True', reason: 'ProbePassed', since: T2 });
    assert.equal(
      applyProbe(runningStatus(), OK, { healthyAfter: 1, unhealthyAfter: 1 }, T1).conditions.Healthy.status,
      'True',
    );
  });

  it('unhealthyAfter consecutive failures set Healthy False; a pass in between resets the count', () => {
    let st = applyProbe(applyProbe(runningStatus(), OK, H, T0), OK, H, T0);
    st = applyProbe(st, FAIL, H, T1);
    st = applyProbe(st, FAIL, H, T1);
    assert.equal(st.conditions.Healthy.status, 'True', 'two of three');
    st = applyProbe(st, OK, H, T1);
    assert.equal(st.health.consecutiveFailed, 0);
    st = applyProbe(applyProbe(st, FAIL, H, T1), FAIL, H, T1);
    assert.equal(st.conditions.Healthy.status, 'True', 'two again, after a pass');
    st = applyProbe(st, FAIL, H, T2);
    assert.deepEqual(st.conditions.Healthy, {
      status: 'False',
      reason: 'ProbeFailed',
      message: 'PROBE_REFUSED: refused',
      since: T2,
    });
    assert.deepEqual(
      { ...st.health, lastProbeAt: undefined },
      {
        consecutiveOk: 0,
        consecutiveFailed: 3,
        totalOk: 3,
        totalFailed: 5,
        lastLatencyMs: 7,
        lastError: 'PROBE_REFUSED: refused',
        lastProbeAt: undefined,
      },
    );
  });

  it('the input status is not changed', () => {
    const st = runningStatus();
    const copy = structuredClone(st);
    applyProbe(st, FAIL, H, T1);
    applyProbe(st, OK, H, T1);
    assert.deepEqual(st, copy);
  });
});

describe('applyAddress (H3 grace)', () => {
  const held = (): ProxyStatus =>
    runningStatus({
      ip: '10.0.0.5',
      conditions: {
        VmRunning: { status: 'True', reason: 'Running', since: T0 },
        AddressAssigned: { status: 'True', reason: 'AddressRead', since: T0 },
        Healthy: { status: 'True', reason: 'ProbePassed', since: T0 },
      },
      health: { consecutiveOk: 5, consecutiveFailed: 0, totalOk: 5, totalFailed: 0 },
    });

  it('within gracePolls missed polls the IP and Healthy are kept; the next poll demotes', () => {
    const grace = 2;
    let st = held();
    let missed = 0;
    for (let i = 1; i <= grace; i++) {
      ({ status: st, missedPolls: missed } = applyAddress(st, missed, undefined, grace, T1, 'agent restarting'));
      assert.equal(missed, i);
      assert.deepEqual(st, held(), `missed ${i} of ${grace}: nothing changes`);
    }
    ({ status: st, missedPolls: missed } = applyAddress(st, missed, undefined, grace, T2, 'agent restarting'));
    assert.equal(missed, grace + 1);
    assert.equal(st.ip, undefined);
    assert.deepEqual(st.conditions.AddressAssigned, {
      status: 'False',
      reason: 'NoAddress',
      message: 'agent restarting',
      since: T2,
    });
    assert.deepEqual(st.conditions.Healthy, {
      status: 'False',
      reason: 'AddressLost',
      message: 'agent restarting',
      since: T2,
    });
    assert.equal(st.health.consecutiveOk, 0);
  });

  it('gracePolls 0 demotes at the first missed poll', () => {
    const { status } = applyAddress(held(), 0, undefined, 0, T1, 'gone');
    assert.equal(status.ip, undefined);
    assert.equal(status.conditions.Healthy.status, 'False');
  });

  it('an address read resets the count and is taken at once (also a new one)', () => {
    const r = applyAddress(held(), 2, '10.0.0.9', 2, T1, '');
    assert.equal(r.missedPolls, 0);
    assert.equal(r.status.ip, '10.0.0.9');
    assert.deepEqual(r.status.conditions.AddressAssigned, { status: 'True', reason: 'AddressRead', since: T0 });
  });

  it('without a previous IP there is nothing to hold: AddressAssigned False, Healthy untouched', () => {
    const st = runningStatus();
    const r = applyAddress(st, 0, undefined, 5, T1, 'no address yet');
    assert.equal(r.status.conditions.AddressAssigned.status, 'False');
    assert.deepEqual(r.status.conditions.Healthy, st.conditions.Healthy);
    assert.deepEqual(r.status.health, st.health);
  });
});

describe('setCondition and capacityBackoffMs', () => {
  it('since moves only when the status changes', () => {
    const c = { status: 'True' as const, reason: 'A', since: T0 };
    assert.deepEqual(setCondition(c, 'True', 'B', T1), { status: 'True', reason: 'B', since: T0 });
    assert.deepEqual(setCondition(c, 'False', 'B', T1, 'm'), { status: 'False', reason: 'B', message: 'm', since: T1 });
  });

  it('30 s, doubling, capped at 10 minutes', () => {
    assert.deepEqual(
      [-1, 0, 1, 2, 3, 4, 5, 6, 100, 5000].map(capacityBackoffMs),
      [30_000, 30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000, 600_000, 600_000],
    );
  });
});
