/** Errors of the HTTP CONNECT health probe. All are Transient: a later probe may pass. */
import { ProjectError } from '../errors.ts';
import type { ErrorKind } from '../errors.ts';

/** Codes of {@link ProbeFailedError}. */
export type ProbeCode =
  | 'PROBE_TIMEOUT'
  | 'PROBE_REFUSED'
  | 'PROBE_BAD_RESPONSE'
  | 'PROBE_CLOSED'
  | 'PROBE_ABORTED'
  | 'EXIT_IP_HTTP_STATUS'
  | 'EXIT_IP_BAD_ANSWER';

/** The proxy did not establish the CONNECT tunnel, or the exit-IP read failed; `code` says how. */
export class ProbeFailedError extends ProjectError {
  readonly code: ProbeCode;
  readonly kind: ErrorKind = 'Transient';
  /** The HTTP status the proxy answered with, when it answered. */
  readonly status: number | undefined;
  constructor(code: ProbeCode, message: string, options?: { cause?: unknown; status?: number }) {
    super(message, options);
    this.code = code;
    this.status = options?.status;
  }
}
