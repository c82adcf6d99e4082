/**
 * XDR schemas (lib/libvirt/protocol.ts, lib/xdr) against hand-written frames: each reply body
 * decodes to the values written beside it, each call's arguments encode to the hand-written bytes,
 * and bounds (string length, array count, fixed opaque size, zero padding) are enforced.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PacketParser } from '../../lib/libvirt/packet.ts';
import * as P from '../../lib/libvirt/protocol.ts';
import { utf8String, XdrError } from '../../lib/xdr/index.ts';
import {
  AUTH_LIST_REPLY,
  CONNECT_OPEN_CALL,
  CONNECT_OPEN_REPLY,
  CREATE_ERROR_REPLY,
  GET_LIB_VERSION_REPLY,
  hex,
  INTERFACE_ADDRESSES_REPLY,
  LOOKUP_BY_NAME_CALL,
  LOOKUP_BY_NAME_REPLY,
  LOOKUP_ERROR_REPLY,
  NET_UUID,
  POOL_GET_INFO_REPLY,
  PROXY_UUID,
  STREAM_ABORT_CONFIRM_RPC_SERIAL_1,
  STREAM_DATA,
  STREAM_ENOSPC_SERIAL_1,
  SUPPORTS_FEATURE_CALL,
  SUPPORTS_FEATURE_REPLY,
  VOL_UPLOAD_CALL,
} from './fixtures/libvirt-frames.ts';
import type { Frame } from './fixtures/libvirt-frames.ts';

/** The body of a frame, parsed by our framing (and checked to be one whole packet). */
function bodyOf(f: Frame): Buffer {
  const packets = new PacketParser().push(f.bytes);
  assert.equal(packets.length, 1);
  assert.deepEqual(packets[0]!.header, f.header);
  return packets[0]!.body;
}

const hexOf = (b: Uint8Array): string => Buffer.from(b).toString('hex');

describe('reply bodies decode field by field', () => {
  it('AUTH_LIST ret: an array of two auth types', () => {
    assert.deepEqual(P.authListRet.decode(bodyOf(AUTH_LIST_REPLY)), { types: [0, 2] });
  });

  it('CONNECT_OPEN ret: void, empty body', () => {
    assert.equal(bodyOf(CONNECT_OPEN_REPLY).length, 0);
    assert.equal(P.empty.decode(bodyOf(CONNECT_OPEN_REPLY)), undefined);
  });

  it('CONNECT_SUPPORTS_FEATURE ret: supported 1', () => {
    assert.deepEqual(P.supportsFeatureRet.decode(bodyOf(SUPPORTS_FEATURE_REPLY)), { supported: 1 });
  });

  it('STORAGE_POOL_GET_INFO ret: state in a whole word, then three u64s', () => {
    const info = P.poolGetInfoRet.decode(bodyOf(POOL_GET_INFO_REPLY));
    assert.deepEqual(info, {
      state: 2,
      capacity: 107374182400n,
      allocation: 21474877440n,
      available: 85899304960n,
    });
    assert.equal(info.capacity - info.allocation, info.available);
  });

  it('CONNECT_GET_LIB_VERSION ret: a u64', () => {
    assert.deepEqual(P.getLibVersionRet.decode(bodyOf(GET_LIB_VERSION_REPLY)), { lib_ver: 9000000n });
  });

  it('DOMAIN_LOOKUP_BY_NAME ret: a nonnull_domain with name, 16-byte uuid and a negative id', () => {
    const { dom } = P.domainRet.decode(bodyOf(LOOKUP_BY_NAME_REPLY));
    assert.equal(dom.name, 'proxy-1');
    assert.equal(hexOf(dom.uuid), PROXY_UUID);
    assert.equal(dom.uuid.length, 16);
    assert.equal(dom.id, -1);
  });

  it('DOMAIN_INTERFACE_ADDRESSES ret: nested arrays with an optional hwaddr', () => {
    assert.deepEqual(P.domainInterfaceAddressesRet.decode(bodyOf(INTERFACE_ADDRESSES_REPLY)), {
      ifaces: [{ name: 'eth0', hwaddr: '52:54:00:12:34:56', addrs: [{ type: 0, addr: '10.0.0.5', prefix: 24 }] }],
    });
  });

  it('remote_error with only some optional fields present', () => {
    const e = P.remoteError.decode(bodyOf(LOOKUP_ERROR_REPLY));
    assert.deepEqual(e, {
      code: 42,
      domain: 10,
      message: 'Domain not found',
      level: 2,
      dom: null,
      str1: 'ghost',
      str2: null,
      str3: null,
      int1: -1,
      int2: 0,
      net: null,
    });
  });

  it('remote_error with every optional field present (dom, str2, empty str3, net)', () => {
    const e = P.remoteError.decode(bodyOf(CREATE_ERROR_REPLY));
    assert.equal(e.code, 55);
    assert.equal(e.domain, 10);
    assert.equal(e.message, 'already running');
    assert.equal(e.level, 2);
    assert.ok(e.dom);
    assert.equal(e.dom.name, 'proxy-1');
    assert.equal(hexOf(e.dom.uuid), PROXY_UUID);
    assert.equal(e.dom.id, 7);
    assert.equal(e.str1, null);
    assert.equal(e.str2, 'proxy-1');
    assert.equal(e.str3, '');
    assert.equal(e.int1, 0);
    assert.equal(e.int2, -1);
    assert.ok(e.net);
    assert.equal(e.net.name, 'default');
    assert.equal(hexOf(e.net.uuid), NET_UUID);
  });

  it('STREAM/ERROR bodies are remote_errors too', () => {
    const enospc = P.remoteError.decode(bodyOf(STREAM_ENOSPC_SERIAL_1));
    assert.equal(enospc.code, 38);
    assert.equal(enospc.domain, 18);
    assert.equal(enospc.message, 'No space left on device');
    assert.equal(enospc.int1, -1);
    assert.equal(enospc.int2, -1);
    const rpc = P.remoteError.decode(bodyOf(STREAM_ABORT_CONFIRM_RPC_SERIAL_1));
    assert.equal(rpc.code, 39);
    assert.equal(rpc.domain, 7);
    assert.equal(rpc.message, 'stream aborted at client request');
  });

  it('STREAM data bodies are raw bytes (no XDR length, no padding)', () => {
    assert.equal(bodyOf(STREAM_DATA).toString('latin1'), 'hello');
  });
});

describe('call arguments encode to the hand-written bytes', () => {
  it('CONNECT_OPEN args: remote_string name with two bytes of padding, flags', () => {
    assert.equal(
      hexOf(P.connectOpenArgs.encode({ name: 'qemu:///system', flags: 0 })),
      hexOf(CONNECT_OPEN_CALL.bytes.subarray(28)),
    );
    assert.deepEqual(P.connectOpenArgs.decode(bodyOf(CONNECT_OPEN_CALL)), { name: 'qemu:///system', flags: 0 });
  });

  it('CONNECT_OPEN args with a null name: presence word 0', () => {
    assert.equal(hexOf(P.connectOpenArgs.encode({ name: null, flags: 0 })), '00000000' + '00000000');
  });

  it('CONNECT_SUPPORTS_FEATURE args: feature 10', () => {
    assert.equal(hexOf(P.supportsFeatureArgs.encode({ feature: 10 })), hexOf(SUPPORTS_FEATURE_CALL.bytes.subarray(28)));
  });

  it('DOMAIN_LOOKUP_BY_NAME args: a nonnull string with one byte of padding', () => {
    assert.equal(hexOf(P.nameArgs.encode({ name: 'proxy-1' })), hexOf(LOOKUP_BY_NAME_CALL.bytes.subarray(28)));
  });

  it('STORAGE_VOL_UPLOAD args: a nonnull_storage_vol, two u64s, flags', () => {
    const args = {
      vol: { pool: 'default', name: 'base.qcow2', key: '/var/lib/libvirt/images/base.qcow2' },
      offset: 4294967296n,
      length: 5n,
      flags: 0,
    };
    assert.equal(hexOf(P.volUploadArgs.encode(args)), hexOf(VOL_UPLOAD_CALL.bytes.subarray(28)));
    assert.deepEqual(P.volUploadArgs.decode(bodyOf(VOL_UPLOAD_CALL)), args);
  });

  it('domain args re-encode a decoded domain byte for byte', () => {
    const { dom } = P.domainRet.decode(bodyOf(LOOKUP_BY_NAME_REPLY));
    assert.equal(hexOf(P.domainArgs.encode({ dom })), hexOf(LOOKUP_BY_NAME_REPLY.bytes.subarray(28)));
  });
});

describe('bounds and strictness of decoding', () => {
  it('rejects a string whose length word exceeds REMOTE_STRING_MAX before reading it', () => {
    const before = process.memoryUsage().arrayBuffers;
    assert.throws(() => P.nameArgs.decode(hex('7fffffff' + '41414141')), XdrError);
    assert.throws(() => P.nameArgs.decode(hex('00400001' + '41414141')), XdrError); // 4 MiB + 1
    assert.ok(process.memoryUsage().arrayBuffers - before < 1024 * 1024);
  });

  it('rejects a string longer than the bytes that remain', () => {
    assert.throws(() => P.nameArgs.decode(hex('00000010' + '41414141')), XdrError);
  });

  it('rejects an array count above its bound (AUTH_LIST: 20)', () => {
    assert.throws(() => P.authListRet.decode(hex('00000015' + '00000000'.repeat(21))), XdrError);
    assert.deepEqual(P.authListRet.decode(hex('00000014' + '00000000'.repeat(20))).types.length, 20);
  });

  it('rejects a huge array count without allocating for it', () => {
    const before = process.memoryUsage().arrayBuffers;
    assert.throws(() => P.listAllDomainsRet.decode(hex('00004000' + '00000000')), XdrError);
    assert.throws(() => P.listAllDomainsRet.decode(hex('ffffffff' + '00000000')), XdrError);
    assert.ok(process.memoryUsage().arrayBuffers - before < 1024 * 1024);
  });

  it('rejects non-zero padding', () => {
    assert.throws(() => P.nameArgs.decode(hex('00000007' + '70726f78' + '792d3101')), XdrError);
  });

  it('rejects trailing bytes after a complete value', () => {
    assert.throws(() => P.supportsFeatureRet.decode(hex('00000001' + '00000000')), XdrError);
  });

  it('rejects an optional presence word other than 0 or 1', () => {
    assert.throws(() => P.connectOpenArgs.decode(hex('00000002' + '00000000')), XdrError);
  });

  it('requires a uuid of exactly 16 bytes when encoding', () => {
    assert.throws(() => P.uuidArgs.encode({ uuid: new Uint8Array(15) }), XdrError);
    assert.equal(hexOf(P.uuidArgs.encode({ uuid: hex(PROXY_UUID) })), PROXY_UUID);
  });

  it('round-trips UTF-8 strings and refuses non-strings', () => {
    const s = utf8String(64);
    assert.equal(hexOf(s.encode('é')), '00000002' + 'c3a90000');
    assert.equal(s.decode(hex('00000002' + 'c3a90000')), 'é');
    assert.throws(() => s.encode(42 as unknown as string), XdrError);
    assert.throws(() => utf8String(3).encode('abcd'), XdrError);
  });

  it('u64 fields carry values above 2^53 and refuse numbers', () => {
    const body = hex('00000000' + 'ffffffff' + 'ffffffff');
    assert.equal(
      P.volGetInfoRet.decode(Buffer.concat([body, hex('00000000' + '00000001')])).capacity,
      0xffffffffffffffffn,
    );
    assert.throws(() => P.getVersionRet.encode({ hv_ver: 1 as unknown as bigint }), XdrError);
  });
});
