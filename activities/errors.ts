// From the project's error table (docs/errors.md) to Temporal failures: Permanent and NotFound
// errors become non-retryable ApplicationFailures whose `type` is the error's stable code, so
// workflows and the Web UI see the same code the logs show; Transient errors stay retryable. An
// error that is not a project error is CODES.unclassified.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { CODES } from '../contracts/errors.ts';
import type { FailureDetails } from '../contracts/errors.ts';
import { errorKind, ProjectError } from '../lib/errors.ts';

// Thrown by lib/config lookups and by the activities; re-exported here for the activities' callers.
export { ProxySpecError } from '../lib/config/errors.ts';

/** Maps any thrown value to an ApplicationFailure (cancellations and failures pass through). */
export function toFailure(err: unknown): Error {
  if (err instanceof ApplicationFailure) return err;
  const kind = errorKind(err);
  const code = err instanceof ProjectError ? err.code : CODES.unclassified;
  const message = err instanceof Error ? err.message : String(err);
  const details: FailureDetails = { kind, code };
  return ApplicationFailure.create({
    message,
    type: code,
    nonRetryable: kind !== 'Transient',
    details: [details],
    cause: err instanceof Error ? err : undefined,
  });
}

/**
 * Runs `fn`, rethrowing whatever it throws as {@link toFailure} maps it. When the activity was
 * cancelled, the SDK's cancellation reason is thrown instead of the library's abort error, so the
 * server records the activity as cancelled rather than failed.
 */
export async function mapped<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const signal = Context.current().cancellationSignal;
    if (signal.aborted && signal.reason instanceof Error) throw signal.reason;
    throw toFailure(err);
  }
}
