/**
 * XDR of the capacity procedures (lib/libvirt/protocol.ts): NODE_GET_INFO's reply (a `char[32]`
 * model sent one char per four-byte word, then KiB of memory and seven ints), NODE_GET_MEMORY_STATS
 * (arguments, and its reply of named KiB figures) and DOMAIN_GET_INFO (a char and a short each in a
 * whole word), against bytes written out by hand; and the KiB → MiB sums of lib/kvm2/capacity.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as P from '../../lib/libvirt/protocol.ts';
import { kibToMiB, physicalKiB, reclaimableKiB } from '../../lib/kvm2/capacity.ts';

const word = (n: number): string => (n >>> 0).toString(16).padStart(8, '0');
const hyper = (n: bigint): string => n.toString(16).padStart(16, '0');
const bytes = (hex: string): Buffer => Buffer.from(hex.replace(/\s+/g, ''), 'hex');
/** An XDR string: length word, bytes, zero padding to four. */
const xstr = (s: string): string =>
  word(s.length) + Buffer.from(s).toString('hex') + '00'.repeat((4 - (s.length % 4)) % 4);

describe('NODE_GET_INFO ret', () => {
  // "x86_64" then 26 zero chars, each char in its own word.
  const model = [...'x86_64'].map((c) => word(c.charCodeAt(0))).join('') + word(0).repeat(26);
  const body = bytes(
    model +
      hyper(24684116n) + // memory, KiB
      '00000002' + // cpus
      '00000bb8' + // mhz 3000
      '00000001' + // nodes
      '00000001' + // sockets
      '00000002' + // cores
      '00000001', // threads
  );

  it('decodes the 32 model words, the u64 KiB and the seven ints, and nothing is left over', () => {
    assert.equal(body.length, 32 * 4 + 8 + 6 * 4);
    const r = P.nodeGetInfoRet.decode(body);
    assert.equal(r.model.length, 32);
    assert.deepEqual(r.model.slice(0, 7), [0x78, 0x38, 0x36, 0x5f, 0x36, 0x34, 0]);
    assert.equal(r.memory, 24684116n);
    assert.deepEqual([r.cpus, r.mhz, r.nodes, r.sockets, r.cores, r.threads], [2, 3000, 1, 1, 2, 1]);
    assert.equal(kibToMiB(r.memory), 24105);
  });

  it('a model sent as 32 bytes (not words) is refused, not misread', () => {
    const packed = bytes(Buffer.from('x86_64'.padEnd(32, '\0')).toString('hex') + hyper(24684116n) + word(2).repeat(6));
    assert.throws(() => P.nodeGetInfoRet.decode(packed));
  });
});

describe('NODE_GET_MEMORY_STATS', () => {
  it('args: nparams, cellNum (-1: all cells), flags', () => {
    const hex = Buffer.from(P.nodeGetMemoryStatsArgs.encode({ nparams: 4, cellNum: -1, flags: 0 })).toString('hex');
    assert.equal(hex, '00000004' + 'ffffffff' + '00000000');
  });

  it('ret with nparams 0 asked: no params, the count', () => {
    assert.deepEqual(P.nodeGetMemoryStatsRet.decode(bytes(word(0) + word(4))), { params: [], nparams: 4 });
  });

  it('ret: named KiB figures; free memory is free + buffers + cached', () => {
    const body = bytes(
      word(4) +
        xstr('total') +
        hyper(24684084n) +
        xstr('free') +
        hyper(23087036n) +
        xstr('buffers') +
        hyper(18148n) +
        xstr('cached') +
        hyper(522436n) +
        word(4),
    );
    const r = P.nodeGetMemoryStatsRet.decode(body);
    assert.equal(r.nparams, 4);
    const stats = new Map(r.params.map((p) => [p.field, p.value]));
    assert.deepEqual([...stats.keys()], ['total', 'free', 'buffers', 'cached']);
    assert.equal(reclaimableKiB(stats), 23087036n + 18148n + 522436n);
    assert.equal(kibToMiB(reclaimableKiB(stats)), 23073);
    assert.equal(reclaimableKiB(new Map([['free', 2048n]])), 2048n, 'a figure the host lacks counts as 0');
    assert.equal(physicalKiB(18311372n, stats), stats.get('total'), "the kernel's MemTotal over NODE_GET_INFO's cells");
    assert.equal(physicalKiB(18311372n, new Map([['free', 2048n]])), 18311372n, 'no total: NODE_GET_INFO');
  });

  it('refuses more than REMOTE_NODE_MEMORY_STATS_MAX (16) params', () => {
    const body = bytes(word(17) + (xstr('free') + hyper(1n)).repeat(17) + word(17));
    assert.throws(() => P.nodeGetMemoryStatsRet.decode(body));
  });
});

describe('DOMAIN_GET_INFO ret', () => {
  it('state (a char) and nrVirtCpu (a short) each in a word, the KiB and ns as u64', () => {
    const body = bytes(word(1) + hyper(1048576n) + hyper(786432n) + word(2) + hyper(123456789000n));
    assert.deepEqual(P.domainGetInfoRet.decode(body), {
      state: 1,
      maxMem: 1048576n,
      memory: 786432n,
      nrVirtCpu: 2,
      cpuTime: 123456789000n,
    });
  });
});
