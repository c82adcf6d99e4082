// Plain-JSON input and output of the smoke workflow (workflows/smoke.ts), shared with clients.

/** Workflow type name of the smoke workflow (its exported function name). */
export const SMOKE_WORKFLOW_TYPE = 'smokeWorkflow';

export interface SmokeInput {
  /** Who to greet; echoed back by the activity. */
  name: string;
  /** Durable timer the workflow sleeps on after the activity, in ms. Default 0 (no timer). */
  sleepMs?: number;
}

/** What the smoke activity returns. */
export interface SmokeGreeting {
  greeting: string;
  /** The activity's attempt number (1 on the first try). */
  attempt: number;
}

export interface SmokeResult {
  greeting: string;
  activityAttempt: number;
  /** The timer the workflow slept on, in ms. */
  sleptMs: number;
  /** Workflow time (deterministic, skipped by the time-skipping test server) from start to end, in ms. */
  workflowElapsedMs: number;
}
