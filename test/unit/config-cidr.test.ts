/**
 * CIDR parsing: IPv4 and IPv6 (compressed, embedded IPv4), canonical forms (RFC 5952), host bits
 * refused with the canonical network in the answer, malformed prefixes and addresses.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../../lib/config/cidr.ts';

function canonical(text: string): string {
  const r = parseCidr(text);
  assert.ok(r.ok, `${text}: ${r.ok ? '' : r.problem}`);
  return r.cidr.canonical;
}

describe('parseCidr', () => {
  it('accepts networks and gives their canonical form', () => {
    const cases: [string, string][] = [
      ['10.0.0.0/8', '10.0.0.0/8'],
      ['0.0.0.0/0', '0.0.0.0/0'],
      ['192.0.2.7/32', '192.0.2.7/32'],
      ['::/0', '::/0'],
      ['2001:db8::/32', '2001:db8::/32'],
      ['2001:DB8:0:0:0:0:0:0/32', '2001:db8::/32'],
      ['fe80::/10', 'fe80::/10'],
      ['::1/128', '::1/128'],
      ['2001:db8:0:1:0:0:0:0/64', '2001:db8:0:1::/64'],
      ['2001:0:0:1:0:0:0:0/64', '2001:0:0:1::/64'],
      ['::ffff:192.0.2.0/120', '::ffff:c000:200/120'],
      ['1:0:0:2:0:0:0:0/64', '1:0:0:2::/64'],
      ['1:0:0:2:0:0:3:4/128', '1::2:0:0:3:4/128'],
    ];
    for (const [input, want] of cases) assert.equal(canonical(input), want, input);
    const r = parseCidr('2001:db8::/32');
    assert.ok(r.ok);
    assert.equal(r.cidr.family, 6);
    assert.equal(r.cidr.prefixLength, 32);
    assert.deepEqual([...r.cidr.bytes.slice(0, 4)], [0x20, 0x01, 0x0d, 0xb8]);
  });

  it('refuses host bits with the canonical network', () => {
    const cases: [string, string][] = [
      ['10.1.2.3/8', '10.0.0.0/8'],
      ['192.0.2.129/25', '192.0.2.128/25'],
      ['2001:db8::1/64', '2001:db8::/64'],
      ['fe80::1/10', 'fe80::/10'],
      ['10.0.0.1/0', '0.0.0.0/0'],
    ];
    for (const [input, want] of cases) {
      const r = parseCidr(input);
      assert.ok(!r.ok, input);
      assert.match(r.problem, /host bits/);
      assert.equal(r.canonical, want, input);
    }
  });

  it('refuses what is not a CIDR block', () => {
    for (const bad of [
      '10.0.0.0',
      '10.0.0.0/',
      '10.0.0.0/33',
      '10.0.0.0/08',
      '10.0.0.0/-1',
      '10.0.0.0/8/8',
      '10.0.0/8',
      '256.0.0.0/8',
      'fe80::/129',
      'fe80::%eth0/64',
      'example.com/8',
      '/8',
      '',
      ' 10.0.0.0/8',
    ]) {
      const r = parseCidr(bad);
      assert.equal(r.ok, false, bad);
    }
  });
});
