/**
 * Every read of the API answers without a 5xx in every state a workflow can be in: running,
 * completed, failed, cancelled, terminated, timed out and continued as new. The workflows are
 * stand-ins (test/support/api-state-workflows.ts) under the IDs the warm and proxy reads look up,
 * on the dev server with an in-process worker; the API is the real one over the Temporal store.
 * Regression: GET /v1/images/{entry}/{key}/warm after a failed warm answered 503 (the result was
 * read under a 1 ms deadline).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { NativeConnection } from '@temporalio/worker';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { warmWorkflowId } from '../../contracts/warm.ts';
import { http, startTestApi, writeTokens } from '../support/api.ts';
import type { TestApi, TestTokens } from '../support/api.ts';
import type { StateMode } from '../support/api-state-workflows.ts';
import { connectClient, connectWorker, installTestRuntime, pollUntil, uniqueId } from '../support/temporal.ts';

const STUBS = fileURLToPath(new URL('../support/api-state-workflows.ts', import.meta.url));

/** How each case brings its workflow to its state, and the warm state the API must show. */
interface Case {
  state: string;
  mode: StateMode;
  /** After the start: what to do to the run. */
  then?: 'cancel' | 'terminate';
  /** The run's execution timeout (for the timed-out case). */
  timeout?: string;
  /** The Temporal status of the latest run once settled. */
  execution: string;
  warm: 'Running' | 'Done' | 'Failed';
}

const CASES: Case[] = [
  { state: 'running', mode: 'wait', execution: 'RUNNING', warm: 'Running' },
  { state: 'completed', mode: 'complete', execution: 'COMPLETED', warm: 'Done' },
  { state: 'failed', mode: 'fail', execution: 'FAILED', warm: 'Failed' },
  { state: 'cancelled', mode: 'wait', then: 'cancel', execution: 'CANCELLED', warm: 'Failed' },
  { state: 'terminated', mode: 'wait', then: 'terminate', execution: 'TERMINATED', warm: 'Failed' },
  { state: 'timed out', mode: 'wait', timeout: '1s', execution: 'TIMED_OUT', warm: 'Failed' },
  { state: 'continued as new, then completed', mode: 'continue-then-complete', execution: 'COMPLETED', warm: 'Done' },
  { state: 'continued as new, then running', mode: 'continue-then-wait', execution: 'RUNNING', warm: 'Running' },
];

/** Reads per case: the failing view answered 503 two times in three. */
const READS = 6;

describe('API reads in every workflow state (dev server)', { timeout: 240_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  let api: TestApi;
  let tokens: TestTokens;
  let tmp: string;
  const taskQueue = uniqueId('api-states');
  const entry = `st${Date.now().toString(36)}`;

  before(async () => {
    installTestRuntime();
    client = await connectClient();
    connection = await connectWorker();
    worker = await Worker.create({ connection, taskQueue, workflowsPath: STUBS });
    running = worker.run();
    tmp = await mkdtemp(join(tmpdir(), 'ep-api-states-'));
    tokens = await writeTokens(tmp);
    api = await startTestApi(client, taskQueue, tokens);
    await Promise.all(
      CASES.map(async (c, i) => {
        for (const workflowId of [warmWorkflowId(entry, `k${i}`), proxyWorkflowId(entry, `p${i}`)]) {
          const h = await client.workflow.start('apiStateStub', {
            workflowId,
            taskQueue,
            args: [c.mode],
            ...(c.timeout === undefined ? {} : { workflowExecutionTimeout: c.timeout }),
          });
          if (c.then === 'cancel') await h.cancel();
          if (c.then === 'terminate') await h.terminate('test');
          await pollUntil(async () => ((await h.describe()).status.name === c.execution ? true : undefined), {
            timeoutMs: 30_000,
            intervalMs: 200,
            what: `${workflowId} ${c.execution}`,
          });
        }
      }),
    );
  });

  after(async () => {
    await api?.close();
    worker?.shutdown();
    await running;
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  for (const [i, c] of CASES.entries()) {
    it(`${c.state}: the warm view answers ${c.warm}, never a 5xx`, async () => {
      for (let n = 0; n < READS; n++) {
        const res = await http(api.url, 'GET', `/v1/images/${entry}/k${i}/warm`, { token: tokens.reader });
        assert.equal(res.status, 200, `read ${n + 1}: ${res.text}`);
        assert.equal(res.body['state'], c.warm, res.text);
      }
    });

    it(`${c.state}: the proxy get answers 200 with execution ${c.execution}`, async () => {
      const res = await http(api.url, 'GET', `/v1/proxies/${entry}/p${i}`, { token: tokens.reader });
      assert.equal(res.status, 200, res.text);
      const proxy = res.body['proxy'] as Record<string, unknown>;
      assert.equal(proxy['execution'], c.execution, res.text);
      // A stand-in has no status query: the answer says why, as a 200.
      assert.equal(typeof res.body['statusError'], 'string', res.text);
    });
  }

  it('every state: the list, its filters and discovery answer 200', async () => {
    for (const path of [
      `/v1/proxies?entry=${entry}&all=true`,
      `/v1/proxies?entry=${entry}`,
      `/v1/proxies?entry=${entry}&state=Running`,
      `/v1/discovery?entry=${entry}`,
    ]) {
      const res = await http(api.url, 'GET', path, { token: tokens.reader });
      assert.equal(res.status, 200, `${path}: ${res.text}`);
    }
  });
});
