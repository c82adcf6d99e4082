// Patches on their way out (docs/temporal.md, "Versioning: the rule"). The proxy, pool and host
// monitor workflows of builds before 0.2.0 auto-upgraded: when this build becomes current their
// open runs move onto it mid-run and replay here, so the patch markers they recorded are accepted
// where they recorded them (deprecatePatch), and the branch each patch guarded is the only one.
// From this build on those types are pinned (upgrade.ts) and no build replays another's runs.
// Retire: delete this file and its calls (each `retired(X)` is `true`) in the first build after
// 0.2.0; by then every run from before 0.2.0 has continued as new onto a pinned 0.2.0 run.
import { deprecatePatch } from '@temporalio/workflow';

/** The marker every proxy run of the release before 0.2.0 recorded first (its patch baseline). */
export const PROXY_BASELINE_PATCH = 'proxy-baseline-2026-12';

/** Accepts `id`'s marker in a run recorded before 0.2.0 (and records a deprecated one): always true. */
export function retired(id: string): true {
  deprecatePatch(id);
  return true;
}
