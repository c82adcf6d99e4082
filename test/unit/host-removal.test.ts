/**
 * client/host-removal.ts's comparison and message: an open proxy on a host (or entry) the providers
 * file no longer has is stranded, one on a host it has is not; the message names entry/host, up to
 * N proxy names per host with "(and K more)", and the fix (drain, or put the host back); the
 * visibility query is scoped to the worker's task queue and escapes it.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { hostRemovalMessage, openProxiesQuery, strandedHosts } from '../../client/host-removal.ts';

const configured = [
  { entry: 'lab', hosts: ['hv1', 'hv2'] },
  { entry: 'edge', hosts: ['e1'] },
];

it('a proxy on a host or entry the file lost is stranded; one on a kept host is not', () => {
  const stranded = strandedHosts(configured, [
    { entry: 'lab', name: 'web1', host: 'hv1' },
    { entry: 'lab', name: 'crawl-bbbbb', host: 'hv3' },
    { entry: 'lab', name: 'crawl-aaaaa', host: 'hv3' },
    { entry: 'edge', name: 'x', host: 'e1' },
    { entry: 'old', name: 'y', host: 'hv9' },
    // The same host name under another entry is another host.
    { entry: 'edge', name: 'z', host: 'hv1' },
  ]);
  assert.deepEqual(stranded, [
    { entry: 'edge', host: 'hv1', entryRemoved: false, proxies: ['z'] },
    { entry: 'lab', host: 'hv3', entryRemoved: false, proxies: ['crawl-aaaaa', 'crawl-bbbbb'] },
    { entry: 'old', host: 'hv9', entryRemoved: true, proxies: ['y'] },
  ]);
  assert.deepEqual(strandedHosts(configured, [{ entry: 'lab', name: 'web1', host: 'hv2' }]), []);
  assert.deepEqual(strandedHosts([], []), []);
});

it('the message names entry/host, up to N proxies with "(and K more)", and the fix', () => {
  const names = Array.from({ length: 8 }, (_, i) => `p${i}`);
  const msg = hostRemovalMessage(
    [
      { entry: 'lab', host: 'hv3', entryRemoved: false, proxies: names },
      { entry: 'old', host: 'hv9', entryRemoved: true, proxies: ['y'] },
    ],
    'providers.yaml',
    3,
  );
  assert.match(msg, /providers\.yaml no longer has 2 hosts that 9 open proxies live on/);
  assert.match(msg, /lab\/hv3: 8 proxies p0, p1, p2 \(and 5 more\)/);
  assert.ok(!msg.includes('p3'), msg);
  assert.match(msg, /old\/hv9 \(entry old is not in the file\): 1 proxy y/);
  assert.match(msg, /egressctl host drain lab\/hv3/);
  assert.match(msg, /put the host back in providers\.yaml/);
  assert.match(msg, /--allow-removed-hosts/);
  const one = hostRemovalMessage([{ entry: 'lab', host: 'hv3', entryRemoved: false, proxies: ['a'] }], 'f.yaml');
  assert.match(one, /f\.yaml no longer has a host that 1 open proxy lives on: lab\/hv3: 1 proxy a\./);
});

it('the visibility query lists open proxy workflows of the task queue only, quoted', () => {
  assert.equal(
    openProxiesQuery("tq'x"),
    "WorkflowType = 'proxyLifecycle' AND ExecutionStatus = 'Running' AND TaskQueue = 'tq\\'x'",
  );
});
