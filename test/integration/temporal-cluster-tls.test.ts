/**
 * `scripts/temporal cluster`: the real Temporal server (built from the Go module proxy at
 * dev/cluster/VERSION, the version docker-compose.yml pins) on PostgreSQL, its frontend behind
 * mTLS with certificates made by openssl at test time. A worker and a client with the cluster's
 * client certificate run the smoke workflow and find it through SQL visibility; egressctl does the
 * same with the TEMPORAL_TLS_* variables; a client without a certificate, with one from another CA,
 * or without TLS at all is refused, and the error names the cause.
 *
 * Needs: nothing running; `scripts/temporal cluster up` is called here (idempotent; a cold first
 * run builds the server, several minutes) and the cluster is left running, as the dev server is.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { Runtime, Worker } from '@temporalio/worker';
import { smokeGreet } from '../../activities/smoke.ts';
import { TemporalConnectError } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { CUSTOM_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import type { smokeWorkflow } from '../../workflows/index.ts';
import { CLUSTER_TLS_DIR, CLUSTER_UP_TIMEOUT_MS, clusterUp } from '../support/temporal-cluster.ts';
import {
  PROJECT_ROOT,
  WORKFLOWS_PATH,
  connectClient,
  connectWorker,
  customSearchAttributes,
  installTestRuntime,
  pollUntil,
  uniqueId,
  withTimeout,
} from '../support/temporal.ts';

const pexec = promisify(execFile);
const TEST_TIMEOUT_MS = 120_000;
const RESULT_TIMEOUT_MS = 30_000;

installTestRuntime();

/** Runs a command from the project root with `env` over this process's; never throws on a non-zero exit. */
async function run(
  cmd: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await pexec(cmd[0]!, cmd.slice(1), {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      timeout: 90_000,
      encoding: 'utf8',
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** The TEMPORAL_* variables of `s` (what `scripts/temporal cluster env` exports). */
function envOf(s: TemporalSettings): NodeJS.ProcessEnv {
  return {
    TEMPORAL_ADDRESS: s.address,
    TEMPORAL_NAMESPACE: s.namespace,
    TEMPORAL_TLS_CERT: s.tls?.certFile,
    TEMPORAL_TLS_KEY: s.tls?.keyFile,
    TEMPORAL_TLS_CA: s.tls?.caFile,
    TEMPORAL_TLS_SERVER_NAME: s.tls?.serverName,
  };
}

describe('scripts/temporal cluster (Temporal server on PostgreSQL, mTLS frontend)', () => {
  let cluster: TemporalSettings;
  let client: Client;

  before(
    async () => {
      cluster = await clusterUp();
      client = await connectClient(cluster.address, cluster.namespace, { tls: cluster.tls });
    },
    { timeout: CLUSTER_UP_TIMEOUT_MS },
  );
  after(async () => {
    await client?.connection.close();
    // The native runtime (installTestRuntime) keeps the process alive when no worker ran (a run
    // filtered by --test-name-pattern); nothing native is used after this.
    await Runtime.instance().shutdown();
  });

  it('status says SERVING, the pinned server version, an mTLS frontend', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { code, stdout } = await run(['scripts/temporal', 'cluster', 'status']);
    assert.equal(code, 0, stdout);
    assert.match(stdout, new RegExp(`frontend: +${cluster.address.replace(/\./g, '\\.')} \\(SERVING\\)`));
    assert.match(stdout, /temporal-server 1\.31\.0/);
    assert.match(stdout, /mTLS frontend/);
    assert.match(stdout, /postgresql: .*\(accepting\)/);
  });

  it('has the project search attributes registered with their types', { timeout: TEST_TIMEOUT_MS }, async () => {
    const registered = await customSearchAttributes(client, cluster.namespace);
    for (const [name, kind] of Object.entries(CUSTOM_SEARCH_ATTRIBUTES)) assert.equal(registered[name], kind, name);
  });

  it(
    'a worker with the client certificate runs the smoke workflow for a client and for egressctl; SQL visibility lists it',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const taskQueue = uniqueId('cluster-tq');
      const workflowId = uniqueId('smoke/cluster');
      const connection = await connectWorker(cluster.address, { tls: cluster.tls });
      try {
        const worker = await Worker.create({
          connection,
          namespace: cluster.namespace,
          taskQueue,
          workflowsPath: WORKFLOWS_PATH,
          activities: { smokeGreet },
        });
        const [result, cli] = await worker.runUntil(async () => {
          const handle = await client.workflow.start<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
            taskQueue,
            workflowId,
            args: [{ name: 'cluster' }],
          });
          const r = await withTimeout(handle.result(), RESULT_TIMEOUT_MS, `result of ${workflowId}`);
          const c = await run(['bin/egressctl', 'smoke', '--name', 'tls-cli', '--output', 'json'], {
            ...envOf(cluster),
            TEMPORAL_TASK_QUEUE: taskQueue,
          });
          return [r, c] as const;
        });
        assert.equal(result.greeting, 'hello, cluster');
        assert.equal(cli.code, 0, cli.stderr);
        assert.match(cli.stdout, /hello, tls-cli/);
      } finally {
        await connection.close();
      }
      const query = `WorkflowId = '${workflowId}' AND ExecutionStatus = 'Completed'`;
      const listed = await pollUntil(
        async () => {
          for await (const info of client.workflow.list({ query })) return info;
          return undefined;
        },
        { timeoutMs: 15_000, what: `visibility to list ${query}` },
      );
      assert.equal(listed.taskQueue, taskQueue);
    },
  );

  /** A connection attempt that must fail; the error (and its cause chain) as text. */
  async function refused(tls: TemporalSettings['tls']): Promise<string> {
    const err = await connectClient(cluster.address, cluster.namespace, { tls }).then(
      async (c) => {
        await c.connection.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    assert.ok(err instanceof Error, 'the connection should have been refused');
    assert.ok(
      err.cause instanceof TemporalConnectError,
      `cause should be a TemporalConnectError: ${String(err.cause)}`,
    );
    return err.message;
  }

  it(
    'a client without a certificate is refused: the error says one is required',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const message = await refused({ caFile: cluster.tls?.caFile, serverName: 'localhost' });
      assert.match(message, /requires a client certificate \(mTLS\): set --temporal-tls-cert and --temporal-tls-key/);
    },
  );

  it(
    'a client whose certificate another CA signed is refused: the error says so',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const message = await refused({
        certFile: join(CLUSTER_TLS_DIR, 'other-client.pem'),
        keyFile: join(CLUSTER_TLS_DIR, 'other-client.key'),
        caFile: cluster.tls?.caFile,
        serverName: 'localhost',
      });
      assert.match(message, /refused this client's certificate \(not signed by a CA the server trusts/);
    },
  );

  it(
    'a client that does not trust the server certificate says which option fixes it',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const message = await refused({
        certFile: cluster.tls?.certFile,
        keyFile: cluster.tls?.keyFile,
        serverName: 'localhost',
      });
      assert.match(message, /is not signed by a trusted CA: set --temporal-tls-ca/);
    },
  );

  it(
    'a plain client is refused: the error says TLS is required; egressctl exits 5 saying so',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const message = await refused(undefined);
      assert.match(message, /requires TLS: set --temporal-tls-ca/);
      const cli = await run(['bin/egressctl', 'smoke', '--timeout-ms', '5000'], {
        ...envOf(cluster),
        TEMPORAL_TLS_CERT: '',
        TEMPORAL_TLS_KEY: '',
      });
      assert.equal(cli.code, 5, cli.stderr);
      assert.match(cli.stderr, /requires a client certificate/);
    },
  );
});
