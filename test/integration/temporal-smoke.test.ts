/**
 * The Temporal plumbing works end to end: a real worker (workflow bundle built from the `.ts`
 * sources) runs the smoke workflow on the dev server started by `scripts/temporal up`, the run is
 * visible through the visibility API, the project's search attributes are registered (by
 * client/search-attributes.ts, which the worker and the test support call: scripts/temporal starts
 * the server without them), and the time-skipping test server installed by scripts/temporal skips
 * a one-hour timer.
 *
 * docker-compose.yml registers the same search attributes (checked without a server).
 *
 * Needs: `scripts/temporal up` (dev server at TEMPORAL_ADDRESS, default in client/connection.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import YAML from 'yaml';
import { smokeGreet } from '../../activities/smoke.ts';
import { ensureSearchAttributes } from '../../client/search-attributes.ts';
import { CUSTOM_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import type { SmokeInput } from '../../contracts/smoke.ts';
import type { smokeWorkflow } from '../../workflows/index.ts';
import {
  TEMPORAL_ADDRESS,
  TEMPORAL_NAMESPACE,
  WORKFLOWS_PATH,
  connectClient,
  connectWorker,
  customSearchAttributes,
  installTestRuntime,
  pollUntil,
  testServerPath,
  uniqueId,
  withTimeout,
} from '../support/temporal.ts';

const HOUR_MS = 60 * 60 * 1000;
/** Bundling the workflows takes a few seconds; a run on an idle dev server well under one. */
const WORKFLOW_RESULT_TIMEOUT_MS = 30_000;
const VISIBILITY_TIMEOUT_MS = 15_000;
const TEST_TIMEOUT_MS = 120_000;

installTestRuntime();

describe('Temporal dev server (scripts/temporal up)', () => {
  let client: Client;

  before(async () => {
    // Registers the project's search attributes the server lacks, as the worker does at start-up.
    client = await connectClient();
  });

  after(async () => {
    await client?.connection.close();
  });

  it(
    'has every search attribute of contracts/search-attributes.ts registered with its type',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const registered = await withTimeout(customSearchAttributes(client), 10_000, 'list search attributes');
      for (const [name, kind] of Object.entries(CUSTOM_SEARCH_ATTRIBUTES)) {
        assert.equal(
          registered[name],
          kind,
          `search attribute ${name} should be registered as ${kind} on ${TEMPORAL_ADDRESS}`,
        );
      }
    },
  );

  it('registering the search attributes again adds none and changes none', { timeout: TEST_TIMEOUT_MS }, async () => {
    const before = await withTimeout(customSearchAttributes(client), 10_000, 'list search attributes');
    assert.deepEqual(await ensureSearchAttributes(client.connection, TEMPORAL_NAMESPACE), []);
    assert.deepEqual(await customSearchAttributes(client), before);
  });

  it(
    'an in-process worker runs the smoke workflow and the run is listed by visibility',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const taskQueue = uniqueId('smoke-tq');
      const workflowId = uniqueId('smoke/dev');
      const input: SmokeInput = { name: 'dev-server', sleepMs: 100 };
      const connection = await connectWorker();
      try {
        const worker = await Worker.create({
          connection,
          namespace: TEMPORAL_NAMESPACE,
          taskQueue,
          workflowsPath: WORKFLOWS_PATH,
          activities: { smokeGreet },
        });
        // runUntil shuts the worker down (and waits for it) once the promise settles, even on failure.
        const result = await worker.runUntil(async () => {
          const handle = await client.workflow.start<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
            taskQueue,
            workflowId,
            args: [input],
          });
          return withTimeout(handle.result(), WORKFLOW_RESULT_TIMEOUT_MS, `result of workflow ${workflowId}`);
        });
        assert.equal(result.greeting, 'hello, dev-server');
        assert.equal(result.activityAttempt, 1);
        assert.equal(result.sleptMs, 100);
        assert.ok(
          result.workflowElapsedMs >= 100,
          `workflow time should cover the 100 ms timer, was ${result.workflowElapsedMs}`,
        );
      } finally {
        await connection.close();
      }

      // Visibility is eventually consistent: poll, bounded.
      const query = `WorkflowId = '${workflowId}' AND ExecutionStatus = 'Completed'`;
      const listed = await pollUntil(
        async () => {
          for await (const info of client.workflow.list({ query })) return info;
          return undefined;
        },
        { timeoutMs: VISIBILITY_TIMEOUT_MS, what: `visibility to list ${query}` },
      );
      assert.equal(listed.workflowId, workflowId);
      assert.equal(listed.type, SMOKE_WORKFLOW_TYPE);
      assert.equal(listed.taskQueue, taskQueue);
      assert.equal(listed.status.name, 'COMPLETED');
    },
  );
});

describe('time-skipping test server (scripts/temporal test-server-path)', () => {
  it(
    'the smoke workflow sleeps one hour of workflow time in seconds of real time',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const path = await testServerPath();
      const env = await withTimeout(
        TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } }),
        30_000,
        `start the time-skipping test server ${path}`,
      );
      try {
        const taskQueue = uniqueId('smoke-ts-tq');
        const workflowId = uniqueId('smoke/time-skipping');
        const worker = await Worker.create({
          connection: env.nativeConnection,
          namespace: env.namespace ?? 'default',
          taskQueue,
          workflowsPath: WORKFLOWS_PATH,
          activities: { smokeGreet },
        });
        const began = performance.now();
        const result = await worker.runUntil(
          // env.client skips time while it awaits a result.
          withTimeout(
            env.client.workflow.execute<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
              taskQueue,
              workflowId,
              args: [{ name: 'time-skipping', sleepMs: HOUR_MS }],
            }),
            WORKFLOW_RESULT_TIMEOUT_MS,
            `result of workflow ${workflowId} on the time-skipping server`,
          ),
        );
        const realMs = performance.now() - began;
        assert.equal(result.greeting, 'hello, time-skipping');
        assert.equal(result.sleptMs, HOUR_MS);
        assert.ok(
          result.workflowElapsedMs >= HOUR_MS,
          `workflow time should pass one hour, was ${result.workflowElapsedMs} ms`,
        );
        assert.ok(
          realMs < 60_000,
          `one hour of workflow time should take seconds of real time, took ${Math.round(realMs)} ms`,
        );
      } finally {
        await env.teardown();
      }
    },
  );
});

describe('docker-compose.yml (production-ish cluster)', () => {
  it('its setup step registers exactly the search attributes of contracts/search-attributes.ts', () => {
    const text = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
    const compose = YAML.parse(text, { merge: true }) as {
      services?: Record<string, { environment?: Record<string, unknown> }>;
    };
    const listed = compose.services?.['temporal-setup']?.environment?.['SEARCH_ATTRIBUTES'];
    assert.equal(typeof listed, 'string', 'services.temporal-setup.environment.SEARCH_ATTRIBUTES should be a string');
    const pairs = String(listed)
      .trim()
      .split(/\s+/)
      .map((pair) => pair.split('=') as [string, string]);
    assert.deepEqual(Object.fromEntries(pairs), { ...CUSTOM_SEARCH_ATTRIBUTES });
  });
});
