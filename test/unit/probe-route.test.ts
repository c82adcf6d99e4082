// The probe's path (health.via, lib/probe/route.ts): the decision from a route lookup, the parsing
// of `ip -j` answers (fixtures written by hand from iproute2 6.1's output on this machine), the
// lookup cache and its failures; the direct path's TCP dial (lib/probe/direct.ts) to a loopback
// peer that answers like Squid, a refused port and an abort; and the providers file's field.
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { chooseProbePath, parseDefaultRoutes, parseRouteGet, RouteTable } from '../../lib/probe/route.ts';
import type { IpRunner } from '../../lib/probe/route.ts';
import { openDirectTcp } from '../../lib/probe/direct.ts';
import { connectProbe } from '../../lib/probe/connect.ts';
import { ProbeFailedError } from '../../lib/probe/errors.ts';
import { ConfigError, parseProvidersYaml } from '../../lib/config/index.ts';

const DEFAULTS =
  '[{"dst":"default","gateway":"192.0.2.1","dev":"eth0","flags":[]},' +
  '{"dst":"default","gateway":"fd00::1","dev":"eth0","metric":1024,"flags":[],"pref":"medium"}]';
const VIA_VETH =
  '[{"dst":"10.231.101.23","gateway":"10.231.1.2","dev":"ep-h1-r","prefsrc":"10.231.1.1","flags":[],"uid":0,"cache":[]}]';
const VIA_DEFAULT =
  '[{"dst":"192.168.101.23","gateway":"192.0.2.1","dev":"eth0","prefsrc":"192.0.2.2","flags":[],"uid":0,"cache":[]}]';

describe('chooseProbePath', () => {
  const routed = { dev: 'ep-h1-r', defaultDevs: ['eth0'] };
  it('auto goes direct only through an interface that carries no default route', () => {
    assert.deepEqual(chooseProbePath('auto', '10.231.101.23', routed), {
      via: 'direct',
      dev: 'ep-h1-r',
      reason: 'the route to 10.231.101.23 goes through ep-h1-r, which carries no default route',
    });
  });
  it("auto goes through SSH when the route is a default route's interface (a NAT guest's address)", () => {
    const p = chooseProbePath('auto', '192.168.101.23', { dev: 'eth0', defaultDevs: ['eth0'] });
    assert.equal(p.via, 'ssh');
    assert.match(p.reason, /leaves by eth0, a default route's interface/);
  });
  it('auto goes through SSH without a route, or when the lookup failed or was not made', () => {
    const none = chooseProbePath('auto', '10.9.9.9', { defaultDevs: ['eth0'], error: 'Network is unreachable' });
    assert.deepEqual(none, { via: 'ssh', reason: 'no route to 10.9.9.9 on the worker (Network is unreachable)' });
    assert.equal(chooseProbePath('auto', '10.9.9.9', undefined).via, 'ssh');
  });
  it('a default route on any interface counts (multipath, IPv6)', () => {
    assert.equal(chooseProbePath('auto', '10.0.0.5', { dev: 'wg0', defaultDevs: ['eth0', 'wg0'] }).via, 'ssh');
  });
  it('ssh and direct are taken as written', () => {
    assert.equal(chooseProbePath('ssh', '10.231.101.23', routed).via, 'ssh');
    assert.deepEqual(chooseProbePath('direct', '192.168.101.23', undefined), {
      via: 'direct',
      reason: 'health.via is direct',
    });
  });
});

describe('ip -j answers', () => {
  it('parseRouteGet reads the interface', () => {
    assert.equal(parseRouteGet(VIA_VETH), 'ep-h1-r');
    assert.equal(parseRouteGet('[{"dst":"127.0.0.1","dev":"lo","type":"local"}]'), 'lo');
    assert.equal(parseRouteGet('[]'), undefined);
    assert.equal(parseRouteGet('{}'), undefined);
  });
  it('parseDefaultRoutes reads every default interface, next hops included', () => {
    assert.deepEqual(parseDefaultRoutes(DEFAULTS), ['eth0']);
    assert.deepEqual(
      parseDefaultRoutes('[{"dst":"default","nexthops":[{"gateway":"a","dev":"eth0"},{"gateway":"b","dev":"eth1"}]}]'),
      ['eth0', 'eth1'],
    );
    assert.deepEqual(parseDefaultRoutes('[]'), []);
  });
});

describe('RouteTable', () => {
  const fake = (answers: Record<string, string | Error>) => {
    const calls: string[] = [];
    const run: IpRunner = (args) => {
      const key = args.join(' ');
      calls.push(key);
      const a = answers[key];
      if (a === undefined) return Promise.reject(new Error(`unexpected ip ${key}`));
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    };
    return { run, calls };
  };
  const showDefault = '-j route show default table all';

  it('looks up once per address within its TTL, again after it', async () => {
    let now = 1_000;
    const { run, calls } = fake({ [showDefault]: DEFAULTS, '-j route get 10.231.101.23': VIA_VETH });
    const t = new RouteTable({ run, ttlMs: 30_000, now: () => now });
    assert.deepEqual(await t.lookup('10.231.101.23'), { dev: 'ep-h1-r', defaultDevs: ['eth0'] });
    await t.lookup('10.231.101.23');
    assert.equal(calls.length, 2);
    now += 30_000;
    await t.lookup('10.231.101.23');
    assert.equal(calls.length, 4);
  });
  it('reads the default routes once for every address within the TTL', async () => {
    const { run, calls } = fake({
      [showDefault]: DEFAULTS,
      '-j route get 10.231.101.23': VIA_VETH,
      '-j route get 192.168.101.23': VIA_DEFAULT,
    });
    const t = new RouteTable({ run });
    assert.equal((await t.lookup('10.231.101.23')).dev, 'ep-h1-r');
    assert.equal((await t.lookup('192.168.101.23')).dev, 'eth0');
    assert.deepEqual(calls.filter((c) => c === showDefault).length, 1);
  });
  it('pathFor looks up only for auto', async () => {
    const { run, calls } = fake({ [showDefault]: DEFAULTS, '-j route get 192.168.101.23': VIA_DEFAULT });
    const t = new RouteTable({ run });
    assert.equal((await t.pathFor('auto', '192.168.101.23')).via, 'ssh');
    assert.equal((await t.pathFor('direct', '192.168.101.23')).via, 'direct');
    assert.equal((await t.pathFor('ssh', '192.168.101.23')).via, 'ssh');
    assert.equal(calls.length, 2);
  });
  it('a failed lookup is an answer without an interface (then SSH), never an exception', async () => {
    const unreachable = fake({ [showDefault]: DEFAULTS, '-j route get 10.9.9.9': new Error('Network is unreachable') });
    const a = await new RouteTable({ run: unreachable.run }).lookup('10.9.9.9');
    assert.deepEqual(a, { defaultDevs: ['eth0'], error: 'Network is unreachable' });
    const noIp = fake({ [showDefault]: new Error('spawn ip ENOENT') });
    const b = await new RouteTable({ run: noIp.run }).lookup('10.231.101.23');
    assert.equal(b.dev, undefined);
    assert.match(b.error ?? '', /default routes could not be read: spawn ip ENOENT/);
    assert.equal(chooseProbePath('auto', '10.231.101.23', b).via, 'ssh');
  });
  it('refuses what is not an address without running ip', async () => {
    const { run, calls } = fake({});
    const a = await new RouteTable({ run }).lookup('-n foo');
    assert.equal(a.dev, undefined);
    assert.equal(calls.length, 0);
  });
  it("the real lookup of this machine's loopback names lo (no packet is sent)", async () => {
    const a = await new RouteTable().lookup('127.0.0.1');
    assert.equal(a.dev, 'lo');
  });
});

describe('openDirectTcp', () => {
  it('connects, and the CONNECT probe runs on the socket as on an SSH channel', async () => {
    const server = net.createServer((sock) => {
      sock.once('data', () => sock.write('HTTP/1.1 200 Connection established\r\n\r\n'));
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const sock = await openDirectTcp('127.0.0.1', port, { timeoutMs: 5000 });
      const r = await connectProbe(sock, { target: '198.51.100.7:443', timeoutMs: 5000 });
      assert.equal(r.status, 200);
    } finally {
      server.close();
    }
  });
  it('a refused port is PROBE_CLOSED, naming the direct path', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    await assert.rejects(openDirectTcp('127.0.0.1', port, { timeoutMs: 5000 }), (err: unknown) => {
      assert.ok(err instanceof ProbeFailedError);
      assert.equal(err.code, 'PROBE_CLOSED');
      assert.match(err.message, /\(direct\)/);
      return true;
    });
  });
  it('an aborted signal ends it with PROBE_ABORTED', async () => {
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(openDirectTcp('127.0.0.1', 9, { timeoutMs: 5000, signal: ac.signal }), {
      code: 'PROBE_ABORTED',
    });
  });
});

describe('providers file: health.via', () => {
  const file = (via?: string) => `
providers:
  - name: lab
    type: kvm2
    hosts: [{ name: h1, address: 192.0.2.10, user: root, keyFile: /k, knownHostsFile: /kh }]
    images: { proxy: { url: "http://198.51.100.7/p.qcow2", format: qcow2 } }
    squid: { allowedClientCidrs: [10.0.0.0/8] }
    health: { ${via === undefined ? '' : `via: ${via}`} }
`;
  it('defaults to auto and takes direct and ssh', () => {
    assert.equal(parseProvidersYaml(file(), 'p.yaml').providers[0]!.health.via, 'auto');
    assert.equal(parseProvidersYaml(file('ssh'), 'p.yaml').providers[0]!.health.via, 'ssh');
    assert.equal(parseProvidersYaml(file('direct'), 'p.yaml').providers[0]!.health.via, 'direct');
  });
  it('anything else names the field and the values', () => {
    assert.throws(
      () => parseProvidersYaml(file('tcp'), 'p.yaml'),
      (err: unknown) =>
        err instanceof ConfigError &&
        /providers\[0\]\.health\.via/.test(err.message) &&
        /one of "auto", "direct", "ssh", got "tcp"/.test(err.message),
    );
  });
});
