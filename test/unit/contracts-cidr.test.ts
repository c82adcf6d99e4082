/**
 * CIDR parsing: IPv4 and IPv6 (compressed, embedded IPv4), canonical forms (RFC 5952), host bits
 * refused with the canonical network in the answer, malformed prefixes and addresses, addresses
 * read as node:net reads them; and the open-proxy rule: every way of writing "every address" is
 * found, alone or as a covering set, and ordinary networks are not.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isIPv4, isIPv6 } from 'node:net';
import {
  blockCovers,
  coversEverything,
  openBlocks,
  parseCidr,
  RESERVED_DESTINATIONS,
  reservedBlockOf,
} from '../../contracts/cidr.ts';

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

describe('parseCidr reads addresses as node:net does (zones refused)', () => {
  it('agrees with isIPv4/isIPv6 on hand-picked and generated texts', () => {
    const picked = [
      '01.0.0.0',
      '0.0.0.0',
      '1.2.3',
      '0',
      '1:2:3:4:5:6:7::',
      '::1.2.3.4',
      '1:2:3:4:5:6:1.2.3.4',
      '1:2:3:4:5:6:7:1.2.3.4',
      '::ffff:01.2.3.4',
      '1.2.3.4::',
      '::',
      '0:0:0:0:0:0:0:0',
      '00000::',
      '1::2::3',
      ':1::',
      '1::2:',
      '::ffff:256.1.1.1',
      '1:2:3:4:5:6:7:8::',
      '::1:2:3:4:5:6:7',
      '::1:2:3:4:5:6:7:8',
      '1:2:3:4::5:6:7:8',
      '::1.2.3.4:1',
      '1.2.3.4::1.2.3.4',
      'ffff::FFFF',
    ];
    const atoms = ['', '0', '1', '01', 'ffff', 'FFFF', '12345', 'g', '1.2.3.4', '256.0.0.1', '::', ':', '255', '.'];
    const seps = [':', '::', '.', ''];
    let seed = 17;
    const next = (k: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % k;
    };
    const generated = Array.from({ length: 20_000 }, () => {
      let s = '';
      for (let i = 0, n = 1 + next(9); i < n; i++) s += `${atoms[next(atoms.length)]}${seps[next(seps.length)]}`;
      return s.slice(0, s.length - next(2));
    });
    for (const addr of [...picked, ...generated]) {
      const r = parseCidr(`${addr}/0`);
      const read = r.ok || r.canonical !== undefined;
      assert.equal(read, isIPv4(addr) || isIPv6(addr), addr);
    }
  });
});

describe('the open-proxy rule', () => {
  it('finds every address written alone, in every accepted spelling', () => {
    for (const open of ['0.0.0.0/0', '::/0', '::ffff:0.0.0.0/96', '::ffff:0:0/96', '::/1', '0:0:0:0:0:0:0:0/0']) {
      assert.equal(coversEverything([open]), true, open);
      assert.equal(coversEverything(['10.0.0.0/8', open]), true, open);
      assert.deepEqual(
        openBlocks(['10.0.0.0/8', open]).map((b) => b.index),
        [1],
        open,
      );
    }
    assert.deepEqual(openBlocks(['0.0.0.0/0']), [{ index: 0, problem: 'admits every address' }]);
    assert.deepEqual(openBlocks(['::ffff:0.0.0.0/96']), [{ index: 0, problem: 'admits every IPv4 address' }]);
    assert.deepEqual(
      openBlocks(['0.0.0.0/0', '10.0.0.0/8', '::/0']).map((b) => b.index),
      [0, 2],
    );
  });

  it('finds covering sets: a /1 pair per family, IPv4 and IPv4-mapped halves mixed', () => {
    const sets = [
      ['0.0.0.0/1', '128.0.0.0/1'],
      ['::/1', '8000::/1'],
      ['8000::/1', '::/1'],
      ['0.0.0.0/1', '::ffff:128.0.0.0/97'],
      ['::ffff:0:0/97', '::ffff:128.0.0.0/97'],
      ['0.0.0.0/2', '64.0.0.0/2', '10.0.0.0/8', '128.0.0.0/1'],
    ];
    for (const set of sets) {
      assert.equal(coversEverything(set), true, set.join(' '));
      assert.equal(openBlocks(set).length, 1, set.join(' '));
    }
    assert.deepEqual(openBlocks(['0.0.0.0/1', '10.0.0.0/8', '128.0.0.0/1']), [
      { index: 2, problem: 'with 0.0.0.0/1, 10.0.0.0/8 before it admits every IPv4 address' },
    ]);
  });

  it('refuses "0/0" and "0.0.0.0/00" as blocks, so they can never pass as safe ones', () => {
    for (const bad of ['0/0', '0.0.0.0/00', '::/00', '0.0.0.0/0 ', '0.0.0.0/+0']) {
      assert.equal(parseCidr(bad).ok, false, bad);
    }
  });

  it('leaves ordinary networks alone', () => {
    for (const set of [
      ['10.0.0.0/8'],
      ['0.0.0.0/1'],
      ['128.0.0.0/1', '4000::/2'],
      ['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/3'],
      ['2001:db8::/32', 'fd00::/8', '::ffff:10.0.0.0/104'],
      ['8000::/1', '::/96'],
      ['0.0.0.0/1', '128.0.0.1/32'],
      ['x', '0/0'],
    ]) {
      assert.equal(coversEverything(set), false, set.join(' '));
      assert.deepEqual(openBlocks(set), [], set.join(' '));
    }
  });
});

describe('reserved destinations', () => {
  const block = (text: string) => {
    const r = parseCidr(text);
    assert.ok(r.ok, text);
    return r.cidr;
  };

  it('finds every range the policy denies by default, in IPv4, IPv6 and IPv4-mapped form', () => {
    const cases: [string, RegExp][] = [
      ['127.0.0.1', /loopback/],
      ['10.231.1.1', /RFC 1918/],
      ['172.31.255.255', /RFC 1918/],
      ['192.168.122.1', /RFC 1918/],
      ['169.254.169.254', /metadata/],
      ['100.64.0.1', /carrier-grade/],
      ['0.0.0.0', /this network/],
      ['224.0.0.251', /multicast/],
      ['255.255.255.255', /broadcast/],
      ['::1', /IPv6 loopback/],
      ['::', /unspecified/],
      ['fe80::1', /link-local/],
      ['fd00::1', /unique local/],
      ['fc12:3456::1', /unique local/],
      ['ff02::1', /IPv6 multicast/],
      ['::ffff:127.0.0.1', /loopback/],
      ['::ffff:169.254.169.254', /metadata/],
      ['::ffff:a00:1', /RFC 1918/],
    ];
    for (const [address, what] of cases) assert.match(reservedBlockOf(address)?.what ?? 'none', what, address);
  });

  it('leaves public addresses and non-addresses alone', () => {
    for (const address of [
      '198.51.100.7',
      '1.1.1.1',
      '100.128.0.1',
      '172.32.0.1',
      '2001:db8::1',
      '::ffff:8.8.8.8',
      'example.org',
      '10.0.0.1/8',
    ]) {
      assert.equal(reservedBlockOf(address), undefined, address);
    }
  });

  it('blockCovers compares blocks across the IPv4-mapped range', () => {
    assert.ok(blockCovers(block('10.0.0.0/8'), block('10.1.0.0/16')));
    assert.ok(!blockCovers(block('10.1.0.0/16'), block('10.0.0.0/8')));
    assert.ok(blockCovers(block('::ffff:0.0.0.0/96'), block('192.0.2.0/24')));
    assert.ok(blockCovers(block('10.0.0.0/8'), block('::ffff:10.0.0.1/128')));
    assert.ok(!blockCovers(block('fc00::/7'), block('fe80::/10')));
  });

  it('lists no block inside another (Squid would drop it with a warning)', () => {
    const blocks = RESERVED_DESTINATIONS.map((r) => block(r.cidr));
    blocks.forEach((a, i) =>
      blocks.forEach((b, j) => assert.ok(i === j || !blockCovers(a, b), `${a.canonical} holds ${b.canonical}`)),
    );
  });
});
