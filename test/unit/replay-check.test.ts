/**
 * egressctl replay's parts that need no server: --since (durations and instants, bad input named),
 * the visibility query of the runs it checks, the list of workflow types it checks (the worker's,
 * exactly), and the downloads kept in order with a bounded look-ahead. The command against a real
 * server is test/integration/replay-check.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { parseSince } from '../../cli/commands/replay.ts';
import { CliError, EXIT } from '../../cli/http.ts';
import { fetchHistories, PROJECT_WORKFLOW_TYPES, replayQuery } from '../../client/replay.ts';
import type { ReplayCandidate } from '../../client/replay.ts';
import * as workflows from '../../workflows/index.ts';

const NOW = new Date('2026-12-01T20:00:00.000Z');

describe('parseSince', () => {
  it('reads durations back from now', () => {
    assert.equal(parseSince('24h', NOW).toISOString(), '2026-11-30T20:00:00.000Z');
    assert.equal(parseSince('90m', NOW).toISOString(), '2026-12-01T18:30:00.000Z');
    assert.equal(parseSince('1h30m', NOW).toISOString(), '2026-12-01T18:30:00.000Z');
    assert.equal(parseSince('7d', NOW).toISOString(), '2026-11-24T20:00:00.000Z');
    assert.equal(parseSince('45s', NOW).toISOString(), '2026-12-01T19:59:15.000Z');
  });
  it('reads an RFC 3339 instant', () => {
    assert.equal(parseSince('2026-12-01T10:00:00+01:00', NOW).toISOString(), '2026-12-01T09:00:00.000Z');
  });
  for (const bad of ['', '24', 'h', '0h', '24x', '-1h', 'yesterday', '2026-13-45T00:00:00Z']) {
    it(`refuses ${JSON.stringify(bad)} naming the option and the forms`, () => {
      assert.throws(
        () => parseSince(bad, NOW),
        (e: unknown) =>
          e instanceof CliError && e.code === EXIT.usage && /--since must be a duration.*24h/.test(e.message),
      );
    });
  }
});

describe('replayQuery', () => {
  const since = new Date('2026-12-01T00:00:00.000Z');
  it('selects the types, and open runs or those started or closed since the instant', () => {
    assert.equal(
      replayQuery({ since, types: ['proxyLifecycle', 'poolWorkflow'] }),
      "WorkflowType IN ('proxyLifecycle', 'poolWorkflow') AND (ExecutionStatus = 'Running' OR " +
        "StartTime >= '2026-12-01T00:00:00.000Z' OR CloseTime >= '2026-12-01T00:00:00.000Z')",
    );
  });
  it('defaults to every project type and quotes the task queue', () => {
    const q = replayQuery({ since, taskQueue: "q'1" });
    for (const t of PROJECT_WORKFLOW_TYPES) assert.ok(q.includes(`'${t}'`), t);
    assert.ok(q.endsWith(" AND TaskQueue = 'q\\'1'"), q);
  });
});

it('PROJECT_WORKFLOW_TYPES is exactly the workflow functions workflows/index.ts exports', () => {
  assert.deepEqual([...PROJECT_WORKFLOW_TYPES].sort(), Object.keys(workflows).sort());
});

describe('fetchHistories', () => {
  const runs: ReplayCandidate[] = ['w1', 'w2', 'w3', 'w4', 'w5'].map((w) => ({
    workflowId: w,
    runId: `r-${w}`,
    type: 'smokeWorkflow',
    status: 'COMPLETED',
    startTime: NOW.toISOString(),
  }));
  /** A stand-in client whose downloads finish in reverse order of their start, and count how many are in flight. */
  function fakeClient() {
    const state = { inFlight: 0, maxInFlight: 0, started: [] as string[] };
    const client = {
      withDeadline: <T>(_d: number, fn: () => Promise<T>) => fn(),
      workflow: {
        getHandle: (workflowId: string, runId: string) => ({
          fetchHistory: async () => {
            state.started.push(workflowId);
            state.inFlight++;
            state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
            await new Promise((r) => setTimeout(r, 30 - 5 * state.started.length));
            state.inFlight--;
            return { events: [{ eventId: runId }] };
          },
        }),
      },
    } as unknown as Client;
    return { client, state };
  }
  it('yields the histories in the runs order, at most `prefetch` downloads ahead', async () => {
    const { client, state } = fakeClient();
    const got: string[] = [];
    for await (const h of fetchHistories(client, runs, { callTimeoutMs: 1_000, prefetch: 2 })) {
      assert.equal(h.history.events?.[0]?.eventId, h.run.runId);
      got.push(h.run.workflowId);
    }
    assert.deepEqual(got, ['w1', 'w2', 'w3', 'w4', 'w5']);
    assert.equal(state.maxInFlight, 2);
  });
  it('a failed download ends the iteration with its error', async () => {
    const client = {
      withDeadline: <T>(_d: number, fn: () => Promise<T>) => fn(),
      workflow: {
        getHandle: (w: string) => ({
          fetchHistory: () => (w === 'w2' ? Promise.reject(new Error('gone')) : Promise.resolve({ events: [] })),
        }),
      },
    } as unknown as Client;
    const got: string[] = [];
    await assert.rejects(async () => {
      for await (const h of fetchHistories(client, runs, { callTimeoutMs: 1_000 })) got.push(h.run.workflowId);
    }, /gone/);
    assert.deepEqual(got, ['w1']);
  });
});
