/**
 * Versioned workers for the Worker Versioning tests: a build of one Worker Deployment polling a
 * task queue (runtime/versioning.ts's options, as the worker takes them), made the deployment's
 * current version once the server has seen it poll, and where a run's tasks went.
 */
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { TemporalSettings } from '../../client/connection.ts';
import { workerVersioning } from '../../runtime/versioning.ts';
import { connectWorker, pollUntil, withTimeout } from './temporal.ts';
import type { TemporalCredentials } from './temporal.ts';

export interface Deployment {
  settings: TemporalSettings;
  credentials: TemporalCredentials;
  client: Client;
  deploymentName: string;
  taskQueue: string;
  /** Stops run by the test's `after`, last first. */
  stops: (() => Promise<void>)[];
}

const BEHAVIOR = { 1: 'PINNED', 2: 'AUTO_UPGRADE' } as Record<number, string>;

/**
 * Starts a worker of build `buildId` running the workflow bundle `code` (and `activities`), and
 * makes it the deployment's current version (bounded: the server refuses the switch until it has
 * seen the version poll every task queue of the current one).
 */
export async function startBuild(
  d: Deployment,
  buildId: string,
  code: string,
  activities: Record<string, (...args: never[]) => unknown> = {},
): Promise<void> {
  const { settings, client, deploymentName } = d;
  const connection = await connectWorker(settings.address, d.credentials);
  const workerDeploymentOptions = workerVersioning({ 'deployment-name': deploymentName, 'build-id': buildId }, {});
  assert.ok(workerDeploymentOptions);
  const worker = await Worker.create({
    connection,
    namespace: settings.namespace,
    taskQueue: d.taskQueue,
    workflowBundle: { code },
    activities,
    workerDeploymentOptions,
  });
  const running = worker.run();
  d.stops.push(async () => {
    worker.shutdown();
    await withTimeout(running, 30_000, `build ${buildId}'s worker to stop`);
    await connection.close();
  });
  await pollUntil(
    async () => {
      const info = await client.workflowService
        .describeWorkerDeployment({ namespace: settings.namespace, deploymentName })
        .catch(() => undefined);
      const versions = info?.workerDeploymentInfo?.versionSummaries ?? [];
      return versions.some((v) => v.deploymentVersion?.buildId === buildId) ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 500, what: `version ${buildId} of ${deploymentName} to be registered` },
  );
  // FAILED_PRECONDITION "missing active task queues" until the new version polled them all: retried, bounded.
  let refusal = '';
  try {
    await pollUntil(
      () =>
        client.workflowService
          .setWorkerDeploymentCurrentVersion({
            namespace: settings.namespace,
            deploymentName,
            buildId,
            identity: 'worker-deployment test support',
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

/** The latest run of `workflowId`: its build and behavior as the server records them. */
export async function versioning(d: Deployment, workflowId: string) {
  const info = await d.client.workflowService.describeWorkflowExecution({
    namespace: d.settings.namespace,
    execution: { workflowId },
  });
  const v = info.workflowExecutionInfo?.versioningInfo;
  return { buildId: v?.deploymentVersion?.buildId ?? undefined, behavior: BEHAVIOR[v?.behavior ?? 0] };
}

/** The latest run's ID of `workflowId`. */
export async function latestRunId(d: Deployment, workflowId: string): Promise<string | undefined> {
  const info = await d.client.workflowService.describeWorkflowExecution({
    namespace: d.settings.namespace,
    execution: { workflowId },
  });
  return info.workflowExecutionInfo?.execution?.runId ?? undefined;
}

/** The build of each workflow task a run completed, in order. */
export async function tasksCompletedBy(d: Deployment, workflowId: string, runId?: string): Promise<string[]> {
  const events = (await d.client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
  return events
    .filter((e) => e.workflowTaskCompletedEventAttributes)
    .map((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId ?? 'none');
}
