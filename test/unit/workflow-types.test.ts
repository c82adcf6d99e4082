/**
 * Clients start workflows by type name (client/ may only `import type` the workflows): each
 * type-name constant of contracts/ is the name of the exported workflow function it starts, so the
 * string cannot drift from the function.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { CATALOG_WORKFLOW_TYPE } from '../../contracts/catalog.ts';
import { GC_WORKFLOW_TYPE, HEALTH_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import { HOST_WORKFLOW_TYPE } from '../../contracts/host.ts';
import { HOST_MONITOR_WORKFLOW_TYPE } from '../../contracts/host-monitor.ts';
import { IMAGE_WORKFLOW_TYPE } from '../../contracts/image.ts';
import { POOL_WORKFLOW_TYPE } from '../../contracts/pool.ts';
import { PROXY_WORKFLOW_TYPE } from '../../contracts/proxy.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import { WARM_WORKFLOW_TYPE } from '../../contracts/warm.ts';
import * as workflows from '../../workflows/index.ts';

it('each workflow type name is the name of the exported workflow function', () => {
  const pairs: [string, { name: string }][] = [
    [PROXY_WORKFLOW_TYPE, workflows.proxyLifecycle],
    [IMAGE_WORKFLOW_TYPE, workflows.ensureImageWorkflow],
    [WARM_WORKFLOW_TYPE, workflows.warmImageWorkflow],
    [SMOKE_WORKFLOW_TYPE, workflows.smokeWorkflow],
    [GC_WORKFLOW_TYPE, workflows.orphanGcWorkflow],
    [HEALTH_WORKFLOW_TYPE, workflows.providerHealthWorkflow],
    [CATALOG_WORKFLOW_TYPE, workflows.catalogWorkflow],
    [POOL_WORKFLOW_TYPE, workflows.poolWorkflow],
    [HOST_WORKFLOW_TYPE, workflows.hostWorkflow],
    [HOST_MONITOR_WORKFLOW_TYPE, workflows.hostMonitorWorkflow],
  ];
  for (const [type, fn] of pairs) assert.equal(fn.name, type);
});

it('every exported workflow has a type-name constant', () => {
  const named = new Set([
    PROXY_WORKFLOW_TYPE,
    IMAGE_WORKFLOW_TYPE,
    WARM_WORKFLOW_TYPE,
    SMOKE_WORKFLOW_TYPE,
    GC_WORKFLOW_TYPE,
    HEALTH_WORKFLOW_TYPE,
    CATALOG_WORKFLOW_TYPE,
    POOL_WORKFLOW_TYPE,
    HOST_WORKFLOW_TYPE,
    HOST_MONITOR_WORKFLOW_TYPE,
  ]);
  assert.deepEqual(Object.keys(workflows).sort(), [...named].sort());
});
