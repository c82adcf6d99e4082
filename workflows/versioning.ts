// Each workflow's Worker Versioning behavior (contracts/versioning.ts) set on its definition, as
// the SDK reads it when a versioned worker (runtime/versioning.ts) completes the run's tasks: the
// long-lived runs auto-upgrade to the deployment's current build, the short ones stay pinned to
// the build that started them. Imported for this effect by workflows/versioned.ts, the entry a
// versioned worker bundles; never by workflows/index.ts: the server refuses the completions of an
// unversioned worker that carry a behavior. It adds no command: every recorded history replays.
import { setWorkflowOptions } from '@temporalio/workflow';
import { WORKFLOW_VERSIONING } from '../contracts/versioning.ts';
import { catalogWorkflow } from './catalog.ts';
import { orphanGcWorkflow, providerHealthWorkflow } from './fleet.ts';
import { hostWorkflow } from './host.ts';
import { ensureImageWorkflow } from './image.ts';
import { poolWorkflow } from './pool/index.ts';
import { proxyLifecycle } from './proxy/index.ts';
import { smokeWorkflow } from './smoke.ts';
import { warmImageWorkflow } from './warm.ts';

/** Every workflow function the worker registers, by its type name. */
export const VERSIONED_WORKFLOWS = {
  proxyLifecycle,
  poolWorkflow,
  hostWorkflow,
  catalogWorkflow,
  ensureImageWorkflow,
  warmImageWorkflow,
  orphanGcWorkflow,
  providerHealthWorkflow,
  smokeWorkflow,
} as const;

for (const [type, fn] of Object.entries(VERSIONED_WORKFLOWS) as [string, (...args: never[]) => Promise<unknown>][]) {
  const versioningBehavior = WORKFLOW_VERSIONING[type];
  if (versioningBehavior !== undefined) setWorkflowOptions({ versioningBehavior }, fn);
}
