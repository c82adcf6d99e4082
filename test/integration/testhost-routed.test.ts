// The test hosts' routed network (test/hosts/README.md, "Routed network"): every host describes
// `ep-routed` beside its NAT network, the machine's kernel routes its subnet into the host's veth
// (checked with `ip route get`, which sends nothing), a TCP connection from the machine reaches
// the host's dnsmasq on the routed bridge's address through that route, and `testhost status`
// shows the network and the route. Needs `test/hosts/testhost up` first; every wait is bounded.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadTestHosts, TESTHOST_STATE } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const testhost = join(dirname(fileURLToPath(import.meta.url)), '../hosts/testhost');

/** The interface `ip route get` names for `addr` (the kernel's lookup; no packet is sent). */
async function routeDev(addr: string): Promise<string | undefined> {
  const { stdout } = await pexec('ip', ['-j', 'route', 'get', addr], { timeout: 5000 });
  return (JSON.parse(stdout) as { dev?: string }[])[0]?.dev;
}

const hosts = loadTestHosts();

for (const h of hosts) {
  it(`${h.name} describes its routed network and the machine routes it into ${String(h.vethRoot)}`, async () => {
    assert.equal(h['routedNetwork'], 'ep-routed', 'descriptor names the routed network (testhost up adds it)');
    const cidr = String(h['routedNetworkCidr']);
    const gw = String(h['routedNetworkGateway']);
    assert.match(cidr, /^\d+\.\d+\.\d+\.0\/24$/);
    assert.notEqual(cidr, h.networkCidr, 'a subnet of its own, beside the NAT one');
    assert.equal(await routeDev(gw), h.vethRoot);
    assert.equal(await routeDev(cidr.replace(/\.0\/24$/, '.77')), h.vethRoot, 'the whole /24, not just its gateway');
    assert.notEqual(await routeDev(h.networkGateway as string), h.vethRoot, 'the NAT subnet stays unrouted');
  });

  it(`${h.name}: a TCP connection from the machine reaches dnsmasq on the routed bridge`, async () => {
    const gw = String(h['routedNetworkGateway']);
    // Only where the kernel would send it into the host's veth (the network rule).
    assert.equal(await routeDev(gw), h.vethRoot);
    await new Promise<void>((resolve, reject) => {
      const s = connect({ host: gw, port: 53 });
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error(`no TCP connection to ${gw}:53 within 5 s`));
      }, 5000);
      s.once('connect', () => {
        clearTimeout(timer);
        s.destroy();
        resolve();
      });
      s.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  });
}

it('testhost status shows each routed network, active, with its route from the machine', async () => {
  const { stdout } = await pexec(testhost, ['status'], {
    timeout: 60_000,
    env: { ...process.env, EP_TESTHOST_STATE: TESTHOST_STATE },
  });
  for (const h of hosts) {
    const block = stdout.slice(stdout.indexOf(`${h.name}  `));
    assert.match(
      block,
      new RegExp(
        `routed: +ep-routed \\(active, ${String(h['routedNetworkCidr']).replace(/\./g, '\\.')} on ep-br1; from the machine: ${String(h.vethRoot)}\\)`,
      ),
      stdout,
    );
  }
});
