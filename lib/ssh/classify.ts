/**
 * Maps the errors ssh2's `Client` emits to project errors. ssh2 tags them with `level`:
 * `client-socket` (TCP), `client-timeout` (its ready timer or keepalive), `client-authentication`,
 * `handshake` (key exchange, including a refused host key), `protocol`, `agent`; a DISCONNECT
 * from the server arrives with a numeric `code` (the reason) and no level.
 */
import {
  SshAuthError,
  SshChannelOpenError,
  SshConnectError,
  SshForwardingRefusedError,
  SshHandshakeError,
  SshTimeoutError,
} from './errors.ts';

/** SSH_MSG_CHANNEL_OPEN_FAILURE reason codes (RFC 4254 section 5.1). */
export const OPEN_FAILURE_REASON = {
  ADMINISTRATIVELY_PROHIBITED: 1,
  CONNECT_FAILED: 2,
  UNKNOWN_CHANNEL_TYPE: 3,
  RESOURCE_SHORTAGE: 4,
} as const;

/** An error as ssh2 emits it. */
export type Ssh2Error = Error & { level?: string; code?: string | number; reason?: unknown };

/** Context for messages: `where` is `host:port`; `phase` is before or after authentication. */
export interface ClassifyContext {
  where: string;
  phase: 'dial' | 'session';
}

/** Classifies one ssh2 client error (host key refusals are recognised by the dialer, not here). */
export function classifyClientError(err: Ssh2Error, ctx: ClassifyContext): Error {
  const { where } = ctx;
  switch (err.level) {
    case 'client-authentication':
      return new SshAuthError(`SSH authentication to ${where} failed: ${err.message}`, { cause: err });
    case 'client-timeout':
      return ctx.phase === 'session'
        ? new SshTimeoutError(
            'SSH_KEEPALIVE_TIMEOUT',
            `SSH keepalive to ${where} timed out: the peer stopped answering`,
            { cause: err },
          )
        : new SshTimeoutError('SSH_READY_TIMEOUT', `SSH handshake with ${where} timed out`, { cause: err });
    case 'client-socket': {
      const code = typeof err.code === 'string' ? err.code : err.message;
      return new SshConnectError('SSH_CONNECTION_LOST', `SSH connection to ${where} lost: ${code}`, { cause: err });
    }
    case 'handshake':
      return new SshHandshakeError(`SSH key exchange with ${where} failed: ${err.message}`, { cause: err });
    case 'protocol':
      if (/lost before handshake/i.test(err.message)) {
        return new SshConnectError(
          'SSH_CONNECTION_LOST',
          `SSH connection to ${where} closed before the handshake (sshd dropped it, e.g. MaxStartups or not an SSH server)`,
          { cause: err },
        );
      }
      return new SshConnectError('SSH_PROTOCOL_ERROR', `SSH protocol error from ${where}: ${err.message}`, {
        cause: err,
      });
    default:
      break;
  }
  if (typeof err.code === 'number') {
    // SSH_MSG_DISCONNECT from the server.
    if (ctx.phase === 'dial' && /auth/i.test(err.message)) {
      return new SshAuthError(`SSH authentication to ${where} failed: the server disconnected: ${err.message}`, {
        cause: err,
      });
    }
    return new SshConnectError('SSH_CONNECTION_LOST', `SSH server ${where} disconnected: ${err.message}`, {
      cause: err,
    });
  }
  return new SshConnectError('SSH_PROTOCOL_ERROR', `SSH error from ${where}: ${err.message}`, { cause: err });
}

/** Context of a failed `direct-streamlocal` open. */
export interface OpenContext {
  socketPath: string;
  /** `host:port` of the sshd. */
  where: string;
  user: string;
}

const FORWARDING_REMEDY =
  '`AllowStreamLocalForwarding yes` (or `local`) and `AllowTcpForwarding yes` (or `local`; OpenSSH also ' +
  'applies it to unix socket forwarding) in sshd_config, `DisableForwarding` off, no `restrict` or ' +
  '`no-port-forwarding` on the authorized_keys entry; then reload sshd';

/**
 * Classifies a failed `direct-streamlocal@openssh.com` open (ssh2 passes `reason`, the RFC 4254
 * code, and the server's description in the message).
 *
 * Reason 1 "administratively prohibited" is a refusal: {@link SshForwardingRefusedError}
 * (Permanent). Modern OpenSSH (checked against 9.2p1) answers a refusal by configuration with
 * reason 2 and the text "open failed", exactly as it answers a socket that does not exist;
 * that case is an {@link SshChannelOpenError} (Transient, because libvirtd may be restarting)
 * whose message names both causes and the sshd remedy.
 */
export function classifyOpenError(err: Error & { reason?: unknown }, ctx: OpenContext): Error {
  const { socketPath, where, user } = ctx;
  if (
    err.reason === OPEN_FAILURE_REASON.ADMINISTRATIVELY_PROHIBITED ||
    /administratively prohibited/i.test(err.message)
  ) {
    return new SshForwardingRefusedError(
      `sshd on ${where} refused to forward to unix socket ${socketPath} for user ${user} ` +
        `("administratively prohibited"): allow it with ${FORWARDING_REMEDY}`,
      { cause: err },
    );
  }
  if (/strictVendor/.test(err.message)) {
    return new SshChannelOpenError(`sshd on ${where} is not OpenSSH-compatible: ${err.message}`, { cause: err });
  }
  const said = err.message.replace(/^\(SSH\) Channel open failure: /, '');
  return new SshChannelOpenError(
    `sshd on ${where} could not open unix socket ${socketPath} for user ${user} ("${said}", reason ${String(err.reason)}). ` +
      `Either nothing listens there (is libvirtd running? is the path right?), or sshd refuses unix socket ` +
      `forwarding, which OpenSSH reports the same way; for the latter set ${FORWARDING_REMEDY}`,
    { cause: err },
  );
}
