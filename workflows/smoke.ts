// The smoke workflow: one activity, then an optional durable timer. Proves a worker, the
// workflow bundle, the activity round trip and (with the time-skipping test server) timers.
import { log, sleep } from '@temporalio/workflow';
import type { SmokeInput, SmokeResult } from '../contracts/smoke.ts';
import { quick } from './stubs.ts';

export async function smokeWorkflow(input: SmokeInput): Promise<SmokeResult> {
  const startedAt = Date.now(); // workflow time: deterministic, replay-safe
  const { greeting, attempt } = await quick.smokeGreet(input.name);
  const sleepMs = Math.max(0, input.sleepMs ?? 0);
  if (sleepMs > 0) {
    log.info('smoke workflow sleeping', { sleepMs });
    await sleep(sleepMs);
  }
  return { greeting, activityAttempt: attempt, sleptMs: sleepMs, workflowElapsedMs: Date.now() - startedAt };
}
