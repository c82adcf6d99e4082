/**
 * Framing (lib/libvirt/packet.ts) against hand-written frames: the parser reassembles packets split
 * at every byte boundary, rejects a bad length word as soon as it is complete (before any body
 * arrives, without allocating for it), and refuses to be used after a framing error.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_PACKET_SIZE, MIN_PACKET_SIZE } from '../../lib/libvirt/constants.ts';
import { LibvirtProtocolError } from '../../lib/libvirt/errors.ts';
import { decodeHeader, encodePacket, encodePrefix, PacketParser } from '../../lib/libvirt/packet.ts';
import type { Packet } from '../../lib/libvirt/packet.ts';
import {
  ALL_FRAMES,
  hex,
  KEEPALIVE_PING,
  KEEPALIVE_PONG,
  STREAM_DATA,
  VOL_UPLOAD_CALL,
} from './fixtures/libvirt-frames.ts';
import type { Frame } from './fixtures/libvirt-frames.ts';

const STREAM = Buffer.concat(ALL_FRAMES.map((f) => f.bytes));

function assertPackets(got: Packet[], want: readonly Frame[]): void {
  assert.equal(got.length, want.length, 'packet count');
  for (let i = 0; i < want.length; i++) {
    assert.deepEqual(got[i]!.header, want[i]!.header, `header of packet ${i}`);
    assert.equal(got[i]!.body.toString('hex'), want[i]!.bytes.subarray(28).toString('hex'), `body of packet ${i}`);
  }
}

function pushAll(parser: PacketParser, chunks: Buffer[]): Packet[] {
  const out: Packet[] = [];
  for (const c of chunks) out.push(...parser.push(c));
  return out;
}

describe('hand-written frames', () => {
  it('carry a length word equal to their size, and the header written beside them', () => {
    for (const f of ALL_FRAMES) {
      assert.equal(f.bytes.readUInt32BE(0), f.bytes.length);
      assert.deepEqual(decodeHeader(f.bytes), f.header);
    }
  });
});

describe('PacketParser', () => {
  it('parses a multi-packet stream pushed whole', () => {
    const parser = new PacketParser();
    assertPackets(parser.push(STREAM), ALL_FRAMES);
    assert.equal(parser.bufferedBytes, 0);
  });

  it('parses the stream split in two at every byte boundary', () => {
    for (let i = 0; i <= STREAM.length; i++) {
      const parser = new PacketParser();
      assertPackets(pushAll(parser, [STREAM.subarray(0, i), STREAM.subarray(i)]), ALL_FRAMES);
      assert.equal(parser.bufferedBytes, 0, `split at ${i}`);
    }
  });

  it('parses the stream split in three at every pair of boundaries inside the first frames', () => {
    const head = ALL_FRAMES[0]!.bytes.length + ALL_FRAMES[1]!.bytes.length + ALL_FRAMES[2]!.bytes.length;
    for (let i = 0; i <= head; i++) {
      for (let j = i; j <= head + 8; j++) {
        const parser = new PacketParser();
        const got = pushAll(parser, [STREAM.subarray(0, i), STREAM.subarray(i, j), STREAM.subarray(j)]);
        assertPackets(got, ALL_FRAMES);
      }
    }
  });

  it('parses the stream pushed one byte at a time, yielding each packet on its last byte', () => {
    const parser = new PacketParser();
    const got: Packet[] = [];
    let frameEnd = 0;
    let k = 0;
    for (let i = 0; i < STREAM.length; i++) {
      const out = parser.push(STREAM.subarray(i, i + 1));
      if (i + 1 === frameEnd + ALL_FRAMES[k]!.bytes.length) {
        assert.equal(out.length, 1, `packet ${k} completes at byte ${i}`);
        frameEnd += ALL_FRAMES[k]!.bytes.length;
        k++;
      } else {
        assert.equal(out.length, 0);
      }
      got.push(...out);
    }
    assertPackets(got, ALL_FRAMES);
  });

  it('parses the stream under many pseudo-random chunkings', () => {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let round = 0; round < 200; round++) {
      const parser = new PacketParser();
      const chunks: Buffer[] = [];
      for (let at = 0; at < STREAM.length;) {
        const n = 1 + rand(90);
        chunks.push(STREAM.subarray(at, at + n));
        at += n;
      }
      assertPackets(pushAll(parser, chunks), ALL_FRAMES);
    }
  });

  it('keeps earlier bodies intact when later chunks arrive (bodies are not reused)', () => {
    const parser = new PacketParser();
    const split = STREAM_DATA.bytes.length - 2;
    const [first] = parser.push(Buffer.concat([STREAM_DATA.bytes, STREAM_DATA.bytes.subarray(0, split)]));
    assert.ok(first);
    const second = parser.push(Buffer.from(STREAM_DATA.bytes.subarray(split)));
    assert.equal(second.length, 1);
    assert.equal(first.body.toString('latin1'), 'hello');
    assert.equal(second[0]!.body.toString('latin1'), 'hello');
  });

  it('ignores an empty chunk', () => {
    const parser = new PacketParser();
    assert.deepEqual(parser.push(Buffer.alloc(0)), []);
    assert.equal(parser.bufferedBytes, 0);
  });

  it('accepts the smallest packet (28 bytes, no body)', () => {
    const [p] = new PacketParser().push(KEEPALIVE_PING.bytes);
    assert.ok(p);
    assert.equal(p.body.length, 0);
  });

  for (const [what, word] of [
    ['0x7fffffff', '7fffffff'],
    ['0xffffffff', 'ffffffff'],
    ['MAX+1 (32 MiB + 5)', '02000005'],
    ['an HTTP request line ("GET ")', '47455420'],
  ] as const) {
    it(`rejects a length of ${what} as soon as the length word is complete, before any body`, () => {
      const parser = new PacketParser();
      const before = process.memoryUsage().arrayBuffers;
      assert.throws(() => parser.push(hex(word)), LibvirtProtocolError);
      assert.ok(parser.bufferedBytes <= 4, `bufferedBytes ${parser.bufferedBytes}`);
      assert.ok(process.memoryUsage().arrayBuffers - before < 1024 * 1024, 'no allocation for the claimed body');
    });
  }

  it('rejects an oversized length word that arrives one byte at a time, on its fourth byte', () => {
    const parser = new PacketParser();
    for (const b of ['7f', 'ff', 'ff']) {
      assert.deepEqual(parser.push(hex(b)), []);
      assert.ok(parser.bufferedBytes <= 3);
    }
    assert.throws(() => parser.push(hex('ff')), LibvirtProtocolError);
    assert.equal(parser.bufferedBytes, 0);
  });

  it('accepts a length of exactly MAX (32 MiB + 4) and buffers only what arrived', () => {
    assert.equal(MAX_PACKET_SIZE, 0x02000004);
    const parser = new PacketParser();
    const before = process.memoryUsage().arrayBuffers;
    assert.deepEqual(parser.push(hex('02000004' + '20008086' + '00000001')), []);
    assert.deepEqual(parser.push(Buffer.alloc(64 * 1024)), []);
    assert.equal(parser.bufferedBytes, 12 + 64 * 1024);
    assert.ok(process.memoryUsage().arrayBuffers - before < 8 * 1024 * 1024, 'no allocation of the claimed 32 MiB');
  });

  it('honours a smaller maxPacketBytes (legacy 16 MiB daemons)', () => {
    const parser = new PacketParser(0x01000004);
    assert.throws(() => parser.push(hex('01000005')), LibvirtProtocolError);
    assert.deepEqual(new PacketParser(0x01000004).push(hex('01000004')), []);
  });

  for (const len of [0, 4, 27]) {
    it(`rejects a length of ${len} (below the 28-byte minimum)`, () => {
      const word = Buffer.alloc(4);
      word.writeUInt32BE(len);
      const parser = new PacketParser();
      assert.throws(() => parser.push(Buffer.concat([word, Buffer.alloc(28)])), LibvirtProtocolError);
      assert.equal(parser.bufferedBytes, 0);
    });
  }

  it('rejects a bad length that follows good packets in the same chunk, after returning nothing', () => {
    const parser = new PacketParser();
    assert.throws(() => parser.push(Buffer.concat([KEEPALIVE_PING.bytes, hex('7fffffff')])), LibvirtProtocolError);
  });

  it('is unusable after a framing error, even for valid bytes', () => {
    const parser = new PacketParser();
    assert.throws(() => parser.push(hex('00000000')), LibvirtProtocolError);
    assert.throws(() => parser.push(KEEPALIVE_PING.bytes), /after a framing error/);
    assert.throws(() => parser.push(Buffer.alloc(0)), LibvirtProtocolError);
  });

  it('refuses a maxPacketBytes outside [MIN, MAX]', () => {
    assert.throws(() => new PacketParser(MIN_PACKET_SIZE - 1), RangeError);
    assert.throws(() => new PacketParser(MAX_PACKET_SIZE + 1), RangeError);
  });
});

describe('encodePrefix / encodePacket', () => {
  it('encode the keepalive PING and PONG byte for byte', () => {
    assert.equal(encodePacket(KEEPALIVE_PING.header).toString('hex'), KEEPALIVE_PING.bytes.toString('hex'));
    assert.equal(encodePacket(KEEPALIVE_PONG.header).toString('hex'), KEEPALIVE_PONG.bytes.toString('hex'));
  });

  it('encode a STREAM data prefix whose length counts the raw body', () => {
    const prefix = encodePrefix(STREAM_DATA.header, 5);
    assert.equal(prefix.toString('hex'), STREAM_DATA.bytes.subarray(0, 28).toString('hex'));
    assert.equal(
      encodePacket(STREAM_DATA.header, Buffer.from('hello')).toString('hex'),
      STREAM_DATA.bytes.toString('hex'),
    );
  });

  it('encode a call header with a body', () => {
    const body = VOL_UPLOAD_CALL.bytes.subarray(28);
    assert.equal(encodePacket(VOL_UPLOAD_CALL.header, body).toString('hex'), VOL_UPLOAD_CALL.bytes.toString('hex'));
  });

  it('write serial as unsigned and proc/type/status as signed words', () => {
    const buf = encodePrefix({ prog: 0x20008086, vers: 1, proc: -1, type: 3, serial: 0xffffffff, status: 2 }, 0);
    assert.equal(
      buf.toString('hex'),
      '0000001c' + '20008086' + '00000001' + 'ffffffff' + '00000003' + 'ffffffff' + '00000002',
    );
    assert.deepEqual(decodeHeader(buf), {
      prog: 0x20008086,
      vers: 1,
      proc: -1,
      type: 3,
      serial: 0xffffffff,
      status: 2,
    });
  });
});

describe('PacketParser memory under a dribbling peer', () => {
  it('holds few buffers when a frame arrives one byte at a time (compaction)', () => {
    const parser = new PacketParser();
    const frameBytes = 256 * 1024;
    const whole = Buffer.alloc(frameBytes);
    whole.writeUInt32BE(frameBytes, 0); // length word
    whole.writeUInt32BE(0x20008086, 4); // prog REMOTE
    whole.writeUInt32BE(1, 8); // vers 1
    whole.writeInt32BE(157, 12); // proc CONNECT_GET_LIB_VERSION
    whole.writeInt32BE(1, 16); // type REPLY
    whole.writeUInt32BE(9, 20); // serial 9
    whole.writeInt32BE(0, 24); // status OK
    let maxHeld = 0;
    let packets: Packet[] = [];
    for (let i = 0; i < frameBytes; i++) {
      packets = parser.push(whole.subarray(i, i + 1));
      maxHeld = Math.max(maxHeld, parser.heldChunks);
    }
    assert.equal(packets.length, 1);
    assert.equal(packets[0]!.header.serial, 9);
    assert.equal(packets[0]!.body.length, frameBytes - 28);
    // A binary counter over 256 Ki one-byte pushes holds about log2(n) + n/64Ki buffers, not n.
    assert.ok(maxHeld <= 40, `held up to ${maxHeld} buffers`);
    assert.equal(parser.heldChunks, 0);
  });
});
