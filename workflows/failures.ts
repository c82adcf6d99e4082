// Reading activity failures in workflows: the error table's kind and code that
// activities/errors.ts put into every failure's details.
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import type { FailureDetails } from '../activities/errors.ts';

export function failureInfo(err: unknown): FailureDetails & { message: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    const d = cause.details?.[0] as Partial<FailureDetails> | undefined;
    return {
      kind: d?.kind ?? (cause.nonRetryable ? 'Permanent' : 'Transient'),
      code: d?.code ?? cause.type ?? 'UNKNOWN',
      message: cause.message,
    };
  }
  return { kind: 'Transient', code: 'UNKNOWN', message: err instanceof Error ? err.message : String(err) };
}
