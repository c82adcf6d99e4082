// Making a proxy's status visible: search attributes and memo (which the API lists and filters
// on) and the Web UI's current details, refreshed on every state change (the monitor loop: only
// when a value they hold changes).
import { setCurrentDetails, upsertMemo } from '@temporalio/workflow';
import type { ProxyState } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import { upsertProxySearchAttributes } from '../search-attributes.ts';
import { reportToPool } from './pool-member.ts';
import type { ProxyRun } from './state.ts';
import { detailsLine, memoOf, publishedKey } from './status.ts';

/** Workflow time as RFC 3339: replay-safe. */
export const nowIso = (): string => new Date().toISOString();

/** Stamps the status and publishes it. */
export function publish(run: ProxyRun): void {
  run.status = { ...run.status, updatedAt: nowIso() };
  upsertProxySearchAttributes(run.status);
  upsertMemo(memoOf(run.status));
  setCurrentDetails(detailsLine(run.status));
  run.published = publishedKey(run.status);
  reportToPool(run, run.status.updatedAt);
}

/**
 * Publishes only when a value the search attributes or the memo hold changed (the monitor loop:
 * a healthy proxy's counters and probe times stay out of its history); the current details follow.
 */
export function publishIfChanged(run: ProxyRun): void {
  if (run.published === publishedKey(run.status)) {
    setCurrentDetails(detailsLine(run.status));
    return;
  }
  publish(run);
}

/** Moves to `state` (with `reason`) and publishes; nothing when neither changes. */
export function setState(run: ProxyRun, state: ProxyState, reason?: string): void {
  if (run.status.state === state && run.status.reason === reason) return;
  run.status = { ...run.status, state, reason };
  publish(run);
}

/** Records an activity failure as the status's last error. */
export function recordError(run: ProxyRun, err: unknown): void {
  const f = failureInfo(err);
  run.status = { ...run.status, lastError: { kind: f.kind, code: f.code, message: f.message, at: nowIso() } };
}
