/**
 * `providers[].health.egressIpUrl` and `egressIpIntervalMs` in the providers file: accepted and
 * resolved with their default, and a URL the probe cannot read refused with the field and the fix.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, parseProvidersYaml } from '../../lib/config/index.ts';

const file = (health: string): string => `
providers:
  - name: lab
    type: kvm2
    hosts:
      - name: h1
        address: 192.0.2.10
        keyFile: /keys/id
        knownHostsFile: /keys/known_hosts
    images:
      debian12:
        url: https://mirror.example/d12.qcow2
    squid:
      allowedClientCidrs: [10.0.0.0/8]
    health: ${health}
`;

describe('health.egressIpUrl in the providers file', () => {
  it('is optional; given, it is kept with egressIpIntervalMs defaulting to 5 minutes', () => {
    const none = parseProvidersYaml(file('{ target: "198.51.100.7:443" }'), 't.yaml').providers[0]!.health;
    assert.equal(none.egressIpUrl, undefined);
    const h = parseProvidersYaml(
      file('{ target: "198.51.100.7:443", egressIpUrl: "http://198.51.100.7/ip" }'),
      't.yaml',
    ).providers[0]!.health;
    assert.equal(h.egressIpUrl, 'http://198.51.100.7/ip');
    assert.equal(h.egressIpIntervalMs, 300_000);
  });

  for (const [bad, why] of [
    ['https://api.example/ip', /http:\/\//],
    ['not a url', /URL/],
    ['http://user:pw@198.51.100.7/ip', /credentials/],
  ] as const) {
    it(`refuses ${bad}, naming the field and the fix`, () => {
      assert.throws(
        () => parseProvidersYaml(file(`{ egressIpUrl: "${bad}" }`), 't.yaml'),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError);
          const issue = err.issues.find((i) => i.path === 'providers[0].health.egressIpUrl');
          assert.ok(issue, `an issue at providers[0].health.egressIpUrl: ${err.message}`);
          assert.match(issue.message, why);
          assert.match(issue.fix, /egressIpUrl: "http:\/\//);
          return true;
        },
      );
    });
  }

  it('refuses an egressIpIntervalMs under 1000 ms', () => {
    assert.throws(
      () => parseProvidersYaml(file('{ egressIpUrl: "http://198.51.100.7/ip", egressIpIntervalMs: 10 }'), 't.yaml'),
      (err: unknown) =>
        err instanceof ConfigError && err.issues.some((i) => i.path === 'providers[0].health.egressIpIntervalMs'),
    );
  });
});
