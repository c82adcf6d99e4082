// How the pinned long-lived workflows (contracts/versioning.ts: proxy, pool, host monitor) move to
// a new worker build: each run stays on the build that started it, and its continue-as-new starts
// the next run on the deployment's current build (upgrade on continue-as-new). A new build
// therefore never replays another build's run of these types, and needs no patched() for them.
import { makeContinueAsNewFunc, workflowInfo } from '@temporalio/workflow';
import type { ContinueAsNewOptions, Workflow } from '@temporalio/workflow';

/** The continue-as-new options of a pinned long-lived run: the next run starts on the current build. */
export const ONTO_CURRENT_BUILD = { initialVersioningBehavior: 'AUTO_UPGRADE' } as const satisfies ContinueAsNewOptions;

/** Continue-as-new onto the current build, with `options` (e.g. the memo) beside it. */
export function continueOntoCurrentBuild<F extends Workflow>(
  options: ContinueAsNewOptions = {},
): (...args: Parameters<F>) => Promise<never> {
  return makeContinueAsNewFunc<F>({ ...options, ...ONTO_CURRENT_BUILD });
}

/**
 * True once the deployment has a current (or ramping) build other than this run's: a run that can
 * continue as new now should, so the old build drains. Always false on an unversioned worker.
 */
export function newerBuildCurrent(): boolean {
  return workflowInfo().targetWorkerDeploymentVersionChanged;
}
