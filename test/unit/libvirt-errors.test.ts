/**
 * The error table (lib/libvirt/errors.ts): every row of LIBVIRT_ERROR_KINDS checked against a
 * literal table written here from include/libvirt/virterror.h (name, number, kind), the transport
 * errors' codes, names and kinds, and the default for codes the table does not name.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorNumber, Proc } from '../../lib/libvirt/constants.ts';
import {
  classifyLibvirtCode,
  LIBVIRT_ERROR_KINDS,
  LibvirtAbortedError,
  LibvirtAuthUnsupportedError,
  LibvirtConnectionError,
  LibvirtError,
  LibvirtKeepaliveError,
  LibvirtProtocolError,
  LibvirtTimeoutError,
  LibvirtUploadSourceError,
} from '../../lib/libvirt/errors.ts';
import { errorKind, ProjectError } from '../../lib/errors.ts';
import type { ErrorKind } from '../../lib/errors.ts';

/** [virErrorNumber name, its value in virterror.h, the kind the project decided]. */
const EXPECTED: ReadonlyArray<readonly [string, number, ErrorKind]> = [
  // gone: NotFound
  ['NO_DOMAIN', 42, 'NotFound'],
  ['NO_NETWORK', 43, 'NotFound'],
  ['NO_STORAGE_POOL', 49, 'NotFound'],
  ['NO_STORAGE_VOL', 50, 'NotFound'],
  ['NO_DOMAIN_METADATA', 80, 'NotFound'],
  ['NO_INTERFACE', 57, 'NotFound'],
  ['NO_SECRET', 66, 'NotFound'],
  ['NO_NETWORK_METADATA', 111, 'NotFound'],
  // retrying cannot help: Permanent
  ['NO_SUPPORT', 3, 'Permanent'],
  ['INVALID_DOMAIN', 7, 'Permanent'],
  ['INVALID_ARG', 8, 'Permanent'],
  ['OS_TYPE', 16, 'Permanent'],
  ['NO_NAME', 21, 'Permanent'],
  ['XML_ERROR', 27, 'Permanent'],
  ['DOM_EXIST', 28, 'Permanent'],
  ['OPERATION_DENIED', 29, 'Permanent'],
  ['XML_DETAIL', 35, 'Permanent'],
  ['INVALID_NETWORK', 36, 'Permanent'],
  ['NETWORK_EXIST', 37, 'Permanent'],
  ['INVALID_MAC', 44, 'Permanent'],
  ['AUTH_FAILED', 45, 'Permanent'],
  ['INVALID_STORAGE_POOL', 46, 'Permanent'],
  ['INVALID_STORAGE_VOL', 47, 'Permanent'],
  ['CONFIG_UNSUPPORTED', 67, 'Permanent'],
  ['ARGUMENT_UNSUPPORTED', 74, 'Permanent'],
  ['AUTH_CANCELLED', 79, 'Permanent'],
  ['OVERFLOW', 82, 'Permanent'],
  ['OPERATION_UNSUPPORTED', 84, 'Permanent'],
  ['ACCESS_DENIED', 88, 'Permanent'],
  ['STORAGE_VOL_EXIST', 90, 'Permanent'],
  ['CPU_INCOMPATIBLE', 91, 'Permanent'],
  ['XML_INVALID_SCHEMA', 92, 'Permanent'],
  ['AUTH_UNAVAILABLE', 94, 'Permanent'],
  ['MULTIPLE_DOMAINS', 110, 'Permanent'],
  // busy, starting or briefly broken: Transient
  ['INTERNAL_ERROR', 1, 'Transient'],
  ['NO_MEMORY', 2, 'Transient'],
  ['NO_CONNECT', 5, 'Transient'],
  ['INVALID_CONN', 6, 'Transient'],
  ['OPERATION_FAILED', 9, 'Transient'],
  ['OPEN_FAILED', 30, 'Transient'],
  ['READ_FAILED', 31, 'Transient'],
  ['WRITE_FAILED', 34, 'Transient'],
  ['SYSTEM_ERROR', 38, 'Transient'],
  ['RPC', 39, 'Transient'],
  ['OPERATION_INVALID', 55, 'Transient'],
  ['OPERATION_TIMEOUT', 68, 'Transient'],
  ['HOOK_SCRIPT_FAILED', 70, 'Transient'],
  ['INVALID_STREAM', 73, 'Transient'],
  ['STORAGE_PROBE_FAILED', 75, 'Transient'],
  ['OPERATION_ABORTED', 78, 'Transient'],
  ['SSH', 85, 'Transient'],
  ['AGENT_UNRESPONSIVE', 86, 'Transient'],
  ['RESOURCE_BUSY', 87, 'Transient'],
  ['NO_SERVER', 95, 'Transient'],
  ['NO_CLIENT', 96, 'Transient'],
  ['AGENT_UNSYNCED', 97, 'Transient'],
  ['LIBSSH', 98, 'Transient'],
];

describe('LIBVIRT_ERROR_KINDS, row by row', () => {
  for (const [name, code, kind] of EXPECTED) {
    it(`${name} (${code}) is ${kind}`, () => {
      assert.equal((ErrorNumber as Record<string, number>)[name], code, `ErrorNumber.${name} matches virterror.h`);
      assert.equal(LIBVIRT_ERROR_KINDS.get(code), kind);
      assert.equal(classifyLibvirtCode(code), kind);
      const err = new LibvirtError({ code, domain: 10, message: 'm' }, Proc.DOMAIN_LOOKUP_BY_NAME);
      assert.equal(err.kind, kind);
      assert.equal(errorKind(err), kind);
    });
  }

  it('has no row that the literal table above does not check', () => {
    assert.equal(EXPECTED.length, 57);
    assert.equal(new Set(EXPECTED.map(([, code]) => code)).size, EXPECTED.length);
    assert.equal(LIBVIRT_ERROR_KINDS.size, EXPECTED.length);
  });

  for (const code of [0, 4, 10, 41, 48, 56, 99, 112, 1000, -1]) {
    it(`code ${code}, absent from the table, is Transient`, () => {
      assert.equal(LIBVIRT_ERROR_KINDS.has(code), false);
      assert.equal(classifyLibvirtCode(code), 'Transient');
      assert.equal(new LibvirtError({ code, domain: 0, message: null }, 1).kind, 'Transient');
    });
  }
});

describe('LibvirtError', () => {
  it('carries the daemon code, domain, message and procedure', () => {
    const cause = new Error('inner');
    const err = new LibvirtError({ code: 42, domain: 10, message: 'Domain not found' }, Proc.DOMAIN_LOOKUP_BY_NAME, {
      cause,
    });
    assert.ok(err instanceof ProjectError);
    assert.ok(err instanceof Error);
    assert.equal(err.name, 'LibvirtError');
    assert.equal(err.code, 'LIBVIRT_ERROR');
    assert.equal(err.kind, 'NotFound');
    assert.equal(err.libvirtCode, 42);
    assert.equal(err.libvirtDomain, 10);
    assert.equal(err.libvirtMessage, 'Domain not found');
    assert.equal(err.proc, 23);
    assert.equal(err.cause, cause);
    assert.equal(err.message, 'DOMAIN_LOOKUP_BY_NAME: Domain not found (NO_DOMAIN, code 42)');
  });

  it('names unknown procedures and codes, and a missing message', () => {
    const err = new LibvirtError({ code: 4242, domain: 0, message: null }, 9999);
    assert.equal(err.message, 'PROC_9999: libvirt error 4242 (ERR_4242, code 4242)');
    assert.equal(err.libvirtMessage, 'libvirt error 4242');
  });
});

describe('transport errors', () => {
  const cause = new Error('root cause');
  const rows: ReadonlyArray<readonly [ProjectError, string, string, ErrorKind]> = [
    [new LibvirtProtocolError('p', { cause }), 'LibvirtProtocolError', 'LIBVIRT_PROTOCOL', 'Transient'],
    [new LibvirtConnectionError('c', { cause }), 'LibvirtConnectionError', 'LIBVIRT_CONNECTION_LOST', 'Transient'],
    [new LibvirtTimeoutError('t', { cause }), 'LibvirtTimeoutError', 'LIBVIRT_TIMEOUT', 'Transient'],
    [new LibvirtAbortedError('a', { cause }), 'LibvirtAbortedError', 'LIBVIRT_ABORTED', 'Transient'],
    [new LibvirtKeepaliveError('k', { cause }), 'LibvirtKeepaliveError', 'LIBVIRT_KEEPALIVE_TIMEOUT', 'Transient'],
    [
      new LibvirtAuthUnsupportedError('u', { cause }),
      'LibvirtAuthUnsupportedError',
      'LIBVIRT_AUTH_UNSUPPORTED',
      'Permanent',
    ],
    [new LibvirtUploadSourceError('s', { cause }), 'LibvirtUploadSourceError', 'LIBVIRT_UPLOAD_SOURCE', 'Transient'],
    [
      new LibvirtUploadSourceError('s', { cause, kind: 'Permanent' }),
      'LibvirtUploadSourceError',
      'LIBVIRT_UPLOAD_SOURCE',
      'Permanent',
    ],
  ];
  for (const [err, name, code, kind] of rows) {
    it(`${name} has code ${code} and kind ${kind}`, () => {
      assert.ok(err instanceof ProjectError);
      assert.equal(err.name, name);
      assert.equal(err.constructor.name, name);
      assert.equal(err.code, code);
      assert.equal(err.kind, kind);
      assert.equal(errorKind(err), kind);
      assert.equal(err.cause, cause);
    });
  }

  it('a plain Error or a non-error is Transient', () => {
    assert.equal(errorKind(new Error('x')), 'Transient');
    assert.equal(errorKind('x'), 'Transient');
  });
});
