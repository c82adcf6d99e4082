/**
 * Errors of the libvirt remote-protocol client, and the one table that decides whether a failure
 * is Transient (retry), Permanent (stop, tell the operator) or NotFound (done, for deletes).
 * Class names are stable: Temporal matches retry policies on them.
 */
import { ProjectError } from '../errors.ts';
import type { ErrorKind, ProjectErrorOptions } from '../errors.ts';
import { ErrorNumber, errorName, procName } from './constants.ts';
import { remoteError } from './protocol.ts';
import type { RemoteError } from './protocol.ts';

/**
 * How each virErrorNumber is treated. Codes absent from the table are Transient: a bounded retry
 * policy upstream turns an unknown persistent failure into a surfaced one.
 */
export const LIBVIRT_ERROR_KINDS: ReadonlyMap<number, ErrorKind> = new Map<number, ErrorKind>([
  // The object is gone: a delete or lookup may treat it as done.
  [ErrorNumber.NO_DOMAIN, 'NotFound'],
  [ErrorNumber.NO_NETWORK, 'NotFound'],
  [ErrorNumber.NO_STORAGE_POOL, 'NotFound'],
  [ErrorNumber.NO_STORAGE_VOL, 'NotFound'],
  [ErrorNumber.NO_DOMAIN_METADATA, 'NotFound'],
  [ErrorNumber.NO_INTERFACE, 'NotFound'],
  [ErrorNumber.NO_SECRET, 'NotFound'],
  [ErrorNumber.NO_NETWORK_METADATA, 'NotFound'],
  // Retrying the same request cannot help: bad input, refused, unsupported, already exists.
  [ErrorNumber.NO_SUPPORT, 'Permanent'],
  [ErrorNumber.INVALID_DOMAIN, 'Permanent'],
  [ErrorNumber.INVALID_ARG, 'Permanent'],
  [ErrorNumber.OS_TYPE, 'Permanent'],
  [ErrorNumber.NO_NAME, 'Permanent'],
  [ErrorNumber.XML_ERROR, 'Permanent'],
  [ErrorNumber.DOM_EXIST, 'Permanent'],
  [ErrorNumber.OPERATION_DENIED, 'Permanent'],
  [ErrorNumber.XML_DETAIL, 'Permanent'],
  [ErrorNumber.INVALID_NETWORK, 'Permanent'],
  [ErrorNumber.NETWORK_EXIST, 'Permanent'],
  [ErrorNumber.INVALID_MAC, 'Permanent'],
  [ErrorNumber.AUTH_FAILED, 'Permanent'],
  [ErrorNumber.INVALID_STORAGE_POOL, 'Permanent'],
  [ErrorNumber.INVALID_STORAGE_VOL, 'Permanent'],
  [ErrorNumber.CONFIG_UNSUPPORTED, 'Permanent'],
  [ErrorNumber.ARGUMENT_UNSUPPORTED, 'Permanent'],
  [ErrorNumber.AUTH_CANCELLED, 'Permanent'],
  [ErrorNumber.OVERFLOW, 'Permanent'],
  [ErrorNumber.OPERATION_UNSUPPORTED, 'Permanent'],
  [ErrorNumber.ACCESS_DENIED, 'Permanent'],
  [ErrorNumber.STORAGE_VOL_EXIST, 'Permanent'],
  [ErrorNumber.CPU_INCOMPATIBLE, 'Permanent'],
  [ErrorNumber.XML_INVALID_SCHEMA, 'Permanent'],
  [ErrorNumber.AUTH_UNAVAILABLE, 'Permanent'],
  [ErrorNumber.MULTIPLE_DOMAINS, 'Permanent'],
  // The host, daemon, agent or object is busy, starting or briefly broken: retry.
  [ErrorNumber.INTERNAL_ERROR, 'Transient'],
  [ErrorNumber.NO_MEMORY, 'Transient'],
  [ErrorNumber.NO_CONNECT, 'Transient'],
  [ErrorNumber.INVALID_CONN, 'Transient'],
  [ErrorNumber.OPERATION_FAILED, 'Transient'],
  [ErrorNumber.OPEN_FAILED, 'Transient'],
  [ErrorNumber.READ_FAILED, 'Transient'],
  [ErrorNumber.WRITE_FAILED, 'Transient'],
  [ErrorNumber.SYSTEM_ERROR, 'Transient'],
  [ErrorNumber.RPC, 'Transient'],
  [ErrorNumber.OPERATION_INVALID, 'Transient'],
  [ErrorNumber.OPERATION_TIMEOUT, 'Transient'],
  [ErrorNumber.HOOK_SCRIPT_FAILED, 'Transient'],
  [ErrorNumber.INVALID_STREAM, 'Transient'],
  [ErrorNumber.STORAGE_PROBE_FAILED, 'Transient'],
  [ErrorNumber.OPERATION_ABORTED, 'Transient'],
  [ErrorNumber.SSH, 'Transient'],
  [ErrorNumber.AGENT_UNRESPONSIVE, 'Transient'],
  [ErrorNumber.RESOURCE_BUSY, 'Transient'],
  [ErrorNumber.NO_SERVER, 'Transient'],
  [ErrorNumber.NO_CLIENT, 'Transient'],
  [ErrorNumber.AGENT_UNSYNCED, 'Transient'],
  [ErrorNumber.LIBSSH, 'Transient'],
]);

/** The kind of a daemon error code (see LIBVIRT_ERROR_KINDS). */
export function classifyLibvirtCode(code: number): ErrorKind {
  return LIBVIRT_ERROR_KINDS.get(code) ?? 'Transient';
}

/** An error the daemon reported (a REPLY or STREAM packet with status ERROR). */
export class LibvirtError extends ProjectError {
  readonly code = 'LIBVIRT_ERROR';
  readonly kind: ErrorKind;
  /** virErrorNumber */
  readonly libvirtCode: number;
  /** virErrorDomain */
  readonly libvirtDomain: number;
  readonly libvirtMessage: string;
  /** The procedure whose call failed. */
  readonly proc: number;
  constructor(remote: Pick<RemoteError, 'code' | 'domain' | 'message'>, proc: number, options?: ProjectErrorOptions) {
    const message = remote.message ?? `libvirt error ${remote.code}`;
    super(`${procName(proc)}: ${message} (${errorName(remote.code)}, code ${remote.code})`, options);
    this.libvirtCode = remote.code;
    this.libvirtDomain = remote.domain;
    this.libvirtMessage = message;
    this.proc = proc;
    this.kind = classifyLibvirtCode(remote.code);
  }
}

/** The peer sent bytes that are not a valid packet; the connection was destroyed. */
export class LibvirtProtocolError extends ProjectError {
  readonly code = 'LIBVIRT_PROTOCOL';
  readonly kind = 'Transient';
}

/** The connection is gone (killed, closed by the peer, or its transport failed). */
export class LibvirtConnectionError extends ProjectError {
  readonly code = 'LIBVIRT_CONNECTION_LOST';
  readonly kind = 'Transient';
}

/** A call or stream overran its budget; its connection was killed. */
export class LibvirtTimeoutError extends ProjectError {
  readonly code = 'LIBVIRT_TIMEOUT';
  readonly kind = 'Transient';
}

/** The caller aborted a call or stream through its AbortSignal. */
export class LibvirtAbortedError extends ProjectError {
  readonly code = 'LIBVIRT_ABORTED';
  readonly kind = 'Transient';
}

/** The peer stopped answering keepalive pings within the dead-peer bound. */
export class LibvirtKeepaliveError extends ProjectError {
  readonly code = 'LIBVIRT_KEEPALIVE_TIMEOUT';
  readonly kind = 'Transient';
}

/** The daemon offers no authentication method this client speaks (only SASL, for instance). */
export class LibvirtAuthUnsupportedError extends ProjectError {
  readonly code = 'LIBVIRT_AUTH_UNSUPPORTED';
  readonly kind = 'Permanent';
}

/** The data source of an upload failed or stalled; the stream was aborted. */
export class LibvirtUploadSourceError extends ProjectError {
  readonly code = 'LIBVIRT_UPLOAD_SOURCE';
  readonly kind: ErrorKind;
  constructor(message: string, options?: ProjectErrorOptions & { kind?: ErrorKind }) {
    super(message, options);
    this.kind = options?.kind ?? 'Transient';
  }
}

/**
 * `reason` itself when it already says the connection is gone, else a LibvirtConnectionError with
 * `message` caused by it: what every waiter on a dead connection gets.
 */
export function connectionLost(reason: Error, message: string): LibvirtConnectionError {
  return reason instanceof LibvirtConnectionError ? reason : new LibvirtConnectionError(message, { cause: reason });
}

/** Decodes a remote_error body into a LibvirtError (throws LibvirtProtocolError if malformed). */
export function decodeRemoteError(body: Buffer, proc: number): LibvirtError {
  try {
    return new LibvirtError(remoteError.decode(body), proc);
  } catch (err) {
    throw new LibvirtProtocolError(`malformed error body for ${procName(proc)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** Whether `err` is the daemon saying the object (domain, volume, pool, network...) does not exist. */
export function isNotFound(err: unknown): err is LibvirtError {
  return err instanceof LibvirtError && err.kind === 'NotFound';
}

/** Resolves with `p`'s value, or with undefined when `p` fails with NotFound (see isNotFound). */
export async function unlessNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

export { checkDurationMs, MAX_TIMER_MS } from '../rules.ts';
