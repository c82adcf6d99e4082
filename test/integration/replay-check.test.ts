/**
 * `egressctl replay`, the pre-deploy check, against the dev server: a real worker (the real
 * workflow bundle) runs a few smoke workflows on a task queue of this test (two complete, one is
 * left open on a long timer); the command downloads their histories and replays them against this
 * build (exit 0, one line per run), then against a scratch entry whose smokeWorkflow starts with a
 * timer the recorded runs never had (exit 1, naming each run's workflow ID, run ID and the SDK's
 * DeterminismViolationError). A Temporal that is not there is named with its address and the fix.
 *
 * Needs: `scripts/temporal up` (dev server at TEMPORAL_ADDRESS, default in client/connection.ts).
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { smokeGreet } from '../../activities/smoke.ts';
import { listReplayCandidates } from '../../client/replay.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import type { smokeWorkflow } from '../../workflows/index.ts';
import { runCommand } from '../support/run.ts';
import { freePort } from '../support/sshd.ts';
import {
  PROJECT_ROOT,
  TEMPORAL_ADDRESS,
  TEMPORAL_NAMESPACE,
  WORKFLOWS_PATH,
  connectClient,
  connectWorker,
  installTestRuntime,
  pollUntil,
  uniqueId,
  withTimeout,
} from '../support/temporal.ts';

const TEST_TIMEOUT_MS = 240_000;
/** The command bundles the workflows (webpack, a few seconds on a loaded machine) and replays. */
const COMMAND_TIMEOUT_MS = 150_000;

installTestRuntime();

interface Line {
  workflowId: string;
  runId: string;
  type: string;
  status: string;
  result: string;
  error?: string;
}

describe('egressctl replay (dev server)', () => {
  let client: Client;
  let dir: string;
  const taskQueue = uniqueId('replay-check-tq');
  const runs: { workflowId: string; runId: string }[] = [];
  let open: WorkflowHandleWithFirstExecutionRunId<typeof smokeWorkflow> | undefined;

  const replay = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runCommand(
      process.execPath,
      [
        'workers/egressctl.ts',
        'replay',
        ...['--since', '30m', '--task-queue', taskQueue, '--type', SMOKE_WORKFLOW_TYPE, '--output', 'json'],
        ...args,
      ],
      {
        cwd: PROJECT_ROOT,
        env: { ...process.env, EP_WORKFLOW_BUNDLE_CACHE: join(dir, 'bundles'), ...env },
        timeoutMs: COMMAND_TIMEOUT_MS,
      },
    );
  const lines = (stdout: string): Line[] =>
    stdout
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Line);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-replay-check-'));
    client = await connectClient();
    const connection = await connectWorker();
    try {
      const worker = await Worker.create({
        connection,
        namespace: TEMPORAL_NAMESPACE,
        taskQueue,
        workflowsPath: WORKFLOWS_PATH,
        activities: { smokeGreet },
      });
      await worker.runUntil(async () => {
        for (const [name, sleepMs] of [
          ['a', 0],
          ['b', 50],
        ] as const) {
          const h = await client.workflow.start<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
            taskQueue,
            workflowId: uniqueId(`smoke/replay-${name}`),
            args: [{ name, sleepMs }],
          });
          await withTimeout(h.result(), 30_000, `result of ${h.workflowId}`);
          runs.push({ workflowId: h.workflowId, runId: h.firstExecutionRunId });
        }
        // Open: its activity done, then a timer of an hour (terminated in after()).
        open = await client.workflow.start<typeof smokeWorkflow>(SMOKE_WORKFLOW_TYPE, {
          taskQueue,
          workflowId: uniqueId('smoke/replay-open'),
          args: [{ name: 'open', sleepMs: 3_600_000 }],
        });
        const h = open;
        await pollUntil(
          async () => {
            const events = (await h.fetchHistory()).events ?? [];
            return events.some((e) => e.timerStartedEventAttributes) ? true : undefined;
          },
          { timeoutMs: 30_000, what: `the timer of ${h.workflowId}` },
        );
        runs.push({ workflowId: h.workflowId, runId: h.firstExecutionRunId });
      });
    } finally {
      await connection.close();
    }
    // Visibility is eventually consistent: wait (bounded) until the command's own query lists all three.
    await pollUntil(
      async () => {
        const l = await listReplayCandidates(client, {
          since: new Date(Date.now() - 30 * 60_000),
          limit: 10,
          types: [SMOKE_WORKFLOW_TYPE],
          taskQueue,
          callTimeoutMs: 10_000,
        });
        return l.runs.length === runs.length && l.runs.some((r) => r.status === 'RUNNING') ? true : undefined;
      },
      { timeoutMs: 20_000, what: `visibility to list the ${runs.length} runs of ${taskQueue}` },
    );
  });

  after(async () => {
    await open?.terminate('replay-check test done').catch(() => undefined);
    await client?.connection.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'passes against this build: every run replays, open and closed, one line each',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const r = await replay([]);
      assert.equal(r.code, 0, `exit 0 expected\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
      const got = lines(r.stdout);
      assert.deepEqual(
        got.map((l) => `${l.workflowId} ${l.runId}`).sort(),
        runs.map((x) => `${x.workflowId} ${x.runId}`).sort(),
      );
      assert.ok(
        got.every((l) => l.result === 'ok' && l.type === SMOKE_WORKFLOW_TYPE),
        r.stdout,
      );
      assert.deepEqual(got.map((l) => l.status).sort(), ['COMPLETED', 'COMPLETED', 'RUNNING']);
      assert.match(r.stderr, /3 run\(s\).*3 ok, 0 determinism violation/);
    },
  );

  it(
    'fails against a workflow changed non-deterministically, naming each run and the violation',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      // A scratch entry: the real workflows, but smokeWorkflow starts with a timer (a command the
      // recorded histories do not have where they schedule the activity).
      const scratch = join(dir, 'scratch');
      await rm(scratch, { recursive: true, force: true });
      await mkdir(scratch, { recursive: true });
      await symlink(join(PROJECT_ROOT, 'node_modules'), join(scratch, 'node_modules'));
      const entry = join(scratch, 'index.ts');
      await writeFile(
        entry,
        [
          `export * from ${JSON.stringify(WORKFLOWS_PATH)};`,
          `import { sleep } from '@temporalio/workflow';`,
          `import { smokeWorkflow as released } from ${JSON.stringify(join(PROJECT_ROOT, 'workflows/smoke.ts'))};`,
          `import type { SmokeInput, SmokeResult } from ${JSON.stringify(join(PROJECT_ROOT, 'contracts/smoke.ts'))};`,
          `export async function smokeWorkflow(input: SmokeInput): Promise<SmokeResult> {`,
          `  await sleep(1);`,
          `  return released(input);`,
          `}`,
          '',
        ].join('\n'),
      );
      const r = await replay(['--workflows-path', entry]);
      assert.equal(r.code, 1, `exit 1 expected\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
      const got = lines(r.stdout);
      assert.equal(got.length, runs.length, r.stdout);
      for (const run of runs) {
        const l = got.find((x) => x.workflowId === run.workflowId);
        assert.equal(l?.result, 'violation', `${run.workflowId}: ${JSON.stringify(l)}`);
        assert.equal(l.runId, run.runId);
        assert.match(l.error ?? '', /^DeterminismViolationError: /);
        assert.ok(
          r.stderr.includes(`${run.workflowId} (run ${run.runId}, ${SMOKE_WORKFLOW_TYPE}): DeterminismViolationError`),
          `stderr names ${run.workflowId} and its run: ${r.stderr}`,
        );
      }
    },
  );

  it('names the address and the fix when no Temporal answers there', { timeout: TEST_TIMEOUT_MS }, async () => {
    const port = await freePort(); // free: nothing listens there
    const r = await replay(['--timeout-ms', '3000'], { TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
    assert.equal(r.code, 5, r.stderr);
    assert.ok(r.stderr.includes(`127.0.0.1:${port}`), r.stderr);
    assert.match(r.stderr, /scripts\/temporal up, or set TEMPORAL_ADDRESS/);
    assert.equal(r.stdout, '');
    assert.notEqual(TEMPORAL_ADDRESS, `127.0.0.1:${port}`);
  });
});
