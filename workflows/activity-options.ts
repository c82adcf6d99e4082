// Named activity option presets (DESIGN.md §9): workflows pick one instead of spelling timeouts.
import type { ActivityOptions } from '@temporalio/workflow';

/** A short, side-effect-free activity: 10 s per attempt, 5 attempts with backoff up to 10 s. */
export const QUICK_ACTIVITY = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 5 },
} as const satisfies ActivityOptions;
