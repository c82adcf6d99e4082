/**
 * resolveProxy, the activity that checks a spec against the providers file before anything is
 * created: the open-proxy rule of contracts/cidr.ts refuses every spelling of "every address" in a
 * Squid override (PROXY_SPEC_INVALID naming the block) unless the file sets allowOpenProxy, and an
 * unknown image key names the field and the known keys.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createProxyActivities } from '../../activities/proxy.ts';
import { HostRegistry } from '../../activities/hosts.ts';
import { parseProvidersYaml } from '../../lib/config/index.ts';
import type { ProxySpec, ResolvedProxy } from '../../contracts/proxy.ts';

const FILE = `
providers:
  - name: lab
    type: kvm2
    hosts:
      - name: h1
        address: 192.0.2.10
        keyFile: /keys/id
        knownHostsFile: /keys/known_hosts
    images:
      deb:
        url: https://mirror.example/d12.qcow2
    squid:
      allowedClientCidrs: [10.0.0.0/8]
`;

type Resolve = (spec: ProxySpec) => Promise<ResolvedProxy>;

function activities(head = '') {
  const registry = new HostRegistry(parseProvidersYaml(`${head}${FILE}`, 'test.yaml'));
  const acts = createProxyActivities(registry);
  const resolve: Resolve = (spec) => acts.resolveProxy(spec);
  return { registry, resolve };
}

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
/** Runs resolveProxy as an activity (its errors are mapped as the worker maps them). */
const run = (resolve: Resolve, spec: ProxySpec): Promise<ResolvedProxy> =>
  new MockActivityEnvironment(undefined, { logger: silent }).run(resolve, spec);

/** The failure resolveProxy gives for `spec`, which must fail. */
async function failureOf(resolve: Resolve, spec: ProxySpec): Promise<ApplicationFailure> {
  try {
    await run(resolve, spec);
  } catch (err) {
    assert.ok(err instanceof ApplicationFailure, String(err));
    return err;
  }
  assert.fail('expected a failure');
}

describe('resolveProxy', () => {
  const strict = activities();
  const open = activities('allowOpenProxy: true\n');
  after(() => {
    strict.registry.close();
    open.registry.close();
  });
  const base = { name: 'p1', entry: 'lab', imageKey: 'deb' };

  const openLists: [string[], number][] = [
    [['0.0.0.0/0'], 0],
    [['10.0.0.0/8', '::/0'], 1],
    [['::ffff:0.0.0.0/96'], 0],
    [['0.0.0.0/1', '128.0.0.0/1'], 1],
    [['8000::/1', '::/1'], 1],
  ];
  for (const [cidrs, i] of openLists) {
    it(`refuses ${cidrs.join(' + ')} as an open proxy without allowOpenProxy`, async () => {
      const spec = { ...base, squid: { allowedClientCidrs: cidrs } };
      const failure = await failureOf(strict.resolve, spec);
      assert.equal(failure.type, 'PROXY_SPEC_INVALID');
      assert.equal(failure.nonRetryable, true);
      assert.match(failure.message, new RegExp(`^squid\\.allowedClientCidrs\\[${i}\\]: .*admits every .*open proxy`));
      const resolved = await run(open.resolve, spec);
      assert.deepEqual(resolved.squid.allowedClientCidrs, cidrs);
    });
  }

  for (const bad of ['0/0', '0.0.0.0/00']) {
    it(`refuses ${bad} as not a block, even with allowOpenProxy`, async () => {
      for (const { resolve } of [strict, open]) {
        const failure = await failureOf(resolve, { ...base, squid: { allowedClientCidrs: [bad] } });
        assert.equal(failure.type, 'PROXY_SPEC_INVALID');
        assert.match(failure.message, /^squid\.allowedClientCidrs\[0\]: /);
      }
    });
  }

  it('an unknown image key names the field and the known keys', async () => {
    const failure = await failureOf(strict.resolve, { ...base, imageKey: 'nope' });
    assert.equal(failure.type, 'PROXY_SPEC_INVALID');
    assert.equal(failure.message, 'imageKey: entry lab has no image "nope" (known: deb)');
  });

  it('resolves an ordinary spec with the entry defaults', async () => {
    const resolved = await run(strict.resolve, base);
    assert.deepEqual(resolved.squid, {
      port: 3128,
      allowedClientCidrs: ['10.0.0.0/8'],
      egress: { mode: 'enforce', allowDestinations: [], denyDestinations: [], allowPorts: ['80', '443', '1024-65535'] },
    });
    assert.deepEqual(resolved.vm, { vcpus: 1, memoryMiB: 512, diskGiB: 10 });
  });
});
