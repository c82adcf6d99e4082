// Reading activity failures in workflows: the error table's kind and code that
// activities/errors.ts put into every failure's details.
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import { CODES } from '../contracts/errors.ts';
import type { FailureDetails } from '../contracts/errors.ts';

export function failureInfo(err: unknown): FailureDetails & { message: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    const d = cause.details?.[0] as Partial<FailureDetails> | undefined;
    return {
      kind: d?.kind ?? (cause.nonRetryable ? 'Permanent' : 'Transient'),
      code: d?.code ?? cause.type ?? CODES.unclassified,
      message: cause.message,
    };
  }
  return { kind: 'Transient', code: CODES.unclassified, message: err instanceof Error ? err.message : String(err) };
}
