/**
 * Which changes of a member's report go to its pool at once (workflows/proxy/pool-member.ts
 * urgentChange) and which are held for REPORT_HOLD_MS: the pool acts at once on health, the role
 * the member applied, Failed, Deleted, Deleting while in discovery, its host not answering and a
 * move; not on the states on the way up, the first host, the address, the exit IP, `healthSince`
 * alone or Deleting out of discovery.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MemberReport } from '../../contracts/pool.ts';
import { urgentChange } from '../../workflows/proxy/pool-member.ts';

const T0 = '2026-01-01T00:00:00.000Z';
const up: MemberReport = {
  name: 'web-a',
  state: 'Pending',
  health: 'Unknown',
  healthSince: T0,
  port: 3128,
  serving: false,
  at: T0,
};
const running: MemberReport = { ...up, state: 'Running', host: 'h1', ip: '10.0.0.5' };
const healthy: MemberReport = { ...running, health: 'True', healthSince: '2026-01-01T00:00:04.000Z' };
const serving: MemberReport = { ...healthy, serving: true };

describe('a member report sent at once or held', () => {
  it('holds the way up (the first report, the states up to Running, the host, the address, healthSince), the exit IP, Deleting out of discovery', () => {
    assert.equal(urgentChange(undefined, up), false);
    assert.equal(urgentChange(undefined, running), false);
    assert.equal(urgentChange(up, { ...up, state: 'Provisioning', host: 'h1' }), false);
    assert.equal(
      urgentChange({ ...up, state: 'Provisioning', host: 'h1' }, { ...up, state: 'Booting', host: 'h1' }),
      false,
    );
    assert.equal(urgentChange(up, running), false);
    assert.equal(urgentChange(running, { ...running, healthSince: '2026-01-01T00:00:01.000Z' }), false);
    assert.equal(urgentChange(healthy, { ...healthy, exitIp: '203.0.113.9' }), false);
    assert.equal(urgentChange(healthy, { ...healthy, lastError: 'X: y' }), false);
    assert.equal(urgentChange(healthy, { ...healthy, state: 'Deleting' }), false, 'Deleting out of discovery');
  });

  it('sends at once what the pool acts on', () => {
    assert.equal(urgentChange(running, healthy), true, 'Healthy');
    assert.equal(urgentChange(undefined, healthy), true, 'Healthy as the first report');
    assert.equal(urgentChange(healthy, { ...healthy, health: 'False' }), true, 'Unhealthy');
    assert.equal(urgentChange(healthy, { ...healthy, serving: true }), true, 'the role applied');
    assert.equal(urgentChange({ ...healthy, serving: true }, healthy), true, 'out of discovery');
    assert.equal(urgentChange(running, { ...running, state: 'Failed' }), true, 'Failed');
    assert.equal(urgentChange(undefined, { ...up, state: 'Failed' }), true, 'Failed as the first report');
    assert.equal(urgentChange(serving, { ...serving, state: 'Deleting' }), true, 'Deleting while in discovery');
    assert.equal(urgentChange({ ...healthy, state: 'Deleting' }, { ...healthy, state: 'Deleted' }), true, 'Deleted');
    assert.equal(urgentChange(healthy, { ...healthy, hostUnreachableSince: T0 }), true, 'its host silent');
    assert.equal(urgentChange({ ...healthy, hostUnreachableSince: T0 }, healthy), true, 'its host back');
    assert.equal(urgentChange(healthy, { ...healthy, probesFailing: true }), true, 'its probes failing');
    assert.equal(urgentChange({ ...healthy, probesFailing: true }, healthy), true, 'a probe passing again');
    assert.equal(urgentChange(running, { ...running, host: 'h2' }), true, 'moved to another host');
  });
});
