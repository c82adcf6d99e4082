/**
 * What an API integration test stands on, set up once: the dev server, an in-process worker of the
 * real workflows and activities over test hosts (an entry of its own per run, on a task queue of
 * its own), optionally the catalog publication, a token file and the API over the real stores. `close()`
 * ends what the run left open on its task queue (a proxy through its delete update, anything else
 * terminated), then stops the API, the worker and the connections: bounded, and never throwing, so
 * an `after` hook always gets through.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { SurveyRead } from '../../client/host-store.ts';
import { HEALTH_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import type { providerHealthWorkflow } from '../../workflows/index.ts';
import { PROXY_DELETE_UPDATE, PROXY_WORKFLOW_TYPE } from '../../contracts/proxy.ts';
import type { ProvidersConfig } from '../../lib/config/index.ts';
import { catalogOf, startCatalogPublisher } from '../../runtime/catalog.ts';
import { startTestApi, writeTokens } from './api.ts';
import type { TestApi, TestTokens } from './api.ts';
import { fleetConfig, startFleetWorker } from './fleet.ts';
import type { RunningWorker } from './fleet.ts';
import { connectClient, connectWorker, installTestRuntime, onTaskQueues, uniqueId, withTimeout } from './temporal.ts';
import { loadTestHosts } from './testhosts.ts';
import type { TestHost } from './testhosts.ts';

export interface ApiWorldOptions {
  /** Prefix of the entry and the task queue (a few lowercase letters). */
  prefix: string;
  /** How many test hosts the entry has (default 1). */
  hosts?: number;
  /** Image keys of the entry (default one, `empty`, at a URL nothing fetches: for tests that boot no VM). */
  images?: Record<string, { url: string; sha256?: string }>;
  /** Publish the worker's catalog (what proxy and pool creates are checked against); default false. */
  catalog?: boolean;
  /** The survey /v1/hosts knows hosts from (default none: test/support/api.ts says why). */
  survey?: () => Promise<SurveyRead | undefined>;
  /**
   * Run the real provider-health survey once on the run's own queue (after the worker starts) and
   * give the API that: /v1/hosts then knows the run's own hosts (and no other run's).
   */
  surveyOwnHosts?: boolean;
}

export interface ApiWorld {
  client: Client;
  connection: NativeConnection;
  worker: RunningWorker;
  api: TestApi;
  tokens: TestTokens;
  config: ProvidersConfig;
  entry: string;
  taskQueue: string;
  hosts: TestHost[];
  /** A scratch directory of the run (removed by close). */
  tmp: string;
  /** The survey the API was given by surveyOwnHosts (undefined without it). */
  surveyed: ProviderHealthResult | undefined;
  close(): Promise<void>;
}

export async function startApiWorld(o: ApiWorldOptions): Promise<ApiWorld> {
  installTestRuntime();
  const run = Date.now().toString(36);
  const entry = `${o.prefix}${run}`;
  const taskQueue = uniqueId(`api-${o.prefix}`);
  const hosts = loadTestHosts().slice(0, o.hosts ?? 1);
  const stops: (() => Promise<unknown>)[] = [];
  const close = async (): Promise<void> => {
    for (const stop of stops.reverse()) {
      await withTimeout(stop(), 90_000, 'a test resource to stop').catch((err: unknown) =>
        process.stderr.write(`api world close: ${String(err)}\n`),
      );
    }
  };
  try {
    const client = await connectClient();
    stops.push(() => client.connection.close());
    const connection = await connectWorker();
    stops.push(() => connection.close());
    const tmp = await mkdtemp(join(tmpdir(), `ep-${o.prefix}-`));
    stops.push(() => rm(tmp, { recursive: true, force: true }));
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts,
      images: o.images ?? { empty: { url: 'http://127.0.0.1:9/never-fetched.qcow2' } },
    });
    const worker = await startFleetWorker(connection, client, config, taskQueue);
    stops.push(() => worker.stop());
    // Before the worker stops: what the run left open on its queue.
    stops.push(() => endOpenWorkflows(client, taskQueue));
    if (o.catalog) {
      const catalog = await startCatalogPublisher(client, taskQueue, catalogOf(config), { info() {}, warn() {} });
      stops.push(() => catalog.stop());
    }
    let surveyed: ProviderHealthResult | undefined;
    if (o.surveyOwnHosts) {
      surveyed = await client.workflow.execute<typeof providerHealthWorkflow>(HEALTH_WORKFLOW_TYPE, {
        taskQueue,
        workflowId: uniqueId('provider-health'),
        workflowExecutionTimeout: '2 minutes',
      });
    }
    const own = surveyed && { result: surveyed, running: false };
    const survey = o.survey ?? (own ? () => Promise.resolve(own) : undefined);
    const tokens = await writeTokens(tmp);
    const api = await startTestApi(client, taskQueue, tokens, 10_000, undefined, survey ? { survey } : {});
    stops.push(() => api.close());
    return { client, connection, worker, api, tokens, config, entry, taskQueue, hosts, tmp, surveyed, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Ends every open workflow on `taskQueue`: a proxy through its delete update, anything else terminated. */
async function endOpenWorkflows(client: Client, taskQueue: string): Promise<void> {
  for await (const wf of client.workflow.list({
    query: `${onTaskQueues(taskQueue)} AND ExecutionStatus = 'Running'`,
  })) {
    const h = client.workflow.getHandle(wf.workflowId);
    if (wf.type === PROXY_WORKFLOW_TYPE) await h.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined);
    else await h.terminate('test run over').catch(() => undefined);
  }
}
