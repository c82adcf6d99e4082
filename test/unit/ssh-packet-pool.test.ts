/**
 * The pooled outgoing packets of lib/ssh/packet-pool.ts against ssh2's own cipher and decipher
 * (native binding): packets built in reused buffers decrypt to the same payloads, in order, for
 * both pooled ciphers; small packets keep ssh2's allocation; buffers come back once the socket
 * wrote them; and the pool still recognises ssh2 1.17's cipher classes (an upgrade that renames
 * them must fail here, not silently lose the pool).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { it } from 'node:test';
import { OutgoingPacketPool } from '../../lib/ssh/packet-pool.ts';

interface CipherInfo {
  keyLen: number;
  ivLen: number;
}
interface Cipher {
  allocPacket(payloadLen: number): Buffer;
  encrypt(packet: Buffer): void;
}
interface Decipher {
  decrypt(data: Buffer, p: number, dataLen: number): void;
}
const require = createRequire(import.meta.url);
const crypto = require('ssh2/lib/protocol/crypto.js') as {
  CIPHER_INFO: Record<string, CipherInfo>;
  createCipher(config: unknown): Cipher;
  createDecipher(config: unknown): Decipher;
};

for (const name of ['aes128-gcm@openssh.com', 'chacha20-poly1305@openssh.com']) {
  it(`pooled ${name} packets decrypt to the payloads sent, and their buffers are reused`, async () => {
    const info = crypto.CIPHER_INFO[name]!;
    const key = randomBytes(info.keyLen);
    const iv = info.ivLen ? randomBytes(info.ivLen) : undefined;
    const socket = new PassThrough();
    const wire: Buffer[] = [];
    socket.on('data', (d: Buffer) => wire.push(Buffer.from(d)));
    const cipher = crypto.createCipher({
      outbound: {
        onWrite: (data: Buffer) => socket.write(data),
        cipherInfo: info,
        cipherKey: key,
        cipherIV: iv,
        seqno: 0,
      },
    });
    const pool = new OutgoingPacketPool();
    pool.wrapSocket(socket as unknown as Socket);
    assert.ok(pool.patchCipher({ _protocol: { _cipher: cipher } }), `${name} is pooled`);
    // Patching twice (a handshake event after the dial's) changes nothing.
    assert.ok(pool.patchCipher({ _protocol: { _cipher: cipher } }));

    const sizes = [32 * 1024 + 9, 100, 20_000, 32 * 1024 + 9, 8 * 1024, 32 * 1024 + 9, 5];
    const payloads = sizes.map((n) => randomBytes(n));
    for (const payload of payloads) {
      const packet = cipher.allocPacket(payload.length);
      payload.copy(packet, 5);
      cipher.encrypt(packet);
      await new Promise((r) => setImmediate(r)); // the socket's write callback returns the buffer
    }
    const got: Buffer[] = [];
    const decipher = crypto.createDecipher({
      inbound: {
        onPayload: (p: Buffer) => void got.push(Buffer.from(p)),
        decipherInfo: info,
        decipherKey: key,
        decipherIV: iv,
        seqno: 0,
      },
    });
    const all = Buffer.concat(wire);
    decipher.decrypt(all, 0, all.length);
    assert.equal(got.length, payloads.length);
    for (let i = 0; i < payloads.length; i++) assert.ok(got[i]!.equals(payloads[i]!), `payload ${i} round-trips`);
    const { reused, allocated } = pool.stats;
    assert.equal(allocated, 1, 'one buffer served every large packet in turn');
    assert.equal(reused, 5 - 1, 'the other large packets (8 KiB and over) reused it');
  });
}

it('a cipher of unknown layout keeps its own allocation', () => {
  const pool = new OutgoingPacketPool();
  const own = (n: number): Buffer => Buffer.alloc(n);
  class GenericCipherBinding {
    allocPacket = own;
  }
  const cipher = new GenericCipherBinding();
  assert.equal(pool.patchCipher({ _protocol: { _cipher: cipher } }), false);
  assert.equal(cipher.allocPacket, own, 'left as it was');
  assert.equal(pool.patchCipher({}), false);
});
