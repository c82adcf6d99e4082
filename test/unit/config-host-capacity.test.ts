/**
 * The providers file's host capacity fields (maxProxies, memoryOvercommit, cpuOvercommit) and the
 * host's domain starts at once (maxConcurrentStarts):
 * defaults, accepted values, and errors that name the field and the fix.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { maxProxiesOf } from '../../activities/proxy.ts';
import { HOST_MONITOR_MAX_WATCHES } from '../../contracts/host-monitor.ts';
import { ConfigError, parseProvidersYaml } from '../../lib/config/index.ts';
import type { ConfigIssue } from '../../lib/config/index.ts';

const yaml = (hostLines: string): string => `
providers:
  - name: lab
    type: kvm2
    hosts:
      - name: h1
        address: 192.0.2.10
        keyFile: /keys/id
        knownHostsFile: /keys/known_hosts
${hostLines}
    images:
      debian12:
        url: https://mirror.example/d12.qcow2
    squid:
      allowedClientCidrs: [10.0.0.0/8]
`;

function issuesOf(text: string): ConfigIssue[] {
  try {
    parseProvidersYaml(text, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return [...err.issues];
  }
  assert.fail('expected a ConfigError');
}

describe('host capacity fields', () => {
  it('defaults: memoryOvercommit 1, cpuOvercommit 4, no maxProxies, no maxConcurrentStarts', () => {
    const h = parseProvidersYaml(yaml(''), 't.yaml').providers[0]!.hosts[0]!;
    assert.equal(h.memoryOvercommit, 1);
    assert.equal(h.cpuOvercommit, 4);
    assert.equal(h.maxProxies, undefined);
    assert.ok(!('maxProxies' in h));
    assert.ok(!('maxConcurrentStarts' in h), 'absent: one start per host CPU, read from the host');
  });

  it('keeps given values, fractions included, and maxProxies 0', () => {
    const h = parseProvidersYaml(
      yaml(
        '        maxProxies: 0\n        memoryOvercommit: 1.5\n        cpuOvercommit: 8\n        maxConcurrentStarts: 8',
      ),
      't.yaml',
    ).providers[0]!.hosts[0]!;
    assert.deepEqual([h.maxProxies, h.memoryOvercommit, h.cpuOvercommit, h.maxConcurrentStarts], [0, 1.5, 8, 8]);
  });

  for (const c of [
    {
      line: 'maxProxies: -1',
      path: 'providers[0].hosts[0].maxProxies',
      message: /at least 0, got -1/,
      fix: /maxProxies: 20/,
    },
    { line: 'maxProxies: 2.5', path: 'providers[0].hosts[0].maxProxies', message: /integer/, fix: /most proxies/ },
    {
      line: 'memoryOvercommit: 0',
      path: 'providers[0].hosts[0].memoryOvercommit',
      message: /at least 0.1, got 0/,
      fix: /memoryOvercommit: 1/,
    },
    { line: 'memoryOvercommit: lots', path: 'providers[0].hosts[0].memoryOvercommit', message: /number/, fix: /ratio/ },
    {
      line: 'cpuOvercommit: 5000',
      path: 'providers[0].hosts[0].cpuOvercommit',
      message: /at most 1000, got 5000/,
      fix: /cpuOvercommit: 4/,
    },
    {
      line: 'maxConcurrentStarts: 0',
      path: 'providers[0].hosts[0].maxConcurrentStarts',
      message: /at least 1, got 0/,
      fix: /maxConcurrentStarts: 4/,
    },
    {
      line: 'maxConcurrentStarts: 1.5',
      path: 'providers[0].hosts[0].maxConcurrentStarts',
      message: /integer/,
      fix: /one per host CPU/,
    },
  ]) {
    it(`refuses ${c.line}, naming the field`, () => {
      const issues = issuesOf(yaml(`        ${c.line}`));
      assert.equal(issues.length, 1, issues.map((i) => i.message).join('; '));
      assert.equal(issues[0]!.path, c.path);
      assert.match(issues[0]!.message, c.message);
      assert.match(issues[0]!.fix, c.fix);
    });
  }

  describe('with the host monitor (health.monitor: host)', () => {
    const withHostMonitor = (hostLines: string): string =>
      yaml(hostLines).replace('    type: kvm2\n', '    type: kvm2\n    health: { monitor: host }\n');

    it(`maxProxies is at most ${HOST_MONITOR_MAX_WATCHES}: more is refused, naming the field and both ways out`, () => {
      const issues = issuesOf(withHostMonitor(`        maxProxies: ${HOST_MONITOR_MAX_WATCHES + 1}`));
      assert.equal(issues.length, 1, issues.map((i) => i.message).join('; '));
      assert.equal(issues[0]!.path, 'providers[0].hosts[0].maxProxies');
      assert.match(
        issues[0]!.message,
        new RegExp(`is ${HOST_MONITOR_MAX_WATCHES + 1}, more than one host monitor holds`),
      );
      assert.match(issues[0]!.fix, new RegExp(`maxProxies: ${HOST_MONITOR_MAX_WATCHES} or less`));
      assert.match(issues[0]!.fix, /health\.monitor: proxy/);
    });

    it(`${HOST_MONITOR_MAX_WATCHES} and unset are accepted; the per-proxy monitor has no such bound`, () => {
      parseProvidersYaml(withHostMonitor(`        maxProxies: ${HOST_MONITOR_MAX_WATCHES}`), 't.yaml');
      parseProvidersYaml(withHostMonitor(''), 't.yaml');
      parseProvidersYaml(yaml('        maxProxies: 100000'), 't.yaml');
    });

    it(`placement sees maxProxies ${HOST_MONITOR_MAX_WATCHES} when it is unset with the host monitor, else the file's`, () => {
      const host = (lines: string, text = withHostMonitor(lines)) => {
        const entry = parseProvidersYaml(text, 't.yaml').providers[0]!;
        return maxProxiesOf(entry, entry.hosts[0]!);
      };
      assert.deepEqual(host(''), { maxProxies: HOST_MONITOR_MAX_WATCHES });
      assert.deepEqual(host('        maxProxies: 40'), { maxProxies: 40 });
      assert.deepEqual(host('', yaml('')), {});
      assert.deepEqual(host('', yaml('        maxProxies: 7')), { maxProxies: 7 });
    });
  });
});
