// Worker Versioning: how each workflow type moves to a new worker build (docs/temporal.md,
// "Upgrading workers"). Plain constants, read by runtime/versioning.ts (the worker's options) and,
// through setWorkflowOptions, by the workflows themselves.
//
// AUTO_UPGRADE: the run's next workflow task goes to the deployment's current build; its code must
// replay the old history, so every change to its commands is behind patched(). Proxies, pools,
// hosts, host monitors and the catalog live for months: they can only move this way.
// PINNED: the run stays on the build that started it, to its end; the old build keeps running
// until its pinned runs drain. Short runs (minutes) that need no patched() when their code changes.

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
  [PROXY_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [POOL_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [HOST_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [HOST_MONITOR_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [CATALOG_WORKFLOW_TYPE]: 'AUTO_UPGRADE',
  [IMAGE_WORKFLOW_TYPE]: 'PINNED',
  [WARM_WORKFLOW_TYPE]: 'PINNED',
  [GC_WORKFLOW_TYPE]: 'PINNED',
  [HEALTH_WORKFLOW_TYPE]: 'PINNED',
  [SMOKE_WORKFLOW_TYPE]: 'PINNED',
};
