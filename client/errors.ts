// The one error a Temporal call of client/ adds to the SDK's: the server did not answer (down,
// unreachable, or past the call's deadline). The API answers it with a 503; the CLI with its
// "unavailable" exit code.

/** Temporal did not answer (down, unreachable, or past the call's deadline). */
export class TemporalUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TemporalUnavailableError';
  }
}

/** gRPC status codes that mean "the server is not there or did not answer in time". */
const UNAVAILABLE_GRPC = new Set([4 /* DEADLINE_EXCEEDED */, 14 /* UNAVAILABLE */, 1 /* CANCELLED */]);

/** Whether `err` (or a cause of it) says Temporal could not be reached or did not answer in time. */
export function isTemporalUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    if (e instanceof TemporalUnavailableError) return true;
    const o = e as { code?: unknown; name?: unknown; cause?: unknown };
    if (typeof o.code === 'number' && UNAVAILABLE_GRPC.has(o.code)) return true;
    if (o.name === 'ConnectionError' || o.name === 'TransportError') return true;
    e = o.cause;
  }
  return false;
}
