// Worker Versioning: how each workflow type moves to a new worker build (docs/temporal.md,
// "Upgrading workers"). Plain constants, read by runtime/versioning.ts (the worker's options) and,
// through setWorkflowOptions, by the workflows themselves.
//
// PINNED: the run stays on the build that started it, to its end, so no build replays another's
// run of it and a change to its commands needs no patched(). The long-lived proxy, pool and host
// monitor runs move to a new build at their continue-as-new (workflows/upgrade.ts: at most an
// hour after the switch); the short ones (minutes) end on their build.
// AUTO_UPGRADE: the run's next workflow task goes to the deployment's current build; its code must
// replay the old history, so a change to its commands is behind patched() with a retirement
// condition. The host and catalog runs rest for months without a continue-as-new: they move this way.

import { CATALOG_WORKFLOW_TYPE } from './catalog.ts';
import { GC_WORKFLOW_TYPE, HEALTH_WORKFLOW_TYPE } from './fleet.ts';
import { HOST_WORKFLOW_TYPE } from './host.ts';
import { HOST_MONITOR_WORKFLOW_TYPE } from './host-monitor.ts';
import { IMAGE_WORKFLOW_TYPE } from './image.ts';
import { POOL_WORKFLOW_TYPE } from './pool.ts';
import { PROXY_WORKFLOW_TYPE } from './proxy.ts';
import { SMOKE_WORKFLOW_TYPE } from './smoke.ts';
import { WARM_WORKFLOW_TYPE } from './warm.ts';

import type { WorkflowVersioningBehavior } from './versioning-behavior.ts';

export { DEFAULT_VERSIONING_BEHAVIOR } from './versioning-behavior.ts';
export type { WorkflowVersioningBehavior } from './versioning-behavior.ts';

/** Every workflow type's behavior (test/unit/versioning.test.ts: one per exported workflow). */
export const WORKFLOW_VERSIONING: Readonly<Record<string, WorkflowVersioningBehavior>> = {
  [PROXY_WORKFLOW_TYPE]: 'PINNED',
  [POOL_WORKFLOW_TYPE]: 'PINNED',
  [HOST_MONITOR_WORKFLOW_TYPE]: 'PINNED',
  [HOST_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [CATALOG_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [IMAGE_WORKFLOW_TYPE]: 'PINNED',
  [WARM_WORKFLOW_TYPE]: 'PINNED',
  [GC_WORKFLOW_TYPE]: 'PINNED',
  [HEALTH_WORKFLOW_TYPE]: 'PINNED',
  [SMOKE_WORKFLOW_TYPE]: 'PINNED',
};
