// The proxy workflow's patch baseline. Every `patched()` that a new run calls records a marker and,
// from the SDK core, an upsert of the `TemporalChangeVersion` search attribute: two history events
// and a visibility write each, five patches in a plain proxy's life, up to ten in a pool member's
// with a health target. A run that records PROXY_BASELINE_PATCH (first thing, once) takes every
// patch asked through `applied()` as applied, with no marker; runs recorded before the baseline
// ask each patch as they did and replay unchanged. A patch added after the baseline is asked through `applied()` too (recorded by
// new runs) until the next baseline. Other workflows that share code with the proxy (the warm-image
// workflow's ImageWaiter) never enter the baseline, so `applied()` is `patched()` for them.
import { patched, workflowInfo } from '@temporalio/workflow';

/** The marker of a proxy run that takes the patches below as applied. */
export const PROXY_BASELINE_PATCH = 'proxy-baseline-2026-12';

/** The patches the baseline takes as applied: those the proxy workflow asked when it was drawn. */
export const BASELINE_PATCHES: readonly string[] = [
  'local-reads',
  'proxy-health-keyword',
  'find-cached-base-first',
  'join-finds-base',
  'healthy-booting',
  'created-runs',
  'health-monitor',
  'member-host-unreachable',
  'member-exit-ip',
  'pool-report-hold',
  'checkpoint-resize',
];

/**
 * The runs on the baseline, by run ID. (The SDK gives each run its own module state, so this holds
 * the current run at most; keyed anyway, so that no run could see another's answer.)
 */
const onBaseline = new Set<string>();

/** Asks, once at the start of a proxy run, whether it is on the baseline (true for every new run). */
export function enterBaseline(): void {
  if (patched(PROXY_BASELINE_PATCH)) onBaseline.add(workflowInfo().runId);
}

/** `patched(id)`, but true without a marker in a run on the baseline, for a patch it covers. */
export function applied(id: string): boolean {
  return (BASELINE_PATCHES.includes(id) && onBaseline.has(workflowInfo().runId)) || patched(id);
}
