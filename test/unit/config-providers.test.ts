/**
 * The providers file: defaults, every rule of the schema, error paths and fixes, YAML syntax
 * errors with line and column, the file loader, the shipped example, and that the operator guide
 * documents every field the schema accepts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadProvidersFile, parseProvidersYaml } from '../../lib/config/index.ts';
import type { ConfigIssue } from '../../lib/config/index.ts';
import { ALLOWED_KEYS, FIELD_HELP } from '../../lib/config/schema.ts';
import { errorKind } from '../../lib/errors.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

const MINIMAL = `
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
`;

/** The issues of parsing `text`, which must fail. */
function issuesOf(text: string): ConfigIssue[] {
  try {
    parseProvidersYaml(text, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.code, 'CONFIG_INVALID');
    assert.equal(err.kind, 'Permanent');
    assert.equal(errorKind(err), 'Permanent');
    assert.equal(err.name, 'ConfigError');
    for (const issue of err.issues) assert.ok(err.message.includes(`${issue.message} — ${issue.fix}`));
    return [...err.issues];
  }
  assert.fail('expected a ConfigError');
}

/** MINIMAL with `line` replaced by `replacement` (which must occur once). */
function edit(line: string, replacement: string): string {
  assert.equal(MINIMAL.split(line).length, 2, `fixture line not unique: ${line}`);
  return MINIMAL.replace(line, replacement);
}

function issueAt(issues: ConfigIssue[], path: string): ConfigIssue {
  const found = issues.find((i) => i.path === path);
  assert.ok(found, `no issue at ${path}; got ${issues.map((i) => i.path).join(', ')}`);
  return found;
}

describe('parseProvidersYaml: valid input and defaults', () => {
  it('fills every default of a minimal entry', () => {
    const cfg = parseProvidersYaml(MINIMAL, 'test.yaml');
    const entry = cfg.providers[0]!;
    assert.deepEqual(entry.hosts[0], {
      name: 'h1',
      address: '192.0.2.10',
      port: 22,
      user: 'root',
      keyFile: '/keys/id',
      knownHostsFile: '/keys/known_hosts',
      socketPath: '/var/run/libvirt/libvirt-sock',
      weight: 1,
      memoryOvercommit: 1,
      cpuOvercommit: 4,
    });
    assert.equal(entry.storagePool, 'default');
    assert.equal(entry.network, 'default');
    assert.equal(entry.domainType, 'kvm');
    assert.deepEqual(entry.vm, { vcpus: 1, memoryMiB: 512, diskGiB: 10 });
    assert.deepEqual(entry.images, { debian12: { url: 'https://mirror.example/d12.qcow2', format: 'qcow2' } });
    assert.deepEqual(entry.squid, {
      port: 3128,
      allowedClientCidrs: ['10.0.0.0/8'],
      mode: 'enforce',
      allowDestinations: [],
      denyDestinations: [],
      allowPorts: ['80', '443', '1024-65535'],
    });
    assert.deepEqual(entry.timeouts, {
      rpcMs: 30000,
      connectMs: 5000,
      readyMs: 10000,
      downloadHeadersMs: 30000,
      downloadBodyIdleMs: 60000,
      downloadTotalMs: 3600000,
      bootMs: 600000,
      shutdownGraceMs: 0,
    });
  });

  it('keeps given values, partial vm/timeouts get the other defaults, sha256 is lowercased', () => {
    const text = edit(
      '        url: https://mirror.example/d12.qcow2',
      `        url: http://m/x.raw\n        format: raw\n        sha256: ${'AB'.repeat(32)}`,
    ).replace(
      '    squid:',
      '    vm: { memoryMiB: 2048 }\n    timeouts: { rpcMs: 1000, shutdownGraceMs: 15000 }\n    domainType: qemu\n    squid:',
    );
    const entry = parseProvidersYaml(text, 'test.yaml').providers[0]!;
    assert.deepEqual(entry.images.debian12, { url: 'http://m/x.raw', format: 'raw', sha256: 'ab'.repeat(32) });
    assert.deepEqual(entry.vm, { vcpus: 1, memoryMiB: 2048, diskGiB: 10 });
    assert.equal(entry.timeouts.rpcMs, 1000);
    assert.equal(entry.timeouts.shutdownGraceMs, 15000);
    assert.equal(entry.timeouts.bootMs, 600000);
    assert.equal(entry.domainType, 'qemu');
  });

  it('accepts IPv6 host addresses, DNS names and IPv6 CIDRs', () => {
    const text = edit('        address: 192.0.2.10', '        address: "2001:db8::10"').replace(
      '[10.0.0.0/8]',
      '[10.0.0.0/8, "2001:db8::/32", 192.0.2.7/32, "2001:db8::7/128"]',
    );
    assert.equal(parseProvidersYaml(text, 't').providers[0]!.hosts[0]!.address, '2001:db8::10');
    assert.equal(
      parseProvidersYaml(edit('        address: 192.0.2.10', '        address: hv1.example.net'), 't').providers[0]!
        .hosts[0]!.address,
      'hv1.example.net',
    );
  });
});

describe('parseProvidersYaml: no open proxy by accident', () => {
  for (const open of ['0.0.0.0/0', '"::/0"']) {
    it(`refuses ${open} in allowedClientCidrs, naming the field and both remedies`, () => {
      const issues = issuesOf(MINIMAL.replace('[10.0.0.0/8]', `[10.0.0.0/8, ${open}]`));
      const issue = issueAt(issues, 'providers[0].squid.allowedClientCidrs[1]');
      assert.match(issue.message, /open proxy/);
      assert.match(issue.fix, /allowOpenProxy: true/);
      assert.ok(issue.line !== undefined, 'located in the file');
    });
  }

  const openLists: [string, string, number][] = [
    ['0.0.0.0/0', '[0.0.0.0/0]', 0],
    ['::/0', '["::/0"]', 0],
    ['::ffff:0.0.0.0/96 (all of IPv4, mapped)', '["::ffff:0.0.0.0/96"]', 0],
    ['a /1 pair of IPv4', '[0.0.0.0/1, 10.0.0.0/8, 128.0.0.0/1]', 2],
    ['a /1 pair of IPv6', '["::/1", "8000::/1"]', 0],
    ['a /1 pair of IPv6 (upper half first)', '["8000::/1", "2001:db8::/32", "::/1"]', 2],
  ];
  for (const [what, list, index] of openLists) {
    it(`refuses ${what} without allowOpenProxy, at the block that opens it`, () => {
      const issues = issuesOf(MINIMAL.replace('[10.0.0.0/8]', list));
      const issue = issueAt(issues, `providers[0].squid.allowedClientCidrs[${index}]`);
      assert.match(issue.message, /admits every .*open proxy/);
      assert.match(issue.fix, /allowOpenProxy: true/);
      const allowed = parseProvidersYaml(`allowOpenProxy: true\n${MINIMAL.replace('[10.0.0.0/8]', list)}`, 't');
      assert.equal(allowed.allowOpenProxy, true);
    });
  }

  for (const bad of ['0/0', '0.0.0.0/00']) {
    it(`refuses ${bad} as not a CIDR block, with or without allowOpenProxy`, () => {
      for (const head of ['', 'allowOpenProxy: true\n']) {
        const issues = issuesOf(`${head}${MINIMAL.replace('[10.0.0.0/8]', `["${bad}"]`)}`);
        assert.match(issueAt(issues, 'providers[0].squid.allowedClientCidrs[0]').message, /not an IPv4|prefix length/);
      }
    });
  }

  it('accepts /0 blocks when the file sets allowOpenProxy: true, and defaults it to false', () => {
    assert.equal(parseProvidersYaml(MINIMAL, 't').allowOpenProxy, false);
    const cfg = parseProvidersYaml(
      `allowOpenProxy: true\n${MINIMAL.replace('[10.0.0.0/8]', '[0.0.0.0/0, "::/0"]')}`,
      't',
    );
    assert.equal(cfg.allowOpenProxy, true);
    assert.deepEqual(cfg.providers[0]!.squid.allowedClientCidrs, ['0.0.0.0/0', '::/0']);
  });

  it('allowOpenProxy must be a boolean', () => {
    assert.match(
      issueAt(issuesOf(`allowOpenProxy: yes please\n${MINIMAL}`), 'allowOpenProxy').message,
      /true or false/,
    );
  });
});

describe('parseProvidersYaml: each problem names the field and the fix', () => {
  const cases: { what: string; text: string; path: string; message: RegExp; fix: RegExp }[] = [
    {
      what: 'a missing keyFile',
      text: edit('        keyFile: /keys/id\n', ''),
      path: 'providers[0].hosts[0].keyFile',
      message: /required but missing/,
      fix: /add `keyFile: \/etc\/egress-proxies\/ssh\/id_ed25519`/,
    },
    {
      what: 'a relative keyFile',
      text: edit('        keyFile: /keys/id', '        keyFile: keys/id'),
      path: 'providers[0].hosts[0].keyFile',
      message: /absolute path, got "keys\/id"/,
      fix: /absolute path of the SSH private key/,
    },
    {
      what: 'an SSH user that ssh would read as an option',
      text: edit('        address: 192.0.2.10', '        address: 192.0.2.10\n        user: "-oProxyCommand=x"'),
      path: 'providers[0].hosts[0].user',
      message: /must be a user name/,
      fix: /the SSH user/,
    },
    {
      what: 'an SSH user with a space',
      text: edit('        address: 192.0.2.10', '        address: 192.0.2.10\n        user: "a b"'),
      path: 'providers[0].hosts[0].user',
      message: /must be a user name/,
      fix: /the SSH user/,
    },
    {
      what: 'an entry name with capitals',
      text: edit('  - name: lab', '  - name: Lab_A'),
      path: 'providers[0].name',
      message: /lowercase identifier.*got "Lab_A"/,
      fix: /e\.g\. `name: lab-a`/,
    },
    {
      what: 'an entry name over 40 characters',
      text: edit('  - name: lab', `  - name: a${'b'.repeat(40)}`),
      path: 'providers[0].name',
      message: /at most 40/,
      fix: /identifier/,
    },
    {
      what: 'an entry name starting with a digit',
      text: edit('  - name: lab', '  - name: 1lab'),
      path: 'providers[0].name',
      message: /lowercase identifier/,
      fix: /name: lab-a/,
    },
    {
      what: 'another provider type',
      text: edit('    type: kvm2', '    type: kvm'),
      path: 'providers[0].type',
      message: /one of "kvm2", got "kvm"/,
      fix: /type: kvm2/,
    },
    {
      what: 'a port out of range',
      text: edit('        address: 192.0.2.10', '        address: 192.0.2.10\n        port: 70000'),
      path: 'providers[0].hosts[0].port',
      message: /at most 65535, got 70000/,
      fix: /port: 22/,
    },
    {
      what: 'a port given as text',
      text: edit('        address: 192.0.2.10', '        address: 192.0.2.10\n        port: ssh'),
      path: 'providers[0].hosts[0].port',
      message: /must be a number, got "ssh"/,
      fix: /SSH port/,
    },
    {
      what: 'a zero weight',
      text: edit('        address: 192.0.2.10', '        address: 192.0.2.10\n        weight: 0'),
      path: 'providers[0].hosts[0].weight',
      message: /at least 1, got 0/,
      fix: /positive integer/,
    },
    {
      what: 'a bad address',
      text: edit('        address: 192.0.2.10', '        address: "http://host/"'),
      path: 'providers[0].hosts[0].address',
      message: /IPv4 address, an IPv6 address/,
      fix: /address: 192\.0\.2\.10/,
    },
    {
      what: 'a domainType that is not kvm or qemu',
      text: edit('    type: kvm2', '    type: kvm2\n    domainType: xen'),
      path: 'providers[0].domainType',
      message: /one of "kvm", "qemu", got "xen"/,
      fix: /TCG/,
    },
    {
      what: 'a fractional memory size',
      text: edit('    type: kvm2', '    type: kvm2\n    vm: { memoryMiB: 1.5 }'),
      path: 'providers[0].vm.memoryMiB',
      message: /must be an integer, got 1\.5/,
      fix: /memoryMiB: 512/,
    },
    {
      what: 'an ftp image URL',
      text: edit('https://mirror.example/d12.qcow2', 'ftp://mirror.example/d12.qcow2'),
      path: 'providers[0].images.debian12.url',
      message: /http:\/\/ or https:\/\/ URL/,
      fix: /URL of the base image/,
    },
    {
      what: 'a short sha256',
      text: edit('https://mirror.example/d12.qcow2', 'https://m/x\n        sha256: abc'),
      path: 'providers[0].images.debian12.sha256',
      message: /64 hexadecimal digits \(a SHA-256 digest\), got "abc"/,
      fix: /sha256sum/,
    },
    {
      what: 'an image format other than qcow2 or raw',
      text: edit('https://mirror.example/d12.qcow2', 'https://m/x\n        format: vmdk'),
      path: 'providers[0].images.debian12.format',
      message: /one of "qcow2", "raw", got "vmdk"/,
      fix: /qcow2 or raw/,
    },
    {
      what: 'an image key that is not an identifier',
      text: edit('      debian12:', '      Debian_12:'),
      path: 'providers[0].images.Debian_12',
      message: /image key must be a lowercase identifier/,
      fix: /rename the key/,
    },
    {
      what: 'no images',
      text: edit('    images:\n      debian12:\n        url: https://mirror.example/d12.qcow2', '    images: {}'),
      path: 'providers[0].images',
      message: /at least one image, got an empty mapping/,
      fix: /debian12/,
    },
    {
      what: 'a CIDR with host bits set',
      text: edit('[10.0.0.0/8]', '[10.1.2.3/8]'),
      path: 'providers[0].squid.allowedClientCidrs[0]',
      message: /host bits set below the \/8 prefix, got "10\.1\.2\.3\/8"/,
      fix: /write the network as 10\.0\.0\.0\/8 \(or use \/32 for a single address\)/,
    },
    {
      what: 'an IPv6 CIDR with host bits set',
      text: edit('[10.0.0.0/8]', '["2001:db8::1/32"]'),
      path: 'providers[0].squid.allowedClientCidrs[0]',
      message: /host bits/,
      fix: /2001:db8::\/32 \(or use \/128/,
    },
    {
      what: 'an address without prefix',
      text: edit('[10.0.0.0/8]', '[10.0.0.1]'),
      path: 'providers[0].squid.allowedClientCidrs[0]',
      message: /not a CIDR block/,
      fix: /10\.0\.0\.0\/8 or 2001:db8::\/32/,
    },
    {
      what: 'a prefix over 32',
      text: edit('[10.0.0.0/8]', '[10.0.0.0/33]'),
      path: 'providers[0].squid.allowedClientCidrs[0]',
      message: /from 0 to 32/,
      fix: /CIDR block/,
    },
    {
      what: 'an empty CIDR list',
      text: edit('[10.0.0.0/8]', '[]'),
      path: 'providers[0].squid.allowedClientCidrs',
      message: /at least 1 item, got an empty list/,
      fix: /allowedClientCidrs: \[10\.0\.0\.0\/8/,
    },
    {
      what: 'a negative timeout',
      text: edit('    type: kvm2', '    type: kvm2\n    timeouts: { rpcMs: -5 }'),
      path: 'providers[0].timeouts.rpcMs',
      message: /at least 1, got -5/,
      fix: /rpcMs: 30000/,
    },
    {
      what: 'a zero rpc timeout (only shutdownGraceMs may be 0)',
      text: edit('    type: kvm2', '    type: kvm2\n    timeouts: { rpcMs: 0, shutdownGraceMs: 0 }'),
      path: 'providers[0].timeouts.rpcMs',
      message: /at least 1, got 0/,
      fix: /libvirt call/,
    },
    {
      what: 'a timeout beyond what a Node timer holds',
      text: edit('    type: kvm2', '    type: kvm2\n    timeouts: { bootMs: 2147483648 }'),
      path: 'providers[0].timeouts.bootMs',
      message: /at most 2147483647/,
      fix: /bootMs: 600000/,
    },
    {
      what: 'no hosts',
      text: edit(
        '    hosts:\n      - name: h1\n        address: 192.0.2.10\n        keyFile: /keys/id\n        knownHostsFile: /keys/known_hosts',
        '    hosts: []',
      ),
      path: 'providers[0].hosts',
      message: /at least 1 item/,
      fix: /libvirt host/,
    },
    {
      what: 'a storage pool name with a slash',
      text: edit('    type: kvm2', '    type: kvm2\n    storagePool: a/b'),
      path: 'providers[0].storagePool',
      message: /libvirt object name/,
      fix: /storagePool: default/,
    },
  ];
  for (const c of cases) {
    it(`reports ${c.what}`, () => {
      const issue = issueAt(issuesOf(c.text), c.path);
      assert.match(issue.message, c.message);
      assert.match(issue.fix, c.fix);
    });
  }

  it('rejects unknown keys, suggests the near one and lists the allowed keys', () => {
    const issues = issuesOf(
      edit('        keyFile: /keys/id', '        keyfile: /keys/id').replace(
        '    type: kvm2',
        '    type: kvm2\n    colour: red',
      ),
    );
    const typo = issueAt(issues, 'providers[0].hosts[0].keyfile');
    assert.equal(typo.message, 'is not a known key');
    assert.match(
      typo.fix,
      /^did you mean keyFile\? remove or rename it; allowed keys here: name, address, port, user, keyFile, passphraseFile, knownHostsFile, socketPath, weight, maxProxies, memoryOvercommit, cpuOvercommit, maxConcurrentStarts$/,
    );
    issueAt(issues, 'providers[0].hosts[0].keyFile');
    const unknown = issueAt(issues, 'providers[0].colour');
    assert.match(
      unknown.fix,
      /^remove or rename it; allowed keys here: name, type, hosts, storagePool, network, domainType, vm, images, squid, timeouts, health$/,
    );
    assert.deepEqual(
      issueAt(issuesOf(`${MINIMAL}version: 1\n`), 'version').fix,
      'remove or rename it; allowed keys here: ownerUid, gc, hostHealthIntervalMs, allowOpenProxy, providers',
    );
    issueAt(
      issuesOf(edit('        url: https://mirror.example/d12.qcow2', '        url: https://m/x\n        sha: x')),
      'providers[0].images.debian12.sha',
    );
    issueAt(issuesOf(edit('    type: kvm2', '    type: kvm2\n    vm: { cpus: 2 }')), 'providers[0].vm.cpus');
    issueAt(issuesOf(edit('[10.0.0.0/8]', '[10.0.0.0/8]\n      ports: [1]')), 'providers[0].squid.ports');
    issueAt(issuesOf(edit('    type: kvm2', '    type: kvm2\n    timeouts: { rpc: 1 }')), 'providers[0].timeouts.rpc');
  });

  it('rejects duplicate provider names and duplicate host names within an entry', () => {
    const twoHosts = edit(
      '        knownHostsFile: /keys/known_hosts',
      '        knownHostsFile: /keys/known_hosts\n      - name: h1\n        address: 192.0.2.11\n        keyFile: /k\n        knownHostsFile: /kh',
    );
    const hostIssue = issueAt(issuesOf(twoHosts), 'providers[0].hosts[1].name');
    assert.match(hostIssue.message, /duplicate host name "h1" \(already used at providers\[0\]\.hosts\[0\]\)/);
    assert.match(hostIssue.fix, /different name/);
    const body = MINIMAL.replace('providers:\n', '');
    const issues = issuesOf(`providers:\n${body}${body}`);
    const dup = issueAt(issues, 'providers[1].name');
    assert.match(dup.message, /duplicate provider name "lab" \(already used at providers\[0\]\)/);
    // The same host name in two different entries is fine.
    assert.equal(
      parseProvidersYaml(`providers:\n${body}${body.replace('name: lab', 'name: lab2')}`, 't').providers.length,
      2,
    );
  });

  it('reports every problem at once, in source order, each with its line and column', () => {
    const text = edit('  - name: lab', '  - name: LAB')
      .replace('        keyFile: /keys/id', '        keyFile: rel')
      .replace('[10.0.0.0/8]', '[x]');
    const issues = issuesOf(text);
    assert.deepEqual(
      issues.map((i) => [i.path, i.line, i.col]),
      [
        ['providers[0].name', 3, 11],
        ['providers[0].hosts[0].keyFile', 8, 18],
        ['providers[0].squid.allowedClientCidrs[0]', 14, 28],
      ],
    );
    try {
      parseProvidersYaml(text, 'my.yaml');
    } catch (err) {
      const lines = (err as Error).message.split('\n');
      assert.equal(lines[0], 'configuration file my.yaml is invalid (3 problems):');
      assert.match(
        lines[1]!,
        /^ {2}- providers\[0\]\.name \(line 3, column 11\): must be a lowercase identifier .* — set name to /,
      );
    }
  });

  it('explains an empty file, a non-mapping and a missing providers key', () => {
    assert.match(issueAt(issuesOf(''), 'providers').message, /required but missing/);
    assert.match(
      issueAt(issuesOf('- a\n- b\n'), '(root)').message,
      /must be a mapping with a providers list, got a list of 2/,
    );
    assert.match(issueAt(issuesOf('providers: []\n'), 'providers').message, /at least 1 item/);
    assert.match(issueAt(issuesOf('providers: [3]\n'), 'providers[0]').message, /must be a mapping, got 3/);
  });
});

describe('parseProvidersYaml: YAML errors', () => {
  it('reports a syntax error with its line and column', () => {
    const issues = issuesOf('providers:\n  - name: a\n    hosts: [1, 2\n  type: kvm2\n');
    assert.ok(issues.length >= 1);
    assert.equal(issues[0]!.path, '(yaml)');
    assert.match(issues[0]!.message, /^YAML syntax error: Flow sequence/);
    assert.equal(issues[0]!.line, 4);
    assert.equal(issues[0]!.col, 3);
  });

  it('reports duplicate keys (e.g. an image key given twice)', () => {
    const issues = issuesOf(edit('      debian12:', '      debian12:\n        url: https://x/y\n      debian12:'));
    assert.equal(issues[0]!.path, '(yaml)');
    assert.match(issues[0]!.message, /unique/);
    assert.equal(issues[0]!.line, 13);
  });

  it('reports an alias without anchor, and refuses many documents in one file', () => {
    assert.match(issuesOf('providers: *nowhere\n')[0]!.message, /YAML/);
    assert.match(issuesOf(`${MINIMAL}---\n${MINIMAL}`)[0]!.message, /YAML syntax error/);
  });

  it('resolves anchors and aliases within the limit', () => {
    const text = `hostdefs: &h\n  keyFile: /k\n` + MINIMAL;
    assert.equal(issuesOf(text)[0]!.path, 'hostdefs');
  });

  it('refuses a billion-laughs document (aliases of aliases) quickly, in bounded memory, with a clear error', () => {
    // Nine levels of ten aliases each would expand to 10^9 strings; maxAliasCount stops it.
    const levels = ['a0: &a0 "lol"'];
    for (let i = 1; i <= 9; i++)
      levels.push(
        `a${i}: &a${i} [${Array(10)
          .fill(`*a${i - 1}`)
          .join(', ')}]`,
      );
    const text = `${levels.join('\n')}\n${MINIMAL}`;
    const heapBefore = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    const issues = issuesOf(text);
    const tookMs = performance.now() - t0;
    assert.equal(issues[0]!.path, '(yaml)');
    assert.match(issues[0]!.message, /YAML error: .*alias/i);
    assert.match(issues[0]!.fix, /at most 100 alias expansions/);
    assert.ok(tookMs < 2_000, `refused after ${tookMs} ms`);
    assert.ok(process.memoryUsage().heapUsed - heapBefore < 256 * 1024 * 1024, 'heap stayed bounded');
  });
});

describe('loadProvidersFile', () => {
  it('loads the shipped example (examples/providers.yaml)', async () => {
    const cfg = await loadProvidersFile(join(root, 'examples/providers.yaml'));
    assert.deepEqual(
      cfg.providers.map((p) => p.name),
      ['lab-a', 'lab-tcg'],
    );
    assert.equal(cfg.providers[0]!.hosts[1]!.weight, 2);
    assert.equal(cfg.providers[1]!.timeouts.rpcMs, 30000);
  });

  it('names the file in errors, and reports an unreadable file as CONFIG_UNREADABLE', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ep-config-'));
    try {
      const path = join(dir, 'providers.yaml');
      await writeFile(path, 'providers: 3\n');
      await assert.rejects(loadProvidersFile(path), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.source, path);
        assert.match(err.message, new RegExp(`^configuration file ${path} is invalid`));
        return true;
      });
      await assert.rejects(loadProvidersFile(join(dir, 'missing.yaml')), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.code, 'CONFIG_UNREADABLE');
        assert.equal(err.kind, 'Permanent');
        assert.match(err.message, /ENOENT/);
        assert.match(err.issues[0]!.fix, /check the path/);
        return true;
      });
      await writeFile(path, Buffer.alloc(1024 * 1024 + 1, 0x20));
      await assert.rejects(loadProvidersFile(path), /over the 1048576-byte limit/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('docs/operator-guide.md', () => {
  it('documents every field the schema accepts, and every field has help for fixes', () => {
    const guide = readFileSync(join(root, 'docs/operator-guide.md'), 'utf8');
    for (const [objectPath, keys] of Object.entries(ALLOWED_KEYS)) {
      for (const key of keys) {
        const full = objectPath === '' ? key : `${objectPath}.${key}`;
        assert.ok(FIELD_HELP[full], `FIELD_HELP lacks ${full}`);
        assert.ok(guide.includes(`\`${full}\``), `docs/operator-guide.md does not document \`${full}\``);
      }
    }
  });
});

it('entry and image key pairs that would share a base volume name are refused', () => {
  const yaml = `
providers:
  - name: lab
    type: kvm2
    hosts: [{ name: h1, address: 10.0.0.1, keyFile: /k, knownHostsFile: /kh }]
    images: { a-deb: { url: "http://mirror.test/a.qcow2" } }
    squid: { allowedClientCidrs: [10.0.0.0/8] }
  - name: lab-a
    type: kvm2
    hosts: [{ name: h1, address: 10.0.0.2, keyFile: /k, knownHostsFile: /kh }]
    images: { deb: { url: "http://mirror.test/b.qcow2" } }
    squid: { allowedClientCidrs: [10.0.0.0/8] }
`;
  assert.throws(
    () => parseProvidersYaml(yaml, 'clash.yaml'),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /providers\[1\]\.images\.deb/);
      assert.match(err.message, /base-lab-a-deb/);
      return true;
    },
  );
});
