/**
 * The upgrade path from 0.1, on the dev server with real builds: b1 is the 0.1 release's workflows
 * (taken from git at RELEASE_0_1, bundled as a 0.1 versioned worker bundled them: its pools
 * auto-upgraded), b2 is this build. A pool run started on b1 records its patch markers there; once
 * b2 is current the run's next tasks are b2's, which replays the 0.1 history (workflows/retiring.ts
 * accepts its markers) with no failed task; at its continue-as-new the next run starts on b2,
 * pinned. Needs git and the release commit in the clone, and the dev server (scripts/temporal up).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { temporalSettings } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { poolScaleUpdate } from '../../contracts/messages.ts';
import { POOL_WORKFLOW_TYPE } from '../../contracts/pool.ts';
import type { poolWorkflow } from '../../workflows/index.ts';
import { connectClient, installTestRuntime, pollUntil, PROJECT_ROOT, uniqueId } from '../support/temporal.ts';
import type { TemporalCredentials } from '../support/temporal.ts';
import { latestRunId, startBuild, tasksCompletedBy, versioning } from '../support/worker-deployment.ts';
import type { Deployment } from '../support/worker-deployment.ts';

const pexec = promisify(execFile);
/** The 0.1 release: the last commit whose proxies, pools and host monitors auto-upgraded. */
const RELEASE_0_1 = 'b0312bea085377607928fed9ece04fa742b0284e';
const TEST_TIMEOUT_MS = 240_000;
/** The pool continues as new after this many passes (one per update here). */
const PASSES = 4;

installTestRuntime();

/** The 0.1 release's workflows and contracts, bundled as its versioned worker bundled them. */
async function releaseBundle(dir: string): Promise<string> {
  const archive = join(dir, 'release.tar');
  await pexec('git', ['-C', PROJECT_ROOT, 'archive', '-o', archive, RELEASE_0_1, 'workflows', 'contracts']).catch(
    (err: Error) => {
      throw new Error(
        `cannot read the 0.1 release (${RELEASE_0_1}) from git: ${err.message}; this test needs the full history (not a shallow clone)`,
        { cause: err },
      );
    },
  );
  await pexec('tar', ['-xf', archive, '-C', dir]);
  await symlink(join(PROJECT_ROOT, 'node_modules'), join(dir, 'node_modules'));
  const { code } = await bundleWorkflowCode({
    workflowsPath: join(dir, 'workflows/versioned.ts'),
    logger: new DefaultLogger('WARN'),
  });
  return code;
}

describe('upgrade from 0.1 (dev server, the 0.1 release beside this build)', () => {
  let settings: TemporalSettings;
  let client: Client;
  let oldCode: string;
  let newCode: string;
  let dir: string;
  const stops: (() => Promise<void>)[] = [];
  const taskQueue = uniqueId('upgrade-tq');
  const deploymentName = uniqueId('ep-upgrade');
  const deployment = (): Deployment => ({ settings, credentials, client, deploymentName, taskQueue, stops });
  const credentials: TemporalCredentials = {};

  before(
    async () => {
      settings = temporalSettings();
      client = await connectClient(settings.address, settings.namespace, credentials);
      dir = await mkdtemp(join(tmpdir(), 'ep-release-0.1-'));
      oldCode = await releaseBundle(dir);
      ({ code: newCode } = await bundleWorkflowCode({
        workflowsPath: fileURLToPath(new URL('../../workflows/versioned.ts', import.meta.url)),
        logger: new DefaultLogger('WARN'),
      }));
    },
    { timeout: 180_000 },
  );

  after(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await client?.connection.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    'a 0.1 pool run moves onto this build mid-run, replays there, and continues as new pinned to it',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await startBuild(deployment(), 'r01', oldCode);
      const pool = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
        taskQueue,
        workflowId: uniqueId('pool/upgrade'),
        args: [
          {
            spec: { entry: 'upgrade', name: 'p', size: 0, template: { imageKey: 'none' } },
            continueAsNewAfterPasses: PASSES,
          },
        ],
      });
      stops.push(async () => {
        await pool.terminate('upgrade test done');
      });
      const first = pool.firstExecutionRunId;
      await pollUntil(
        async () => ((await versioning(deployment(), pool.workflowId)).buildId === 'r01' ? true : undefined),
        {
          timeoutMs: 30_000,
          what: "the pool run's first task on the 0.1 build",
        },
      );
      assert.deepEqual(await versioning(deployment(), pool.workflowId), { buildId: 'r01', behavior: 'AUTO_UPGRADE' });
      await pool.executeUpdate(poolScaleUpdate, { args: [{ size: 0 }] });
      const markers = ((await pool.fetchHistory()).events ?? []).filter((e) => e.markerRecordedEventAttributes);
      assert.ok(markers.length > 0, 'the 0.1 run recorded its patch markers');

      await startBuild(deployment(), 'b020', newCode);
      // Updates until the run moved (its tasks are b020's) and continued as new; bounded.
      let updates = 0;
      await pollUntil(
        async () => {
          if ((await latestRunId(deployment(), pool.workflowId)) !== first) return true;
          await pool.executeUpdate(poolScaleUpdate, { args: [{ size: 0 }] });
          updates++;
          return undefined;
        },
        { timeoutMs: 60_000, intervalMs: 1_000, what: 'the 0.1 run to continue as new on this build' },
      );
      process.stderr.write(`upgrade: the 0.1 run continued as new after ${updates} update(s) once b020 was current\n`);

      const firstEvents = (await client.workflow.getHandle(pool.workflowId, first).fetchHistory()).events ?? [];
      assert.deepEqual(
        firstEvents
          .filter((e) => e.workflowTaskFailedEventAttributes)
          .map((e) => e.workflowTaskFailedEventAttributes?.cause),
        [],
        'no workflow task of the 0.1 run failed on this build (it replayed)',
      );
      assert.ok(firstEvents.at(-1)?.workflowExecutionContinuedAsNewEventAttributes, 'the 0.1 run continued as new');
      const by = await tasksCompletedBy(deployment(), pool.workflowId, first);
      assert.equal(by[0], 'r01');
      assert.equal(by.at(-1), 'b020', 'the 0.1 run moved onto this build mid-run');

      const next = await pollUntil(
        async () => {
          const v = await versioning(deployment(), pool.workflowId);
          return v.buildId === 'b020' && v.behavior !== undefined ? v : undefined;
        },
        { timeoutMs: 30_000, what: "the new run's first task on this build" },
      );
      assert.deepEqual(next, { buildId: 'b020', behavior: 'PINNED' });
      const status = await client.workflow
        .getHandle<typeof poolWorkflow>(pool.workflowId)
        .executeUpdate(poolScaleUpdate, {
          args: [{ size: 0 }],
        });
      assert.equal(status.desired, 0, 'the carried pool answers on this build');
    },
  );
});
