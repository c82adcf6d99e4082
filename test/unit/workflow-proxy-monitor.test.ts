/**
 * The health monitor's pure decisions (contracts/health.ts: one poll folded in, when the monitor
 * returns, the fresh status from its heartbeat), the publish key of the monitor loop
 * (workflows/proxy/status.ts publishedKey) and the image line of the current details.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumedDetails } from '../../activities/monitor.ts';
import { foldProbe, foldReading, monitorVerdict, probesFailing, withMonitorDetails } from '../../contracts/health.ts';
import type { MonitorState } from '../../contracts/health.ts';
import type { ResolvedProxy } from '../../contracts/proxy.ts';
import { detailsLine, initialStatus, publishedKey, withImageProgress } from '../../workflows/proxy/status.ts';

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:01:00.000Z';
const H: ResolvedProxy['health'] = {
  target: 'example.com:443',
  intervalMs: 15_000,
  probeTimeoutMs: 5_000,
  healthyAfter: 2,
  unhealthyAfter: 3,
  addressGracePolls: 2,
  maxRecreations: 2,
};
const IP = '10.0.0.5';
const OK = { ok: true as const, latencyMs: 3 };

function state(): MonitorState {
  return {
    status: { ...initialStatus({ name: 'p1', entry: 'e1', imageKey: 'img' }, T0), state: 'Running' },
    missedPolls: 0,
    addressedOnce: false,
    polls: 0,
  };
}
const far = { checkpointAtMs: Number.MAX_SAFE_INTEGER };

describe('health monitor decisions', () => {
  it('a first address is a transition; quiet healthy polls are not', () => {
    const s0 = state();
    const s1 = foldReading(s0, { reading: { state: 'Running', ip: IP } }, H, T1).state;
    assert.equal(s1.addressedOnce, true);
    assert.equal(monitorVerdict(far, s0, s1, 0), 'Transition');
    const a = foldProbe(foldProbe(s1, OK, H, T1), OK, H, T1);
    assert.equal(a.status.conditions.Healthy.status, 'True');
    const b = foldProbe(foldReading(a, { reading: { state: 'Running', ip: IP } }, H, T1).state, OK, H, T1);
    assert.equal(monitorVerdict(far, a, b, 0), undefined, 'counters and times moved, nothing recorded changed');
    assert.equal(b.status.health.totalOk, 3);
  });

  it('a failed read keeps the IP inside the grace and becomes the last error', () => {
    const s = foldReading(state(), { reading: { state: 'Running', ip: IP } }, H, T0).state;
    const err = { kind: 'Transient', code: 'LIBVIRT_RPC', message: 'down', at: T1 };
    const next = foldReading(s, { readError: err }, H, T1).state;
    assert.equal(next.status.ip, IP);
    assert.equal(next.missedPolls, 1);
    assert.deepEqual(next.status.lastError, err);
    assert.equal(monitorVerdict(far, s, next, 0), undefined);
  });

  it('a silent host is a transition at its first silent read, and again when the host answers', () => {
    const T2 = '2026-01-01T00:02:00.000Z';
    const healthy = foldProbe(
      foldProbe(foldReading(state(), { reading: { state: 'Running', ip: IP } }, H, T0).state, OK, H, T0),
      OK,
      H,
      T0,
    );
    const silent = { kind: 'Transient', code: 'SSH_KEEPALIVE_TIMEOUT', message: 'no answer', at: T1 };
    const first = foldReading(healthy, { readError: silent }, H, T1).state;
    assert.equal(first.hostSilentSince, T1);
    assert.equal(first.status.ip, IP, 'the address is kept inside the grace');
    assert.equal(first.status.conditions.Healthy.status, 'True', 'nothing watched before changed');
    assert.equal(monitorVerdict(far, healthy, first, 0), 'Transition', 'the first silent read returns');
    const second = foldReading(first, { readError: { ...silent, at: T2 } }, H, T2).state;
    assert.equal(second.hostSilentSince, T1, 'since the first silent read');
    assert.equal(monitorVerdict(far, first, second, 0), undefined, 'a second silent read does not');
    // libvirt answering with an error: the host answered, its silence is neither started nor ended.
    const libvirt = { kind: 'Transient', code: 'LIBVIRT_ERROR', message: 'busy', at: T2 };
    assert.equal(foldReading(healthy, { readError: libvirt }, H, T2).state.hostSilentSince, undefined);
    assert.equal(foldReading(second, { readError: libvirt }, H, T2).state.hostSilentSince, T1);
    const back = foldReading(second, { reading: { state: 'Running', ip: IP } }, H, T2).state;
    assert.equal('hostSilentSince' in back, false);
    assert.equal(monitorVerdict(far, second, back, 0), 'Transition', 'the host answering returns');
  });

  it('returns when the second probe in a row fails while Healthy is still True, and when one passes again', () => {
    const FAIL = { ok: false as const, code: 'PROBE_CONNECT_REFUSED', message: 'refused', latencyMs: 1 };
    const read = (x: MonitorState) => foldReading(x, { reading: { state: 'Running', ip: IP } }, H, T1).state;
    const healthy = foldProbe(foldProbe(read(state()), OK, H, T0), OK, H, T0);
    const one = foldProbe(read(healthy), FAIL, H, T1);
    assert.equal(monitorVerdict(far, healthy, one, 0), undefined, 'one failed probe: not yet');
    const two = foldProbe(read(one), FAIL, H, T1);
    assert.equal(two.status.conditions.Healthy.status, 'True', 'the hysteresis still says True');
    assert.equal(probesFailing(two.status), true);
    assert.equal(monitorVerdict(far, one, two, 0), 'Transition', 'two in a row: the workflow hears of it');
    const passed = foldProbe(read(two), OK, H, T1);
    assert.equal(probesFailing(passed.status), false);
    assert.equal(monitorVerdict(far, two, passed, 0), 'Transition', 'a passing probe ends it');
    const three = foldProbe(read(two), FAIL, H, T1);
    assert.equal(three.status.conditions.Healthy.status, 'False', 'the third: Unhealthy');
    assert.equal(probesFailing(three.status), false, 'Unhealthy says it from there');
  });

  it('returns on a lost VM, a boot out of time and the checkpoint (by time or by polls)', () => {
    const s = state();
    const lost = foldReading(s, { reading: { state: 'Stopped' } }, H, T1);
    assert.equal(lost.lost, 'Stopped');
    assert.equal(monitorVerdict(far, s, lost.state, 0, lost.lost), 'VmLost');
    const noAddr = { ...s, polls: 1 };
    assert.equal(monitorVerdict({ ...far, bootDeadlineMs: 100 }, s, noAddr, 101), 'BootTimeout');
    assert.equal(monitorVerdict({ ...far, bootDeadlineMs: 100 }, s, noAddr, 100), undefined, 'not before the deadline');
    assert.equal(monitorVerdict({ checkpointAtMs: 50 }, s, noAddr, 50), 'Checkpoint');
    assert.equal(monitorVerdict({ ...far, checkpointAfterPolls: 2 }, s, noAddr, 0), undefined);
    assert.equal(monitorVerdict({ ...far, checkpointAfterPolls: 1 }, s, noAddr, 0), 'Checkpoint');
  });

  it('the fresh status takes the heartbeat counters only when they are further along, for the same proxy', () => {
    const recorded = state().status;
    const live = foldProbe(state(), OK, H, T1).status;
    assert.equal(withMonitorDetails(recorded, { state: { status: live } }).health.totalOk, 1);
    assert.equal(withMonitorDetails(live, { state: { status: recorded } }).health.totalOk, 1, 'never older');
    assert.equal(withMonitorDetails(recorded, { state: { status: { ...live, name: 'other' } } }).health.totalOk, 0);
    assert.equal(withMonitorDetails(recorded, undefined), recorded);
    assert.equal(withMonitorDetails(recorded, 'junk'), recorded);
  });

  it('a retry resumes only from details of a monitor state of this proxy', () => {
    const input = { proxy: { name: 'p1' } as ResolvedProxy, host: 'h1', state: state(), checkpointAtMs: 0 };
    const s = { ...state(), missedPolls: 1 };
    assert.deepEqual(resumedDetails(input, { state: s }), { state: s });
    assert.equal(resumedDetails(input, { state: { ...s, status: { ...s.status, name: 'p2' } } }), undefined);
    assert.equal(resumedDetails(input, undefined), undefined);
    assert.equal(resumedDetails(input, { state: { status: s.status } }), undefined);
  });

  it('the publish key ignores counters, probe times and errors; it moves with what is published', () => {
    const s = state();
    const probed = foldProbe(s, OK, H, T1);
    assert.equal(publishedKey(probed.status), publishedKey(s.status));
    assert.equal(publishedKey({ ...s.status, updatedAt: T1 }), publishedKey(s.status));
    assert.notEqual(publishedKey({ ...s.status, ip: IP }), publishedKey(s.status));
    const healthy = foldProbe(probed, OK, H, T1);
    assert.notEqual(publishedKey(healthy.status), publishedKey(s.status));
  });

  it("the current details show the base upload's progress", () => {
    const st = withImageProgress(state().status, {
      workflowId: 'w',
      bytes: 50 * 2 ** 20,
      totalBytes: 200 * 2 ** 20,
      bytesPerSecond: 2 ** 20,
    });
    assert.match(detailsLine(st), /image 25 % \(50 of 200 MiB, 1\.0 MiB\/s\)/);
    assert.doesNotMatch(detailsLine(state().status), /image/);
  });
});
