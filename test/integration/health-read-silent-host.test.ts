/**
 * A health read (the readProxyVm activity the monitors poll with) on a test host whose SSH stops
 * answering (every segment dropped both ways, no RST) ends within the probe's bound
 * (`health.probeTimeoutMs`, at least 5 s: 5 s here) with a host-link code, not when the link's keepalive gives up (about
 * 15-20 s): so the monitor knows the host is silent one probe's bound after its poll began, and
 * the member leaves discovery then (docs/health.md, "Detecting a silent host"). The operations'
 * budget (`timeouts.rpcMs`, 60 s here) is longer than the keepalive, as it is by default. Once the
 * host answers again, the next read dials anew and answers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { HostRegistry } from '../../activities/hosts.ts';
import { createProxyActivities } from '../../activities/proxy.ts';
import { HOST_LINK_CODES } from '../../contracts/health.ts';
import type { ResolvedProxy } from '../../contracts/proxy.ts';
import { fleetConfig } from '../support/fleet.ts';
import { clearFaultRules, injectSshFault } from '../support/host-faults.ts';
import { loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const entry = `hr${run}`.slice(0, 30);
const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const inActivity = <A, R>(fn: (a: A) => Promise<R>, a: A): Promise<R> =>
  new MockActivityEnvironment(undefined, { logger: silent }).run(fn, a);

describe('a health read on a host that stops answering', { timeout: 120_000 }, () => {
  let host: TestHost;
  let registry: HostRegistry;
  let acts: ReturnType<typeof createProxyActivities>;
  let proxy: ResolvedProxy;
  let heal: (() => Promise<void>) | undefined;

  before(async () => {
    host = loadTestHosts()[0]!;
    assert.ok(host, 'a test host (test/hosts/testhost up)');
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts: [host],
      images: { empty: { url: 'http://127.0.0.1:9/empty.qcow2' } },
      timeouts: { rpcMs: 60_000 },
      health: { probeTimeoutMs: 3_000 },
    });
    registry = new HostRegistry(config);
    acts = createProxyActivities(registry);
    proxy = await inActivity((s: Parameters<typeof acts.resolveProxy>[0]) => acts.resolveProxy(s), {
      entry,
      name: 'silent',
      imageKey: 'empty',
    });
  });
  after(async () => {
    await heal?.();
    if (host) await clearFaultRules(host).catch(() => 0);
    registry?.close();
  });

  it("ends within the probe's bound with a host-link code; answers again once the host does", async () => {
    // The link is up and answers: no such domain reads as Missing.
    const read = () => inActivity(() => acts.readProxyVm({ proxy, host: host.name }), undefined);
    assert.equal((await read()).state, 'Missing');
    heal = await injectSshFault(host, 'blackhole');
    const err = await read().then(
      (r) => assert.fail(`a read answered through the black hole: ${JSON.stringify(r)}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ApplicationFailure, String(err));
    // The read's own bound ended it (the keepalive would say SSH_KEEPALIVE_TIMEOUT or
    // LIBVIRT_KEEPALIVE_TIMEOUT, later), and the monitor counts it as the host's silence.
    assert.equal(err.type, 'LIBVIRT_TIMEOUT', err.message);
    assert.ok(HOST_LINK_CODES.includes(err.type), `${err.type} is a host-link code`);
    await heal();
    heal = undefined;
    assert.equal((await read()).state, 'Missing');
  });
});
