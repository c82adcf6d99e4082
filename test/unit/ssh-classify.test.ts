/** Mapping of ssh2 errors (shaped as ssh2 1.17 emits them) to project errors. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { classifyClientError, classifyOpenError } from '../../lib/ssh/classify.ts';
import type { Ssh2Error } from '../../lib/ssh/classify.ts';
import {
  SshAuthError,
  SshChannelOpenError,
  SshConnectError,
  SshForwardingRefusedError,
  SshHandshakeError,
  SshTimeoutError,
} from '../../lib/ssh/errors.ts';

const ssh2Error = (message: string, props: Partial<Ssh2Error>): Ssh2Error => Object.assign(new Error(message), props);
const dial = { where: 'h:22', phase: 'dial' } as const;
const session = { where: 'h:22', phase: 'session' } as const;

describe('classifyClientError', () => {
  it('maps client-authentication to SshAuthError (Permanent)', () => {
    const e = classifyClientError(
      ssh2Error('All configured authentication methods failed', { level: 'client-authentication' }),
      dial,
    );
    assert.ok(e instanceof SshAuthError);
    assert.equal(e.kind, 'Permanent');
  });
  it('maps client-timeout to a ready timeout before auth and a keepalive timeout after', () => {
    const before = classifyClientError(
      ssh2Error('Timed out while waiting for handshake', { level: 'client-timeout' }),
      dial,
    );
    const afterAuth = classifyClientError(ssh2Error('Keepalive timeout', { level: 'client-timeout' }), session);
    assert.ok(before instanceof SshTimeoutError && afterAuth instanceof SshTimeoutError);
    assert.equal(before.code, 'SSH_READY_TIMEOUT');
    assert.equal(afterAuth.code, 'SSH_KEEPALIVE_TIMEOUT');
    assert.equal(afterAuth.kind, 'Transient');
  });
  it('maps socket errors and lost connections to SSH_CONNECTION_LOST (Transient)', () => {
    const a = classifyClientError(
      ssh2Error('read ECONNRESET', { level: 'client-socket', code: 'ECONNRESET' }),
      session,
    );
    const b = classifyClientError(ssh2Error('Connection lost before handshake', { level: 'protocol' }), dial);
    for (const e of [a, b]) {
      assert.ok(e instanceof SshConnectError);
      assert.equal(e.code, 'SSH_CONNECTION_LOST');
      assert.equal(e.kind, 'Transient');
    }
    assert.match(a.message, /ECONNRESET/);
  });
  it('maps key exchange failures to SshHandshakeError (Permanent)', () => {
    const e = classifyClientError(ssh2Error('Handshake failed: no matching cipher', { level: 'handshake' }), dial);
    assert.ok(e instanceof SshHandshakeError);
    assert.equal(e.kind, 'Permanent');
  });
  it('maps a server DISCONNECT during auth mentioning auth to SshAuthError, otherwise to a lost connection', () => {
    assert.ok(
      classifyClientError(ssh2Error('Too many authentication failures', { code: 2 }), dial) instanceof SshAuthError,
    );
    const e = classifyClientError(ssh2Error('Server shutting down', { code: 11 }), session);
    assert.ok(e instanceof SshConnectError && e.code === 'SSH_CONNECTION_LOST');
  });
});

describe('classifyOpenError', () => {
  const ctx = { socketPath: '/var/run/libvirt/libvirt-sock', where: 'h:22', user: 'virt' };
  it('maps reason 1 (administratively prohibited, older OpenSSH) to SshForwardingRefusedError with the remedy', () => {
    const e = classifyOpenError(ssh2Error('(SSH) Channel open failure: open failed', { reason: 1 }), ctx);
    assert.ok(e instanceof SshForwardingRefusedError);
    assert.equal(e.kind, 'Permanent');
    assert.equal(e.code, 'SSH_FORWARD_REFUSED');
    assert.match(e.message, /AllowStreamLocalForwarding yes/);
    assert.match(e.message, /\/var\/run\/libvirt\/libvirt-sock/);
  });
  it('maps the text "administratively prohibited" to SshForwardingRefusedError', () => {
    const e = classifyOpenError(ssh2Error('(SSH) Channel open failure: administratively prohibited', {}), ctx);
    assert.ok(e instanceof SshForwardingRefusedError);
  });
  it('maps reason 2 "open failed" (modern OpenSSH: refusal or missing socket) to a Transient error naming both causes', () => {
    const e = classifyOpenError(ssh2Error('(SSH) Channel open failure: open failed', { reason: 2 }), ctx);
    assert.ok(e instanceof SshChannelOpenError);
    assert.equal(e.kind, 'Transient');
    assert.match(e.message, /is libvirtd running/);
    assert.match(e.message, /AllowStreamLocalForwarding yes/);
    assert.match(e.message, /AllowTcpForwarding/);
  });
});
