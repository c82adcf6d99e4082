/**
 * Errors of the SSH transport (dialing, host keys, credentials, forwarding). Every class has a
 * stable `code` (listed in docs/errors.md) and a `kind` that says whether retrying can help.
 * Never rename a class: Temporal retry policies match on `name`.
 */
import { ProjectError } from '../errors.ts';
import type { ErrorKind, ProjectErrorOptions } from '../errors.ts';

/** Why a presented host key was refused. */
export type HostKeyProblem = 'unknown' | 'mismatch' | 'revoked';

/** Codes of {@link SshHostKeyError}, one per {@link HostKeyProblem}. */
export type SshHostKeyCode = 'SSH_HOST_UNKNOWN' | 'SSH_HOST_KEY_MISMATCH' | 'SSH_HOST_KEY_REVOKED';

const HOST_KEY_CODES: Record<HostKeyProblem, SshHostKeyCode> = {
  unknown: 'SSH_HOST_UNKNOWN',
  mismatch: 'SSH_HOST_KEY_MISMATCH',
  revoked: 'SSH_HOST_KEY_REVOKED',
};

/** Details carried by {@link SshHostKeyError}. */
export interface SshHostKeyErrorDetails {
  host: string;
  port: number;
  reason: HostKeyProblem;
  /** The presented key's fingerprint, `SHA256:<base64 without padding>` as OpenSSH prints it. */
  fingerprint: string;
  /** The presented key's type, e.g. `ssh-ed25519`. */
  keyType: string;
  /** Fingerprints of the keys known_hosts holds for this host (for a mismatch). */
  expected: string[];
  knownHostsPath: string;
}

/**
 * The server's host key is unknown, different from the recorded one, or revoked. Permanent: a
 * retry presents the same key. The message names the fingerprint, host:port and the remedy.
 */
export class SshHostKeyError extends ProjectError {
  readonly kind: ErrorKind = 'Permanent';
  readonly code: SshHostKeyCode;
  readonly host: string;
  readonly port: number;
  readonly reason: HostKeyProblem;
  readonly fingerprint: string;
  readonly keyType: string;
  readonly expected: string[];
  constructor(d: SshHostKeyErrorDetails, options?: ProjectErrorOptions) {
    super(hostKeyMessage(d), options);
    this.code = HOST_KEY_CODES[d.reason];
    this.host = d.host;
    this.port = d.port;
    this.reason = d.reason;
    this.fingerprint = d.fingerprint;
    this.keyType = d.keyType;
    this.expected = d.expected;
  }
}

function hostKeyMessage(d: SshHostKeyErrorDetails): string {
  const where = `${d.host}:${d.port}`;
  const presented = `${d.keyType} ${d.fingerprint}`;
  const scan = `ssh-keyscan -p ${d.port} ${d.host} >> ${d.knownHostsPath}`;
  switch (d.reason) {
    case 'unknown':
      return (
        `SSH host ${where} is not in ${d.knownHostsPath}; it presented ${presented}. ` +
        `Verify that fingerprint out of band, then add the key with \`${scan}\` ` +
        `(or enable acceptNewHostKeys to record unknown keys on first use).`
      );
    case 'mismatch':
      return (
        `SSH host key of ${where} does not match ${d.knownHostsPath}: it presented ${presented}, ` +
        `expected ${d.expected.join(', ') || '(no key of a usable type)'}. This may be an attack or a ` +
        `reinstalled host; if the change is legitimate, remove the old entry with ` +
        `\`ssh-keygen -R ${d.port === 22 ? d.host : `'[${d.host}]:${d.port}'`} -f ${d.knownHostsPath}\` ` +
        `and add the new one with \`${scan}\`.`
      );
    case 'revoked':
      return (
        `SSH host key of ${where} (${presented}) is marked @revoked in ${d.knownHostsPath}; ` +
        `the connection is refused. The host must be given a new host key.`
      );
  }
}

/** The server rejected every authentication method we offered. Permanent. */
export class SshAuthError extends ProjectError {
  readonly code = 'SSH_AUTH_FAILED';
  readonly kind: ErrorKind = 'Permanent';
}

/** sshd refused `direct-streamlocal` forwarding ("administratively prohibited"). Permanent. */
export class SshForwardingRefusedError extends ProjectError {
  readonly code = 'SSH_FORWARD_REFUSED';
  readonly kind: ErrorKind = 'Permanent';
}

/**
 * A forwarded channel could not be opened for another reason (for example the unix socket does
 * not exist because libvirtd is down). Transient.
 */
export class SshChannelOpenError extends ProjectError {
  readonly code = 'SSH_CHANNEL_OPEN_FAILED';
  readonly kind: ErrorKind = 'Transient';
}

/** A Transient error whose code, one of `C`, the thrower picks: `new X(code, message)`. */
abstract class TransientCodedError<C extends string> extends ProjectError {
  readonly kind: ErrorKind = 'Transient';
  readonly code: C;
  constructor(code: C, message: string, options?: ProjectErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** Codes of {@link SshConnectError}. */
export type SshConnectCode = 'SSH_CONNECT_FAILED' | 'SSH_CONNECTION_LOST' | 'SSH_PROTOCOL_ERROR';

/**
 * The TCP connection could not be made (refused, unreachable, DNS) or was lost (closed, reset,
 * a protocol error from the peer). Transient.
 */
export class SshConnectError extends TransientCodedError<SshConnectCode> {}

/** Codes of {@link SshTimeoutError}. */
export type SshTimeoutCode =
  'SSH_CONNECT_TIMEOUT' | 'SSH_READY_TIMEOUT' | 'SSH_KEEPALIVE_TIMEOUT' | 'SSH_OPEN_TIMEOUT' | 'SSH_EXEC_TIMEOUT';

/** A bounded wait expired: TCP connect, handshake+auth, keepalive, or a channel open. Transient. */
export class SshTimeoutError extends TransientCodedError<SshTimeoutCode> {}

/**
 * The key exchange failed for a reason other than the host key (typically no algorithm in
 * common with the server). Permanent: it is a configuration mismatch.
 */
export class SshHandshakeError extends ProjectError {
  readonly code = 'SSH_HANDSHAKE_FAILED';
  readonly kind: ErrorKind = 'Permanent';
}

/** A credentials file is missing, unreadable or invalid (configuration problem). Permanent. */
export class SshCredentialsError extends ProjectError {
  readonly code = 'SSH_CREDENTIALS';
  readonly kind: ErrorKind = 'Permanent';
}

/** The caller's AbortSignal fired. `cause` is the signal's reason. Transient. */
export class SshAbortedError extends ProjectError {
  readonly code = 'SSH_ABORTED';
  readonly kind: ErrorKind = 'Transient';
}

/**
 * The session is dead (killed, or its connection was lost); `cause` is the reason it died.
 * Transient: a new session may succeed.
 */
export class SshSessionDeadError extends ProjectError {
  readonly code = 'SSH_SESSION_DEAD';
  readonly kind: ErrorKind = 'Transient';
}

/** An invalid dial option (e.g. an unsupported cipher name). Permanent: fix the configuration. */
export class SshConfigError extends ProjectError {
  readonly code = 'SSH_CONFIG';
  readonly kind: ErrorKind = 'Permanent';
}
