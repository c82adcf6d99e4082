/**
 * What N workflows have written so far, from `describe`: history events and state transitions,
 * summed. The steady-state benches take one before and one after their window; the difference is
 * what the window cost.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { sleep } from './run.ts';

export interface HistorySample {
  events: number;
  transitions: number;
}

/**
 * describe(), asked again (5 times at most, 1 s apart) when it fails: a loaded dev server
 * sometimes answers "namespace not found" for a namespace it has.
 */
async function describeRetrying(h: WorkflowHandle): ReturnType<WorkflowHandle['describe']> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await h.describe();
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(1_000);
    }
  }
}

/** Events and state transitions of `hs` summed, described 50 at a time. */
export async function historySample(hs: readonly WorkflowHandle[]): Promise<HistorySample> {
  let events = 0;
  let transitions = 0;
  for (let i = 0; i < hs.length; i += 50) {
    const ds = await Promise.all(hs.slice(i, i + 50).map((h) => describeRetrying(h)));
    for (const d of ds) {
      events += d.historyLength;
      transitions += Number(d.raw.workflowExecutionInfo?.stateTransitionCount ?? 0);
    }
  }
  return { events, transitions };
}
