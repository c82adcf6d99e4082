/**
 * Errors of the per-host link pool (`pool.ts`). Every class has a stable `code` (listed in
 * docs/errors.md) and a `kind` that says whether retrying can help. Never rename a class:
 * Temporal retry policies match on `name`.
 */
import { ProjectError } from '../errors.ts';
import type { ErrorKind } from '../errors.ts';

/**
 * A call waited for a free slot on its host's pooled link for longer than its budget (the host
 * is saturated by other calls), or its budget ran out while the pooled link was still being
 * dialed. (A call aborted meanwhile is SshAbortedError.) Transient.
 */
export class SshPoolQueueTimeoutError extends ProjectError {
  readonly code = 'SSH_POOL_QUEUE_TIMEOUT';
  readonly kind: ErrorKind = 'Transient';
}

/** The host's link pool was closed while the call waited or ran. Transient. */
export class SshPoolClosedError extends ProjectError {
  readonly code = 'SSH_POOL_CLOSED';
  readonly kind: ErrorKind = 'Transient';
}
