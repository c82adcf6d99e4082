/**
 * The destination policy and client credentials in the providers file and in a proxy's
 * overrides: defaults, every refusal with its field and fix (mail ports inside a range, an
 * allow-all list without allowOpenProxy, a private health target the policy would refuse, bad
 * destinations), how overrides combine with the entry (lists added, report behind the flag,
 * credentials not overridable), and the htpasswd and probe files (hashes only, no password in
 * any error).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ConfigError,
  parseProvidersYaml,
  ProxySpecError,
  readHtpasswd,
  readProbeCredentials,
  resolveSquid,
  basicProxyAuthorization,
} from '../../lib/config/index.ts';
import type { SquidConfig } from '../../lib/config/index.ts';

const entryYaml = (squid: string, health = '') => `
providers:
  - name: lab
    type: kvm2
    hosts: [{ name: h1, address: 192.0.2.10, keyFile: /k, knownHostsFile: /kh }]
    images: { d12: { url: "https://mirror.example/d12.qcow2" } }
    squid: { allowedClientCidrs: [10.0.0.0/8]${squid} }
${health}`;

function issues(text: string): { path: string; message: string; fix: string }[] {
  try {
    parseProvidersYaml(text, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return [...err.issues];
  }
  assert.fail('expected a ConfigError');
}

const entrySquid = (squid = ''): SquidConfig => parseProvidersYaml(entryYaml(squid), 't.yaml').providers[0]!.squid;

describe('the policy in the providers file', () => {
  it('defaults to enforce, no extra destinations, ports 80, 443 and 1024-65535', () => {
    const s = entrySquid();
    assert.equal(s.mode, 'enforce');
    assert.deepEqual(s.allowDestinations, []);
    assert.deepEqual(s.denyDestinations, []);
    assert.deepEqual(s.allowPorts, ['80', '443', '1024-65535']);
    assert.equal(s.auth, undefined);
  });

  it('takes blocks (canonical), names (lowercase), ports as numbers or ranges', () => {
    const s = entrySquid(
      ', allowDestinations: ["FD00::1/128", API.Example.org, .corp.example], denyDestinations: [203.0.113.0/24], allowPorts: [443, 25, "8000-8100"], mode: report',
    );
    assert.deepEqual(s.allowDestinations, ['fd00::1/128', 'api.example.org', '.corp.example']);
    assert.deepEqual(s.allowPorts, ['443', '25', '8000-8100']);
    assert.equal(s.mode, 'report');
  });

  it('refuses a range holding a mail port, naming it and how to split', () => {
    const [i] = issues(entryYaml(', allowPorts: [80, "1-65535"]'));
    assert.equal(i?.path, 'providers[0].squid.allowPorts[1]');
    assert.match(i.message, /mail ports 25, 465, 587/);
    assert.match(i.fix, /split the range/);
  });

  it('refuses an allow list that opens every destination unless allowOpenProxy', () => {
    const [i] = issues(entryYaml(', allowDestinations: [0.0.0.0/1, 128.0.0.0/1]'));
    assert.equal(i?.path, 'providers[0].squid.allowDestinations');
    assert.match(i.fix, /allowOpenProxy: true/);
    parseProvidersYaml(`allowOpenProxy: true\n${entryYaml(', allowDestinations: [0.0.0.0/0]')}`, 't.yaml');
  });

  it('refuses a health target in a reserved range that the policy would refuse, with the fix', () => {
    const health = '    health: { target: "10.231.1.1:8481" }';
    const [i] = issues(entryYaml('', health));
    assert.equal(i?.path, 'providers[0].squid.allowDestinations');
    assert.match(i.message, /health target 10\.231\.1\.1 \(private network/);
    assert.match(i.fix, /add "10\.231\.1\.1\/32" to squid\.allowDestinations/);
    parseProvidersYaml(entryYaml(', allowDestinations: [10.231.0.0/16]', health), 't.yaml');
    parseProvidersYaml(entryYaml(', mode: report', health), 't.yaml');
    parseProvidersYaml(entryYaml('', '    health: { target: "198.51.100.7:443" }'), 't.yaml');
  });

  it('refuses credentials without probe credentials where a health target is set', () => {
    const health = '    health: { target: "198.51.100.7:443" }';
    const found = issues(entryYaml(', auth: { htpasswdFile: /etc/ep/users }', health));
    assert.deepEqual(
      found.map((i) => i.path),
      ['providers[0].squid.auth.probeCredentialsFile'],
    );
    assert.match(found[0]!.fix, /user:password/);
    parseProvidersYaml(entryYaml(', auth: { htpasswdFile: /etc/ep/users }'), 't.yaml');
    parseProvidersYaml(
      entryYaml(', auth: { htpasswdFile: /etc/ep/users, probeCredentialsFile: /etc/ep/probe }', health),
      't.yaml',
    );
  });

  it('refuses what is neither a block nor a name, and bad ports, naming the element', () => {
    const found = issues(entryYaml(', allowDestinations: [10.0.0.1/8, "a b"], allowPorts: [0, "9-3"], mode: open'));
    const paths = found.map((i) => i.path).sort();
    assert.deepEqual(paths, [
      'providers[0].squid.allowDestinations[0]',
      'providers[0].squid.allowDestinations[1]',
      'providers[0].squid.allowPorts[0]',
      'providers[0].squid.allowPorts[1]',
      'providers[0].squid.mode',
    ]);
    assert.match(found.find((i) => i.path.endsWith('allowDestinations[0]'))!.fix, /10\.0\.0\.0\/8/);
  });
});

describe('resolveSquid: per-proxy overrides', () => {
  it('adds destination lists to the entry, replaces ports, keeps the entry mode', () => {
    const entry = entrySquid(', allowDestinations: [10.231.1.1/32], denyDestinations: [bad.example]');
    const r = resolveSquid(entry, { allowDestinations: ['10.9.0.0/16'], allowPorts: [443] }, false);
    assert.deepEqual(r.egress, {
      mode: 'enforce',
      allowDestinations: ['10.231.1.1/32', '10.9.0.0/16'],
      denyDestinations: ['bad.example'],
      allowPorts: ['443'],
    });
    assert.equal(r.auth, undefined);
  });

  it('refuses report mode and allow-all lists from a client without allowOpenProxy, and credentials at all', () => {
    const entry = entrySquid();
    const field = (fn: () => unknown): string => {
      try {
        fn();
      } catch (err) {
        assert.ok(err instanceof ProxySpecError, String(err));
        return err.field;
      }
      assert.fail('expected a ProxySpecError');
    };
    assert.equal(
      field(() => resolveSquid(entry, { mode: 'report' }, false)),
      'squid.mode',
    );
    assert.equal(resolveSquid(entry, { mode: 'report' }, true).egress?.mode, 'report');
    assert.equal(
      field(() => resolveSquid(entry, { allowDestinations: ['::/0'] }, false)),
      'squid.allowDestinations',
    );
    assert.equal(
      field(() => resolveSquid(entry, { allowPorts: ['20-30'] }, false)),
      'squid.allowPorts[0]',
    );
    assert.equal(
      field(() => resolveSquid(entry, { allowDestinations: ['x y'] }, false)),
      'squid.allowDestinations[0]',
    );
    const auth = { auth: { htpasswdFile: '/etc/passwd' } } as never;
    assert.equal(
      field(() => resolveSquid(entry, auth, true)),
      'squid.auth',
    );
  });
});

describe('credentials files', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-htpasswd-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const file = async (name: string, text: string): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  };
  const HASHES = [
    '$2y$05$abcdefghijklmnopqrstuuJ1xqkK0xLg7yQ1q0RZ5cV8K0sVj4Y2y',
    '$6$abcdefgh$' + 'A'.repeat(86),
    '$apr1$abcdefgh$' + 'b'.repeat(22),
  ];

  it('reads users and hashes, skipping comments and blank lines', async () => {
    const path = await file('ok', `# users\nalice:${HASHES[0]}\n\nbob:${HASHES[1]}\r\ncarol:${HASHES[2]}\n`);
    assert.deepEqual(readHtpasswd(path, 'f'), [
      { user: 'alice', hash: HASHES[0] },
      { user: 'bob', hash: HASHES[1] },
      { user: 'carol', hash: HASHES[2] },
    ]);
  });

  it('refuses cleartext, DES and {SHA} without repeating the line, and duplicates and empty files', async () => {
    for (const secret of ['hunter2-cleartext', 'abJnggxhB/yWI', '{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=']) {
      const path = await file('bad', `alice:${HASHES[0]}\nbob:${secret}\n`);
      assert.throws(
        () => readHtpasswd(path, 'squid.auth.htpasswdFile'),
        (err: unknown) =>
          err instanceof ProxySpecError &&
          err.field === 'squid.auth.htpasswdFile' &&
          /line 2: user bob has no supported password hash/.test(err.message) &&
          !err.message.includes(secret),
      );
    }
    const dup = await file('dup', `a:${HASHES[0]}\na:${HASHES[1]}\n`);
    assert.throws(() => readHtpasswd(dup, 'f'), /listed twice/);
    const none = await file('none', '# nobody\n');
    assert.throws(() => readHtpasswd(none, 'f'), /lists no user/);
    assert.throws(() => readHtpasswd(join(dir, 'missing'), 'f'), /cannot be read \(ENOENT\)/);
  });

  it('resolveSquid carries the hashes, never a password; the probe file gives a Basic header', async () => {
    const users = await file('users', `alice:${HASHES[1]}\n`);
    const probe = await file('probe', 'ep-probe:s3cret-probe\n');
    const entry = entrySquid(`, auth: { htpasswdFile: ${users}, probeCredentialsFile: ${probe} }`);
    const r = resolveSquid(entry, undefined, false);
    assert.deepEqual(r.auth, {
      realm: 'egress-proxies',
      users: [{ user: 'alice', hash: HASHES[1] }],
      probeCredentialsFile: probe,
    });
    assert.ok(!JSON.stringify(r).includes('s3cret-probe'));
    const creds = readProbeCredentials(probe, 'f');
    assert.deepEqual(creds, { user: 'ep-probe', password: 's3cret-probe' });
    assert.equal(basicProxyAuthorization(creds), `Basic ${Buffer.from('ep-probe:s3cret-probe').toString('base64')}`);
    const bad = await file('probe-bad', 'no-colon-here\n');
    assert.throws(
      () => readProbeCredentials(bad, 'f'),
      (e: unknown) => !(e as Error).message.includes('no-colon'),
    );
  });
});
