/**
 * The pure parts of two health rules: a booting proxy's Healthy stays Unknown (Booting) on failing
 * probes until its first pass or its boot deadline (contracts/health.ts applyProbe with bootMs,
 * workflows/proxy/status.ts markBooting), and the exit IP (contracts/exit-ip.ts): when a read is
 * due, a read folded in, a change told apart from a first read, a changed exit IP a transition of
 * the monitor while a steady one is not, and what the published key and details line show.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyExitIp, exitIpChange, exitIpDue, exitIpDueAgain } from '../../contracts/exit-ip.ts';
import { applyProbe, BOOT_POLL_MS, foldProbe, monitorVerdict, pollWaitMs } from '../../contracts/health.ts';
import type { MonitorState } from '../../contracts/health.ts';
import type { ProbeOutcome, ProxyStatus, ResolvedProxy } from '../../contracts/proxy.ts';
import {
  detailsLine,
  initialStatus,
  markBooting,
  markRecreating,
  memoOf,
  publishedKey,
} from '../../workflows/proxy/status.ts';

const T0 = '2026-01-01T00:00:00.000Z';
const at = (s: number): string => new Date(Date.parse(T0) + s * 1000).toISOString();
const H: ResolvedProxy['health'] = {
  target: 'example.com:443',
  intervalMs: 5_000,
  probeTimeoutMs: 2_000,
  healthyAfter: 2,
  unhealthyAfter: 3,
  addressGracePolls: 2,
  maxRecreations: 2,
  egressIpUrl: 'http://198.51.100.7/ip',
  egressIpIntervalMs: 60_000,
};
const BOOT_MS = 30_000;
const OK: ProbeOutcome = { ok: true, latencyMs: 3 };
const FAIL: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'squid is starting' };

function running(): ProxyStatus {
  return { ...initialStatus({ name: 'p1', entry: 'e1', imageKey: 'img' }, T0), state: 'Running', ip: '10.0.0.5' };
}
const far = { checkpointAtMs: Number.MAX_SAFE_INTEGER };
const monitor = (status: ProxyStatus): MonitorState => ({ status, missedPolls: 0, addressedOnce: true, polls: 1 });

describe('Healthy=Unknown (Booting)', () => {
  it('failing probes before the boot deadline keep Healthy Unknown (Booting), counted', () => {
    let st = markBooting(running(), T0);
    assert.equal(st.conditions.Healthy.status, 'Unknown');
    assert.equal(st.conditions.Healthy.reason, 'Booting');
    for (let i = 1; i <= 5; i++) st = applyProbe(st, FAIL, H, at(i * 5), BOOT_MS);
    assert.equal(st.conditions.Healthy.status, 'Unknown', 'five failures within bootMs: not False');
    assert.equal(st.conditions.Healthy.reason, 'Booting');
    assert.equal(st.health.consecutiveFailed, 5);
    assert.equal(st.health.lastError, 'PROBE_REFUSED: squid is starting');
  });

  it('the first passes make it True as usual (hysteresis), and failures after count again', () => {
    let st = markBooting(running(), T0);
    st = applyProbe(st, FAIL, H, at(5), BOOT_MS);
    st = applyProbe(st, OK, H, at(10), BOOT_MS);
    assert.equal(st.conditions.Healthy.status, 'Unknown', 'one pass: not yet Healthy');
    st = applyProbe(st, OK, H, at(15), BOOT_MS);
    assert.equal(st.conditions.Healthy.status, 'True');
    for (let i = 0; i < 3; i++) st = applyProbe(st, FAIL, H, at(20 + i), BOOT_MS);
    assert.equal(st.conditions.Healthy.status, 'False', 'no longer booting: three failures are False');
  });

  it('a booting proxy is polled every BOOT_POLL_MS; once Healthy or failed, every interval', () => {
    let st = markBooting(running(), T0);
    assert.equal(pollWaitMs(st, H), BOOT_POLL_MS, 'booting: the fast poll');
    assert.equal(pollWaitMs(st, { intervalMs: 500 }), 500, 'never slower than the interval');
    st = applyProbe(st, FAIL, H, at(1), BOOT_MS);
    assert.equal(pollWaitMs(st, H), BOOT_POLL_MS, 'a failure while booting keeps the fast poll');
    st = applyProbe(applyProbe(st, OK, H, at(2), BOOT_MS), OK, H, at(3), BOOT_MS);
    assert.equal(pollWaitMs(st, H), H.intervalMs, 'Healthy: the interval');
    assert.equal(pollWaitMs(running(), H), H.intervalMs, 'not booting (NotProbed, or a run before the rule)');
  });

  it('at the boot deadline failing probes make it False (ProbeFailed)', () => {
    let st = markBooting(running(), T0);
    for (let i = 1; i <= 5; i++) st = applyProbe(st, FAIL, H, at(i * 5), BOOT_MS);
    st = applyProbe(st, FAIL, H, at(30), BOOT_MS);
    assert.equal(st.conditions.Healthy.status, 'False');
    assert.equal(st.conditions.Healthy.reason, 'ProbeFailed');
  });

  it('without bootMs (runs before the rule) or without Booting, failures count as always', () => {
    let a = markBooting(running(), T0);
    let b = running();
    for (let i = 1; i <= 3; i++) {
      a = applyProbe(a, FAIL, H, at(i), undefined);
      b = applyProbe(b, FAIL, H, at(i), BOOT_MS);
    }
    assert.equal(a.conditions.Healthy.status, 'False');
    assert.equal(b.conditions.Healthy.status, 'False', 'NotProbed is not Booting');
  });

  it('the current details say Unknown (Booting)', () => {
    assert.match(detailsLine(markBooting(running(), T0)), /Healthy Unknown \(Booting\)/);
    assert.match(detailsLine(running()), /Healthy Unknown(?! \()/);
  });
});

describe('exit IP', () => {
  it('a read is due on the probe that makes the proxy Healthy, then once per egressIpIntervalMs', () => {
    const t0 = Date.parse(T0);
    let st = running();
    assert.equal(exitIpDue(st, H, t0), false, 'no probe passed yet: healthyAfter 2 is not reached by this one');
    st = applyProbe(st, OK, H, at(0));
    assert.equal(exitIpDue(st, H, t0), true, 'this probe would make it Healthy');
    st = applyExitIp(
      applyProbe(st, { ...OK, exitIp: '203.0.113.9' }, H, at(5)),
      { ...OK, exitIp: '203.0.113.9' },
      at(5),
    );
    assert.equal(st.exitIp, '203.0.113.9');
    assert.equal(st.health.exitIpAt, at(5));
    assert.equal(exitIpDue(st, H, t0 + 30_000), false, 'read 25 s ago: not due');
    assert.equal(exitIpDue(st, H, t0 + 65_000), true, 'read 60 s ago: due');
    assert.equal(exitIpDue(st, { ...H, egressIpUrl: undefined }, t0 + 65_000), false, 'no URL: never');
  });

  it('a failed read keeps the address, records the error and counts as a read for the cadence', () => {
    let st = applyExitIp(running(), { ...OK, exitIp: '203.0.113.9' }, at(0));
    st = applyExitIp(st, { ...OK, exitIpError: 'EXIT_IP_BAD_ANSWER: no address' }, at(60));
    assert.equal(st.exitIp, '203.0.113.9');
    assert.equal(st.health.exitIpError, 'EXIT_IP_BAD_ANSWER: no address');
    assert.equal(st.health.exitIpAt, at(60));
    st = applyExitIp(st, { ...OK, exitIp: '203.0.113.9' }, at(120));
    assert.equal(st.health.exitIpError, undefined, 'cleared by the next answer');
    assert.equal(applyExitIp(st, FAIL, at(180)), st, 'a failed probe reads nothing');
    assert.equal(applyExitIp(st, OK, at(180)), st, 'a probe that did not read leaves it');
  });

  it('a first read is no change; another address is, and only that is a monitor transition', () => {
    let st = running();
    st = applyProbe(applyProbe(st, OK, H, at(0)), OK, H, at(5));
    const healthy = monitor(st);
    const first = foldProbe(healthy, { ...OK, exitIp: '203.0.113.9' }, H, at(10));
    assert.deepEqual(exitIpChange(healthy.status, first.status), { to: '203.0.113.9' });
    assert.equal(monitorVerdict(far, healthy, first, 0), 'Transition', 'a new exit IP is published');
    const steady = foldProbe(first, { ...OK, exitIp: '203.0.113.9' }, H, at(70));
    assert.equal(exitIpChange(first.status, steady.status), undefined);
    assert.equal(monitorVerdict(far, first, steady, 0), undefined, 'the same exit IP again: no return, no history');
    const moved = foldProbe(steady, { ...OK, exitIp: '198.51.100.44' }, H, at(130));
    assert.deepEqual(exitIpChange(steady.status, moved.status), { from: '203.0.113.9', to: '198.51.100.44' });
    assert.equal(monitorVerdict(far, steady, moved, 0), 'Transition');
  });

  it('published: in the key, the memo (once read) and the details; the read time is not', () => {
    const st = applyExitIp(running(), { ...OK, exitIp: '203.0.113.9' }, at(0));
    assert.notEqual(publishedKey(st), publishedKey(running()));
    assert.equal(publishedKey(st), publishedKey(applyExitIp(st, { ...OK, exitIp: '203.0.113.9' }, at(60))));
    assert.equal(memoOf(st)['exitIp'], '203.0.113.9');
    assert.equal('exitIp' in memoOf(running()), false, 'a memo without an exit IP is what it was');
    assert.match(detailsLine(st), /exit `203\.0\.113\.9`/);
  });

  it('a VM that goes down keeps the last address but is read again', () => {
    const st = applyExitIp(running(), { ...OK, exitIp: '203.0.113.9' }, at(0));
    const down = markRecreating(st, 'Missing', at(10));
    assert.equal(down.exitIp, '203.0.113.9');
    assert.equal(down.health.exitIpAt, undefined);
    const plain = running();
    assert.equal(exitIpDueAgain(plain), plain, 'nothing read: the same status');
  });
});
