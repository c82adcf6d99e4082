/**
 * The exit IP on a pool's side: a member's report carries it when its run reports it (the
 * `member-exit-ip` marker), so a change of it is a new report; a pool's discovery answer lists a
 * member's exitIp beside its address without changing the ETag.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { poolDiscovery } from '../../api/routes-ops.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import { memberReport } from '../../workflows/proxy/pool-member.ts';
import { initialStatus } from '../../workflows/proxy/status.ts';
import { fakeMember } from '../support/fake-store.ts';

const T0 = '2026-01-01T00:00:00.000Z';

describe('exit IP of pool members', () => {
  it('a report carries the exit IP only when the run reports it', () => {
    const st: ProxyStatus = {
      ...initialStatus({ name: 'web-a', entry: 'e1', imageKey: 'img' }, T0),
      state: 'Running',
      ip: '10.0.0.5',
      exitIp: '203.0.113.9',
    };
    assert.equal(memberReport(st, T0, undefined, true).exitIp, '203.0.113.9');
    assert.equal('exitIp' in memberReport(st, T0), false, 'runs before the marker report what they did');
    const { exitIp: _x, ...none } = st;
    assert.equal('exitIp' in memberReport(none, T0, undefined, true), false);
  });

  it("a pool's discovery lists a member's exitIp; the ETag does not depend on it", () => {
    const base = {
      entry: 'e1',
      name: 'web',
      desired: 2,
      members: [
        fakeMember({ name: 'web-a', available: true, address: '10.0.0.5:3128', exitIp: '203.0.113.9' }),
        fakeMember({ name: 'web-b', available: true, address: '10.0.0.6:3128' }),
      ],
    } as unknown as PoolStatus;
    const d = poolDiscovery(base);
    assert.deepEqual(
      d.proxies.map((p) => [p.name, p.address, p.exitIp]),
      [
        ['web-a', '10.0.0.5:3128', '203.0.113.9'],
        ['web-b', '10.0.0.6:3128', undefined],
      ],
    );
    assert.equal('exitIp' in d.proxies[1]!, false);
    const moved = { ...base, members: [{ ...base.members[0]!, exitIp: '198.51.100.44' }, base.members[1]!] };
    assert.equal(poolDiscovery(moved).etag, d.etag);
  });
});
