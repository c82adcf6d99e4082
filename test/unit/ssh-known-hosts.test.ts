/**
 * known_hosts parser/matcher/verifier. Fixtures are literals made with the real OpenSSH tools
 * (ssh-keygen 9.2p1): the public keys, their `ssh-keygen -lf` fingerprints and two
 * `ssh-keygen -H` hashed lines with the host names they hash. Hand-hashed entries use a fixed
 * salt and node's HMAC as the oracle.
 */
import { createHmac } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  appendKnownHost,
  fingerprintSha256,
  formatKnownHostsLine,
  hashHostName,
  keyTypeOfBlob,
  knownHostsName,
  knownKeyTypes,
  matchHostPatterns,
  matchPattern,
  parseKnownHosts,
  verifyHostKey,
} from '../../lib/ssh/known-hosts.ts';

// `ssh-keygen -t ... -f kN`, then `ssh-keygen -lf kN.pub` for the fingerprints.
const ED25519 = 'AAAAC3NzaC1lZDI1NTE5AAAAIOyFc3j3Uh0WM2HqQeVvbmDmefwK5I6VVHXIBqEon0v7';
const ED25519_FP = 'SHA256:26rLW70qIY/HZ/fG5WRdBbFlOj1mR/h7KiOe/SR47Ko';
const P256 =
  'AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBGuRrOzXdbAw9Bau911MNBhpvqNyEGCuedF1fw8yD1uF6a3QklNO3GZrbXJvC1l5B6ELmbAU/b9V4fKZvujJURI=';
const P256_FP = 'SHA256:YpQ7UE0vrAFv1lFioM5jPUPXM7yQGZQrdB0F5PcThb8';
const RSA =
  'AAAAB3NzaC1yc2EAAAADAQABAAAAgQDR8MzAMPpW+O6qs/SohgRHf4hP86Vt90xrR3Edvgoy+PTtOln0u6J8VmPvjpX98W5QoS43/2IDeKyJTY0KJcD0bBz/ANzD9IQ4L+EvL61rWwaDZcWghBmT6pjJb673CiwKXnVJvwiylGOjRR5NVlea8vyaUA2oaDB+6bhmqKKzSw==';
const RSA_FP = 'SHA256:jMabR3XYKFBrKEJrjVVYzgMPf4q8hs+gA1nv8bCvq8I';
const P384 =
  'AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBNEbpXH4l0eUIExoQzeDkBJSWMKhpDTG9Qd9RQXxTRvdalVhV+79rI/9wGM1rCTKebXJYwu3R/WaTjf9GlnTjvGtRCnMTHYGfUYTk7zINqKLbmDWHfq/dscL0d98tOai7g==';
const P384_FP = 'SHA256:8c6lTHoMF3zhDoZunZL0OcQQd6L51QQv4fZapF996uA';
const P521 =
  'AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBAEzb6cSap5Lww7CtlnW1rFm4HrsKeoFJbjJ3ttKpIyDMTeot2iA1zZHoOU/Is5a3XybqrIMKZz2EQHM0pFe2SRhqAH3CGvrrDmN0qiVo/0mnrgtyOf7h4ZzHQUk/DsHQ8k1geikIFDPrYW9K0ecjufl8yCA+0snucd3MY6HfH/Aax2stQ==';
const P521_FP = 'SHA256:Vf1IHZH9HrlmK0Yp2/xVmM2zs78MZ00uCrj14u31jFs';

// `ssh-keygen -H -f kh` over "proxyhost.example.test <ED25519>" and "[10.20.30.40]:2222 <P256>".
const HASHED_PROXYHOST = `|1|HIFA4vr3wOtZmyy07+PGFolHXhs=|61K9OSq6OVGof6FkPT68VAkayA0= ssh-ed25519 ${ED25519}`;
const HASHED_IP_2222 = `|1|0CUMAsWenGsrtgSFCpcNxL8KFGg=|9jhqdaAmB6/Gg+w1e7gH/8kjOwg= ecdsa-sha2-nistp256 ${P256}`;

const blob = (b64: string): Buffer => Buffer.from(b64, 'base64');
const parse = (text: string) => parseKnownHosts(text).entries;

describe('fingerprintSha256', () => {
  it('matches ssh-keygen -lf for every supported key type', () => {
    assert.equal(fingerprintSha256(blob(ED25519)), ED25519_FP);
    assert.equal(fingerprintSha256(blob(P256)), P256_FP);
    assert.equal(fingerprintSha256(blob(P384)), P384_FP);
    assert.equal(fingerprintSha256(blob(P521)), P521_FP);
    assert.equal(fingerprintSha256(blob(RSA)), RSA_FP);
  });
});

describe('keyTypeOfBlob', () => {
  it('reads the type string at the head of a key blob', () => {
    assert.equal(keyTypeOfBlob(blob(ED25519)), 'ssh-ed25519');
    assert.equal(keyTypeOfBlob(blob(P521)), 'ecdsa-sha2-nistp521');
    assert.equal(keyTypeOfBlob(blob(RSA)), 'ssh-rsa');
  });
  it('rejects truncated or absurd blobs', () => {
    assert.equal(keyTypeOfBlob(Buffer.alloc(3)), undefined);
    assert.equal(keyTypeOfBlob(Buffer.from([0, 0, 0, 20, 0x61])), undefined);
    assert.equal(keyTypeOfBlob(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x61])), undefined);
  });
});

describe('host patterns', () => {
  it('matches * and ? wildcards like OpenSSH match_pattern', () => {
    assert.ok(matchPattern('web1.example.test', '*.example.test'));
    assert.ok(matchPattern('web1.example.test', 'web?.example.test'));
    assert.ok(!matchPattern('web10.example.test', 'web?.example.test'));
    assert.ok(matchPattern('anything', '*'));
    assert.ok(matchPattern('', '*'));
    assert.ok(matchPattern('abcabd', '*abd'));
    assert.ok(!matchPattern('example.test', '*.example.test'));
    assert.ok(matchPattern('[10.0.0.1]:2222', '[10.0.0.*]:2222'));
    assert.ok(!matchPattern('[10.0.0.1]:2223', '[10.0.0.*]:2222'));
  });
  it('lets a negated pattern veto any positive match, and needs one positive', () => {
    const list = ['*.example.test', '!db.example.test'];
    assert.ok(matchHostPatterns('web.example.test', list));
    assert.ok(!matchHostPatterns('db.example.test', list));
    assert.ok(!matchHostPatterns('other.test', ['!db.example.test']));
  });
  it('is case-insensitive', () => {
    assert.ok(matchHostPatterns('WEB.Example.Test', ['web.example.TEST']));
  });
  it('names port 22 bare and other ports as [host]:port', () => {
    assert.equal(knownHostsName('Host.Example', 22), 'host.example');
    assert.equal(knownHostsName('10.0.0.1', 2222), '[10.0.0.1]:2222');
    assert.equal(knownHostsName('::1', 2222), '[::1]:2222');
  });
});

describe('parseKnownHosts', () => {
  it('skips comments and blank lines, accepts CRLF, keeps line numbers and comments', () => {
    const text = `# a comment\r\n\r\n   \nhost.test ssh-ed25519 ${ED25519} my comment here\r\n  # indented comment\n`;
    const { entries, invalid } = parseKnownHosts(text);
    assert.deepEqual(invalid, []);
    assert.equal(entries.length, 1);
    assert.equal(entries[0]?.line, 4);
    assert.equal(entries[0]?.comment, 'my comment here');
    assert.equal(entries[0]?.marker, null);
  });
  it('parses markers and comma lists', () => {
    const [revoked, ca] = parse(`@revoked a,b ssh-rsa ${RSA}\n@cert-authority *.test ssh-ed25519 ${ED25519}\n`);
    assert.equal(revoked?.marker, 'revoked');
    assert.deepEqual(revoked?.names, { kind: 'patterns', patterns: ['a', 'b'] });
    assert.equal(ca?.marker, 'cert-authority');
  });
  it('reports malformed lines instead of throwing', () => {
    const text = [
      `@bogus host ssh-ed25519 ${ED25519}`,
      'host ssh-ed25519',
      'host ssh-ed25519 not*base64',
      `host ssh-rsa ${ED25519}`,
      `|1|short|hash ssh-ed25519 ${ED25519}`,
      `|1|HIFA4vr3wOtZmyy07+PGFolHXhs=|61K9OSq6OVGof6FkPT68VAkayA0=|x ssh-ed25519 ${ED25519}`,
      'host 1024 65537 12345678901234567890',
      `good ssh-ed25519 ${ED25519}`,
    ].join('\n');
    const { entries, invalid } = parseKnownHosts(text);
    assert.equal(entries.length, 1);
    assert.deepEqual(
      invalid.map((i) => i.line),
      [1, 2, 3, 4, 5, 6, 7],
    );
    assert.match(invalid[3]?.reason ?? '', /does not match the key's own type ssh-ed25519/);
  });
});

describe('hashed entries', () => {
  it('hashes like ssh-keygen -H: |1|base64(salt)|base64(HMAC-SHA1(salt, name))', () => {
    const salt = Buffer.from(Array.from({ length: 20 }, (_, i) => i + 1));
    const expectedHash = createHmac('sha1', salt).update('[web.example.test]:2200').digest('base64');
    const field = hashHostName('[web.example.test]:2200', salt);
    assert.equal(field, `|1|${salt.toString('base64')}|${expectedHash}`);
    const entries = parse(`${field} ssh-ed25519 ${ED25519}\n`);
    assert.deepEqual(verifyHostKey(entries, 'web.example.test', 2200, blob(ED25519)), { ok: true });
    assert.equal(verifyHostKey(entries, 'web.example.test', 22, blob(ED25519)).ok, false);
    assert.equal(verifyHostKey(entries, 'other.example.test', 2200, blob(ED25519)).ok, false);
  });
  it('matches lines hashed by the real ssh-keygen -H, and only their hosts', () => {
    const entries = parse(`${HASHED_PROXYHOST}\n${HASHED_IP_2222}\n`);
    assert.deepEqual(verifyHostKey(entries, 'proxyhost.example.test', 22, blob(ED25519)), { ok: true });
    assert.deepEqual(verifyHostKey(entries, 'PROXYHOST.example.test', 22, blob(ED25519)), { ok: true });
    assert.deepEqual(verifyHostKey(entries, '10.20.30.40', 2222, blob(P256)), { ok: true });
    assert.equal(verifyHostKey(entries, '10.20.30.40', 22, blob(P256)).ok, false);
    assert.equal(verifyHostKey(entries, 'proxyhost.example.test', 2222, blob(ED25519)).ok, false);
    const wrong = verifyHostKey(entries, '10.20.30.40', 2222, blob(ED25519));
    assert.equal(wrong.ok === false && wrong.reason, 'mismatch');
  });
});

describe('verifyHostKey', () => {
  const kh = [
    `web.example.test,web-alias.example.test ssh-ed25519 ${ED25519}`,
    `[10.0.0.5]:2222 ecdsa-sha2-nistp256 ${P256}`,
    `*.fleet.test,!bad.fleet.test ssh-rsa ${RSA}`,
    `@revoked * ecdsa-sha2-nistp384 ${P384}`,
    `listed-and-revoked.test ecdsa-sha2-nistp384 ${P384}`,
    `@cert-authority ca.test ecdsa-sha2-nistp521 ${P521}`,
  ].join('\n');
  const entries = parse(kh);

  it('accepts the recorded key for a plain name, an alias, a [host]:port and a wildcard', () => {
    assert.deepEqual(verifyHostKey(entries, 'web.example.test', 22, blob(ED25519)), { ok: true });
    assert.deepEqual(verifyHostKey(entries, 'web-alias.example.test', 22, blob(ED25519)), { ok: true });
    assert.deepEqual(verifyHostKey(entries, '10.0.0.5', 2222, blob(P256)), { ok: true });
    assert.deepEqual(verifyHostKey(entries, 'n1.fleet.test', 22, blob(RSA)), { ok: true });
  });
  it('does not apply a port-22 entry to another port, nor a [host]:port entry to port 22', () => {
    const a = verifyHostKey(entries, 'web.example.test', 2222, blob(ED25519));
    assert.equal(a.ok === false && a.reason, 'unknown');
    const b = verifyHostKey(entries, '10.0.0.5', 22, blob(P256));
    assert.equal(b.ok === false && b.reason, 'unknown');
  });
  it('reports an unknown host with the presented fingerprint', () => {
    assert.deepEqual(verifyHostKey(entries, 'new.example.test', 22, blob(ED25519)), {
      ok: false,
      reason: 'unknown',
      fingerprint: ED25519_FP,
      keyType: 'ssh-ed25519',
      expected: [],
    });
  });
  it('honours negation: a negated host is unknown, not matched by the wildcard', () => {
    const v = verifyHostKey(entries, 'bad.fleet.test', 22, blob(RSA));
    assert.equal(v.ok === false && v.reason, 'unknown');
  });
  it('reports a mismatch with the presented and expected fingerprints', () => {
    assert.deepEqual(verifyHostKey(entries, 'web.example.test', 22, blob(P256)), {
      ok: false,
      reason: 'mismatch',
      fingerprint: P256_FP,
      keyType: 'ecdsa-sha2-nistp256',
      expected: [`ssh-ed25519 ${ED25519_FP}`],
    });
  });
  it('treats a known host presenting a key of another type as a mismatch', () => {
    const v = verifyHostKey(entries, 'n1.fleet.test', 22, blob(ED25519));
    assert.equal(v.ok === false && v.reason, 'mismatch');
  });
  it('refuses a revoked key even where a plain entry lists the same key', () => {
    const v = verifyHostKey(entries, 'listed-and-revoked.test', 22, blob(P384));
    assert.deepEqual(v, {
      ok: false,
      reason: 'revoked',
      fingerprint: P384_FP,
      keyType: 'ecdsa-sha2-nistp384',
      expected: [],
    });
  });
  it('applies @revoked only to hosts its pattern matches', () => {
    const only = parse(`@revoked other.test ssh-ed25519 ${ED25519}\nweb.test ssh-ed25519 ${ED25519}\n`);
    assert.deepEqual(verifyHostKey(only, 'web.test', 22, blob(ED25519)), { ok: true });
  });
  it('never takes a @cert-authority key for a plain host key', () => {
    const v = verifyHostKey(entries, 'ca.test', 22, blob(P521));
    assert.equal(v.ok === false && v.reason, 'unknown');
    assert.deepEqual(knownKeyTypes(entries, 'ca.test', 22), []);
  });
  it('lists the key types recorded for a host (for host key algorithm ordering)', () => {
    assert.deepEqual(knownKeyTypes(entries, 'n1.fleet.test', 22), ['ssh-rsa']);
    assert.deepEqual(knownKeyTypes(entries, 'listed-and-revoked.test', 22), ['ecdsa-sha2-nistp384']);
  });
});

describe('recording keys', () => {
  it('formats plain and hashed lines that verify', () => {
    const plain = formatKnownHostsLine('Web.Test', 2222, blob(ED25519));
    assert.equal(plain, `[web.test]:2222 ssh-ed25519 ${ED25519}`);
    const salt = Buffer.alloc(20, 9);
    const hashed = formatKnownHostsLine('web.test', 22, blob(RSA), { hashed: true, salt });
    assert.equal(hashed, `${hashHostName('web.test', salt)} ssh-rsa ${RSA}`);
    assert.deepEqual(verifyHostKey(parse(`${plain}\n${hashed}\n`), 'web.test', 22, blob(RSA)), { ok: true });
    assert.deepEqual(verifyHostKey(parse(plain), 'web.test', 2222, blob(ED25519)), { ok: true });
    assert.throws(() => formatKnownHostsLine('h', 22, Buffer.alloc(2)), TypeError);
  });
  it('appends to a file, adding a missing final newline first, and creates a missing file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ep-kh-'));
    try {
      const path = join(dir, 'known_hosts');
      await writeFile(path, `web.test ssh-ed25519 ${ED25519}`);
      await appendKnownHost(path, '10.0.0.9', 2200, blob(P256));
      const text = await readFile(path, 'utf8');
      assert.equal(text, `web.test ssh-ed25519 ${ED25519}\n[10.0.0.9]:2200 ecdsa-sha2-nistp256 ${P256}\n`);
      const fresh = join(dir, 'new_known_hosts');
      await appendKnownHost(fresh, 'h.test', 22, blob(RSA));
      assert.equal(await readFile(fresh, 'utf8'), `h.test ssh-rsa ${RSA}\n`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
