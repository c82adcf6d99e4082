// The curl line of `egressctl proxy up` (client/proxy-up.ts): run on this machine when it routes to
// the guest (the entry point's reachesDirectly, lib/probe/route.ts), else through the host over
// SSH; the entry's health.via reaches the decision.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { curlLine } from '../../client/proxy-up.ts';
import type { ProvidersView } from '../../client/proxy-up.ts';

const view = (via?: string): ProvidersView => ({
  providers: [
    {
      name: 'local',
      health: { target: '10.231.1.1:8481', via },
      hosts: [{ name: 'ep-h1', address: '10.231.1.2', port: 22, user: 'root', keyFile: '/k', knownHostsFile: '/kh' }],
    },
  ],
});
const base = { entry: 'local', providersFile: 'p.yaml' };

describe('curlLine', () => {
  it('runs here when this machine routes to the guest', async () => {
    const asked: [string, string | undefined][] = [];
    const line = await curlLine(
      {
        ...base,
        loadProviders: () => Promise.resolve(view('auto')),
        reachesDirectly: (ip, via) => {
          asked.push([ip, via]);
          return Promise.resolve(true);
        },
      },
      'ep-h1',
      '10.231.101.23',
      3128,
    );
    assert.deepEqual(line, {
      curl: 'curl -sS -p -x http://10.231.101.23:3128 http://10.231.1.1:8481/',
      from: 'machine',
    });
    assert.deepEqual(asked, [['10.231.101.23', 'auto']]);
  });
  it('goes through the host over SSH otherwise, and without a decision', async () => {
    const ssh =
      'ssh -i /k -o UserKnownHostsFile=/kh -p 22 root@10.231.1.2 curl -sS -p -x http://192.168.101.9:3128 http://10.231.1.1:8481/';
    const no = await curlLine(
      { ...base, loadProviders: () => Promise.resolve(view()), reachesDirectly: () => Promise.resolve(false) },
      'ep-h1',
      '192.168.101.9',
      3128,
    );
    assert.deepEqual(no, { curl: ssh, from: 'host' });
    const none = await curlLine(
      { ...base, loadProviders: () => Promise.resolve(view()) },
      'ep-h1',
      '192.168.101.9',
      3128,
    );
    assert.deepEqual(none, { curl: ssh, from: 'host' });
  });
});
