/**
 * Worker Versioning on a real server: two builds of the worker (runtime/versioning.ts's options,
 * build IDs b1 and b2 of one Worker Deployment) on one task queue, the versioned worker's bundle
 * (workflows/versioned.ts: each workflow's behavior set by workflows/versioning.ts). Runs started while b1 is current: a
 * catalog run (long-lived: auto-upgrade) and a smoke run on a timer (short: pinned). Once b2 is made current, the
 * catalog run's next task is b2's, and the smoke run finishes on b1.
 *
 * Against the dev server (`scripts/temporal up`, at TEMPORAL_ADDRESS) and the cluster mode (started
 * by test/support/temporal-cluster.ts's clusterUp, as temporal-cluster-tls.test.ts starts it; mTLS).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { Worker, bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { smokeGreet } from '../../activities/smoke.ts';
import { temporalSettings } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { CATALOG_WORKFLOW_TYPE, catalogWithdrawSignal } from '../../contracts/catalog.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import { workerVersioning } from '../../runtime/versioning.ts';
import type { catalogWorkflow, smokeWorkflow } from '../../workflows/index.ts';
import {
  connectClient,
  connectWorker,
  installTestRuntime,
  pollUntil,
  uniqueId,
  withTimeout,
} from '../support/temporal.ts';
import type { TemporalCredentials } from '../support/temporal.ts';
import { CLUSTER_UP_TIMEOUT_MS, clusterUp } from '../support/temporal-cluster.ts';

const TEST_TIMEOUT_MS = 240_000;
/** The entry a versioned worker bundles: the workflows with their behaviors set. */
const VERSIONED_WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/versioned.ts', import.meta.url));
const SMOKE_TIMER_MS = 15_000;
const BEHAVIOR = { 1: 'PINNED', 2: 'AUTO_UPGRADE' } as Record<number, string>;

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

    /** A worker of build `buildId`, polling until `stops` runs. */
    async function startBuild(buildId: string): Promise<void> {
      const connection = await connectWorker(settings.address, credentials);
      const workerDeploymentOptions = workerVersioning({ 'deployment-name': deploymentName, 'build-id': buildId }, {});
      assert.ok(workerDeploymentOptions);
      const worker = await Worker.create({
        connection,
        namespace: settings.namespace,
        taskQueue,
        workflowBundle: { code },
        activities: { smokeGreet },
        workerDeploymentOptions,
      });
      const running = worker.run();
      stops.push(async () => {
        worker.shutdown();
        await withTimeout(running, 30_000, `build ${buildId}'s worker to stop`);
        await connection.close();
      });
      // The server learns of a version from its pollers; only then can it be made current.
      await pollUntil(
        async () => {
          const d = await client.workflowService
            .describeWorkerDeployment({ namespace: settings.namespace, deploymentName })
            .catch(() => undefined);
          const versions = d?.workerDeploymentInfo?.versionSummaries ?? [];
          return versions.some((v) => v.deploymentVersion?.buildId === buildId) ? true : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500, what: `version ${buildId} of ${deploymentName} to be registered` },
      );
      // Until the server has seen the new version poll every task queue of the current one, it
      // refuses the switch (FAILED_PRECONDITION "missing active task queues"): retried, bounded.
      let refusal = '';
      try {
        await pollUntil(
          () =>
            client.workflowService
              .setWorkerDeploymentCurrentVersion({
                namespace: settings.namespace,
                deploymentName,
                buildId,
                identity: 'worker-versioning.test',
              })
              .then(
                () => true,
                (err: { code?: number; message?: string }) => {
                  if (err.code !== 9) throw err;
                  refusal = err.message ?? '';
                  return undefined;
                },
              ),
          { timeoutMs: 60_000, intervalMs: 1_000, what: `${buildId} to be made current` },
        );
      } catch (err) {
        throw new Error(`${(err as Error).message}; the server's last refusal: ${refusal}`, { cause: err });
      }
    }

    const versioning = async (workflowId: string) => {
      const d = await client.workflowService.describeWorkflowExecution({
        namespace: settings.namespace,
        execution: { workflowId },
      });
      const v = d.workflowExecutionInfo?.versioningInfo;
      return { buildId: v?.deploymentVersion?.buildId ?? undefined, behavior: BEHAVIOR[v?.behavior ?? 0] };
    };

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
  });
}

suite('dev server (scripts/temporal up)', () => Promise.resolve(temporalSettings()));
suite('cluster mode (scripts/temporal cluster, PostgreSQL, mTLS)', clusterUp);
