/**
 * Worker Versioning options (runtime/versioning.ts): flags and variables become the SDK's
 * workerDeploymentOptions (a flag over its variable, the bundle's key as the default build ID),
 * bad input is refused naming the option; and every workflow type has a versioning behavior
 * (contracts/versioning.ts). That the servers route tasks by it is
 * shown in docs/temporal.md's "Upgrading workers" (the servers tested).
 */
import assert from 'node:assert/strict';
import { parseArgs } from 'node:util';
import { describe, it } from 'node:test';
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import { POOL_WORKFLOW_TYPE } from '../../contracts/pool.ts';
import { PROXY_WORKFLOW_TYPE } from '../../contracts/proxy.ts';
import { HOST_MONITOR_WORKFLOW_TYPE } from '../../contracts/host-monitor.ts';
import { HOST_WORKFLOW_TYPE } from '../../contracts/host.ts';
import { IMAGE_WORKFLOW_TYPE } from '../../contracts/image.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import { WORKFLOW_VERSIONING } from '../../contracts/versioning.ts';
import { OptionError } from '../../runtime/options.ts';
import { VERSIONING_OPTIONS, workerVersioning } from '../../runtime/versioning.ts';
import type { WorkerVersioning } from '../../runtime/versioning.ts';
import * as workflows from '../../workflows/index.ts';

const parse = (args: string[]) => parseArgs({ args, options: VERSIONING_OPTIONS, strict: true }).values;
const refused = (re: RegExp) => (e: unknown) => e instanceof OptionError && re.test(e.message);

describe('workerVersioning', () => {
  it('neither flag nor variable: an unversioned worker', () => {
    assert.equal(workerVersioning(parse([]), {}), undefined);
    assert.equal(workerVersioning(parse([]), { EP_WORKER_DEPLOYMENT_NAME: '', EP_WORKER_BUILD_ID: '' }), undefined);
  });
  it('flags become the SDK options, pinned by default', () => {
    const v = workerVersioning(parse(['--deployment-name', 'egress-proxies', '--build-id', '1.4.0-2f6beeb']), {});
    assert.deepEqual(v, {
      version: { deploymentName: 'egress-proxies', buildId: '1.4.0-2f6beeb' },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'PINNED',
    });
    // The shape is the SDK's own type (compile-time check: a drift in the SDK's type fails tsc here).
    const sdk: WorkerDeploymentOptions | undefined = v satisfies WorkerVersioning | undefined;
    assert.ok(sdk?.useWorkerVersioning);
  });
  it('variables, a flag over its variable', () => {
    const env = { EP_WORKER_DEPLOYMENT_NAME: 'ep', EP_WORKER_BUILD_ID: 'b1' };
    assert.deepEqual(workerVersioning({}, env)?.version, { deploymentName: 'ep', buildId: 'b1' });
    assert.deepEqual(workerVersioning(parse(['--build-id', 'b2']), env)?.version, {
      deploymentName: 'ep',
      buildId: 'b2',
    });
  });
  it('a deployment name without a build ID takes the default build ID (the bundle key), else is refused', () => {
    assert.equal(workerVersioning(parse(['--deployment-name', 'ep']), {}, 'abc123')?.version.buildId, 'abc123');
    assert.throws(
      () => workerVersioning(parse(['--deployment-name', 'ep']), {}),
      refused(/--build-id \/ EP_WORKER_BUILD_ID is not/),
    );
  });
  it('a build ID without a deployment name is refused, naming where it came from', () => {
    assert.throws(
      () => workerVersioning(parse(['--build-id', 'b1']), {}),
      refused(/^--build-id is set but --deployment-name/),
    );
    assert.throws(() => workerVersioning({}, { EP_WORKER_BUILD_ID: 'b1' }), refused(/^EP_WORKER_BUILD_ID is set/));
  });
  for (const [args, re] of [
    [['--deployment-name', 'a.b', '--build-id', 'x'], /--deployment-name must not contain '\.' or ':'/],
    [['--deployment-name', 'a:b', '--build-id', 'x'], /--deployment-name must not contain '\.' or ':'/],
    [['--deployment-name', ' ep', '--build-id', 'x'], /--deployment-name must not contain spaces/],
    [['--deployment-name', 'ep', '--build-id', 'a b'], /--build-id must not contain spaces/],
    [['--deployment-name', 'ep', '--build-id', ''], /--build-id must not be empty/],
    [['--deployment-name', 'ep', '--build-id', 'x'.repeat(481)], /--build-id is longer than 480/],
    [['--deployment-name', 'ep', '--build-id', '__unversioned__'], /--build-id must not start with '__'/],
    [['--deployment-name', '__ep', '--build-id', 'x'], /--deployment-name must not start with '__'/],
  ] as const) {
    it(`refuses ${JSON.stringify(args).slice(0, 70)}`, () => {
      assert.throws(() => workerVersioning(parse([...args]), {}), refused(re));
    });
  }
});

describe('WORKFLOW_VERSIONING', () => {
  it('names every exported workflow type, and nothing else', () => {
    assert.deepEqual(Object.keys(WORKFLOW_VERSIONING).sort(), Object.keys(workflows).sort());
  });
  it('proxies, pools and host monitors are pinned (they move at continue-as-new), hosts auto-upgrade, short runs are pinned', () => {
    for (const t of [PROXY_WORKFLOW_TYPE, POOL_WORKFLOW_TYPE, HOST_MONITOR_WORKFLOW_TYPE]) {
      assert.equal(WORKFLOW_VERSIONING[t], 'PINNED', t);
    }
    assert.equal(WORKFLOW_VERSIONING[HOST_WORKFLOW_TYPE], 'AUTO_UPGRADE');
    for (const t of [IMAGE_WORKFLOW_TYPE, SMOKE_WORKFLOW_TYPE]) assert.equal(WORKFLOW_VERSIONING[t], 'PINNED', t);
  });
});
