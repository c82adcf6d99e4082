/**
 * Worker Versioning on a real server: builds of the worker (runtime/versioning.ts's options,
 * build IDs b1, b2, b3 of one Worker Deployment) on one task queue, the versioned worker's bundle
 * (workflows/versioned.ts: each workflow's behavior set by workflows/versioning.ts). Runs started while b1 is current: a
 * catalog run (auto-upgrade) and a smoke run on a timer (pinned). Once b2 is made current, the
 * catalog run's next task is b2's, and the smoke run finishes on b1. Then a pool run (pinned, long-lived) started on
 * b2: once b3 is current it stays on b2 until its next pass continues it as new, and the new run is pinned to b3
 * (upgrade on continue-as-new, workflows/upgrade.ts).
 *
 * Against the dev server (`scripts/temporal up`, at TEMPORAL_ADDRESS) and the cluster mode (started
 * by test/support/temporal-cluster.ts's clusterUp, as temporal-cluster-tls.test.ts starts it; mTLS).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { smokeGreet } from '../../activities/smoke.ts';
import { temporalSettings } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { CATALOG_WORKFLOW_TYPE, catalogWithdrawSignal } from '../../contracts/catalog.ts';
import { poolScaleUpdate } from '../../contracts/messages.ts';
import { POOL_WORKFLOW_TYPE } from '../../contracts/pool.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import type { catalogWorkflow, poolWorkflow, smokeWorkflow } from '../../workflows/index.ts';
import { connectClient, installTestRuntime, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import type { TemporalCredentials } from '../support/temporal.ts';
import { CLUSTER_UP_TIMEOUT_MS, clusterUp } from '../support/temporal-cluster.ts';
import { latestRunId, startBuild as startBuild_, versioning as versioning_ } from '../support/worker-deployment.ts';
import type { Deployment } from '../support/worker-deployment.ts';

const TEST_TIMEOUT_MS = 240_000;
/** The entry a versioned worker bundles: the workflows with their behaviors set. */
const VERSIONED_WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/versioned.ts', import.meta.url));
const SMOKE_TIMER_MS = 15_000;

installTestRuntime();

function suite(server: string, connect: () => Promise<TemporalSettings>): void {
  describe(`Worker Versioning: ${server}`, () => {
    let settings: TemporalSettings;
    let credentials: TemporalCredentials;
    let client: Client;
    let code: string;
    const stops: (() => Promise<void>)[] = [];
    const taskQueue = uniqueId('versioning-tq');
    // A deployment name may not hold '.' or ':' (uniqueId gives neither).
    const deploymentName = uniqueId('ep-versioning');
    const deployment = (): Deployment => ({ settings, credentials, client, deploymentName, taskQueue, stops });

    before(
      async () => {
        settings = await connect();
        credentials = {
          ...(settings.tls ? { tls: settings.tls } : {}),
          ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
        };
        client = await connectClient(settings.address, settings.namespace, credentials);
        ({ code } = await bundleWorkflowCode({
          workflowsPath: VERSIONED_WORKFLOWS_PATH,
          logger: new DefaultLogger('WARN'),
        }));
      },
      { timeout: CLUSTER_UP_TIMEOUT_MS + 60_000 },
    );

    after(async () => {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
      await client?.connection.close();
    });

    const startBuild = (buildId: string): Promise<void> => startBuild_(deployment(), buildId, code, { smokeGreet });
    const versioning = (workflowId: string) => versioning_(deployment(), workflowId);

    it(
      'a long-lived run moves to the new current build; a short one stays pinned to its own',
      { timeout: TEST_TIMEOUT_MS },
      async () => {
        await startBuild('b1');
        const catalog = await client.workflow.start<typeof catalogWorkflow>(CATALOG_WORKFLOW_TYPE, {
          taskQueue,
          workflowId: uniqueId('catalog/versioning'),
          args: [{ publications: [] }],
        });
        stops.push(async () => {
          await catalog.terminate('worker-versioning test done');
        });
        const smoke = await client.workflow.start<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
          taskQueue,
          workflowId: uniqueId('smoke/versioning'),
          args: [{ name: 'pinned', sleepMs: SMOKE_TIMER_MS }],
        });
        for (const [id, behavior] of [
          [catalog.workflowId, 'AUTO_UPGRADE'],
          [smoke.workflowId, 'PINNED'],
        ] as const) {
          const v = await pollUntil(
            async () => ((await versioning(id)).buildId === 'b1' ? versioning(id) : undefined),
            {
              timeoutMs: 30_000,
              what: `${id}'s first task on b1`,
            },
          );
          assert.deepEqual(v, { buildId: 'b1', behavior }, id);
        }

        await startBuild('b2');
        // A signal makes a new task for the catalog run; until the switch has reached the task
        // queue's partitions a task may still go to b1, so one is sent on each check (bounded).
        let signals = 0;
        let last: Awaited<ReturnType<typeof versioning>> | undefined;
        const moved = await pollUntil(
          async () => {
            last = await versioning(catalog.workflowId);
            if (last.buildId === 'b2') return last;
            await catalog.signal(catalogWithdrawSignal, 'nobody');
            signals++;
            return undefined;
          },
          { timeoutMs: 60_000, intervalMs: 2_000, what: `the catalog run's task after the switch to run on b2` },
        ).catch(async (err: unknown) => {
          const completedBy = ((await catalog.fetchHistory()).events ?? [])
            .filter((e) => e.workflowTaskCompletedEventAttributes)
            .map((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId ?? 'none');
          const d = await client.workflowService.describeWorkerDeployment({
            namespace: settings.namespace,
            deploymentName,
          });
          const current = d.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId;
          throw new Error(
            `${(err as Error).message}: after ${signals} signal(s) the run is ${JSON.stringify(last)}, its tasks completed by [${completedBy.join(', ')}], the deployment's current build ${current}`,
            { cause: err },
          );
        });
        process.stderr.write(`worker-versioning: the catalog run moved to b2 after ${signals} signal(s)\n`);
        assert.deepEqual(moved, { buildId: 'b2', behavior: 'AUTO_UPGRADE' });

        const result = await withTimeout(smoke.result(), SMOKE_TIMER_MS + 30_000, 'the pinned smoke run');
        assert.equal(result.sleptMs, SMOKE_TIMER_MS);
        assert.deepEqual(await versioning(smoke.workflowId), { buildId: 'b1', behavior: 'PINNED' });
        const history = await smoke.fetchHistory();
        const completedBy = (history.events ?? [])
          .filter((e) => e.workflowTaskCompletedEventAttributes)
          .map((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId);
        assert.ok(completedBy.length >= 2, 'the pinned run had tasks before and after the switch');
        assert.deepEqual(new Set(completedBy), new Set(['b1']), "every task of the pinned run was b1's");
      },
    );

    it(
      'a pinned pool run stays on its build; its continue-as-new starts the next run on the new current build',
      { timeout: TEST_TIMEOUT_MS },
      async () => {
        // b2 is current (the test above made it so).
        const pool = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
          taskQueue,
          workflowId: uniqueId('pool/versioning'),
          args: [{ spec: { entry: 'versioning', name: 'p', size: 0, template: { imageKey: 'none' } } }],
        });
        stops.push(async () => {
          await pool.terminate('worker-versioning test done');
        });
        const firstRunId = pool.firstExecutionRunId;
        await pollUntil(async () => ((await versioning(pool.workflowId)).buildId === 'b2' ? true : undefined), {
          timeoutMs: 30_000,
          what: "the pool run's first task on b2",
        });
        assert.deepEqual(await versioning(pool.workflowId), { buildId: 'b2', behavior: 'PINNED' });

        await startBuild('b3');
        // Each scale update is a task of the run; the first pass that sees the newer current build
        // continues as new. Bounded: one update every 2 s for 60 s.
        let updates = 0;
        const latestRun = () => latestRunId(deployment(), pool.workflowId);
        await pollUntil(
          async () => {
            if ((await latestRun()) !== firstRunId) return true;
            await pool.executeUpdate(poolScaleUpdate, { args: [{ size: 0 }] });
            updates++;
            return undefined;
          },
          { timeoutMs: 60_000, intervalMs: 2_000, what: 'the pool run to continue as new after b3 became current' },
        );
        process.stderr.write(`worker-versioning: the pool run continued as new after ${updates} update(s)\n`);

        const first = client.workflow.getHandle(pool.workflowId, firstRunId);
        const firstEvents = (await first.fetchHistory()).events ?? [];
        assert.ok(
          firstEvents.at(-1)?.workflowExecutionContinuedAsNewEventAttributes,
          'the first run ended by continuing as new',
        );
        const firstBy = firstEvents
          .filter((e) => e.workflowTaskCompletedEventAttributes)
          .map((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId);
        assert.deepEqual(new Set(firstBy), new Set(['b2']), "every task of the first run was b2's (pinned)");

        const next = await pollUntil(
          async () => {
            const v = await versioning(pool.workflowId);
            return v.buildId === 'b3' ? v : undefined;
          },
          { timeoutMs: 30_000, what: "the new run's first task on b3" },
        );
        assert.deepEqual(next, { buildId: 'b3', behavior: 'PINNED' });
        const nextBy = ((await client.workflow.getHandle(pool.workflowId).fetchHistory()).events ?? [])
          .filter((e) => e.workflowTaskCompletedEventAttributes)
          .map((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId);
        assert.deepEqual(new Set(nextBy), new Set(['b3']), "every task of the new run is b3's");
      },
    );
  });
}

suite('dev server (scripts/temporal up)', () => Promise.resolve(temporalSettings()));
suite('cluster mode (scripts/temporal cluster, PostgreSQL, mTLS)', clusterUp);
