/**
 * Replay: every history recorded from a real run (test/replay/*.sdk-<version>.json, made by
 * `node test/replay/record.ts`) replays without a determinism violation against the workflow
 * bundle of workflows/index.ts, built as workers/worker.ts builds it (with the OpenTelemetry
 * plugin's workflow interceptors). A change to a workflow that would break runs in flight fails
 * here. No server, host or network is needed.
 *
 * EP_REPLAY_WORKFLOWS_PATH replays against another workflows entry (e.g. a scratch copy with a
 * deliberate change, to see this test fail).
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { Worker } from '@temporalio/worker';
import type { ReplayResult } from '@temporalio/worker';
import { createLogger } from '../../lib/log/logger.ts';
import { setupTracing } from '../../runtime/telemetry.ts';
import { WORKFLOWS_PATH, installTestRuntime } from '../support/temporal.ts';

const REPLAY_DIR = fileURLToPath(new URL('../replay/', import.meta.url));
const HISTORY_FILE = /^(?<name>[a-z0-9-]+)\.sdk-(?<sdk>\d+\.\d+\.\d+)\.json$/;
/**
 * The runs that must be replayed, each with a history: a proxy's life, its failures, its move; a
 * pool's; a host's drain; a proxy, a pool and a host begun from carried state (continue-as-new); and
 * the 0.1 runs this build takes over (workflows/retiring.ts).
 */
const REQUIRED = [
  'proxy-create-delete',
  'proxy-capacity-wait',
  'proxy-failed-create',
  'proxy-cancel-mid-upload',
  'proxy-move',
  'proxy-carried',
  'pool-replace-rollback',
  'pool-carried',
  'host-drain',
  'host-carried',
  'proxy-baseline-create-delete',
  'pool-host-drain',
];

interface RecordedHistory {
  file: string;
  name: string;
  workflowId: string;
  history: { events: { eventType: string; workflowExecutionStartedEventAttributes?: { workflowId?: string } }[] };
}

function loadHistories(): RecordedHistory[] {
  return readdirSync(REPLAY_DIR)
    .filter((f) => HISTORY_FILE.test(f))
    .sort()
    .map((file) => {
      const history = JSON.parse(readFileSync(join(REPLAY_DIR, file), 'utf8')) as RecordedHistory['history'];
      const started = history.events[0]?.workflowExecutionStartedEventAttributes;
      assert.ok(started, `${file}: the first event is not WorkflowExecutionStarted`);
      return {
        file,
        name: HISTORY_FILE.exec(file)!.groups!['name']!,
        workflowId: started.workflowId ?? `replay/${file}`,
        history,
      };
    });
}

it('every recorded history replays against the current workflows without a determinism violation', async () => {
  const histories = loadHistories();
  for (const name of REQUIRED) {
    assert.ok(
      histories.some((h) => h.name === name),
      `no recorded history for ${name} in test/replay/ (re-record: node test/replay/record.ts)`,
    );
  }
  installTestRuntime();
  const log = createLogger({ name: 'replay', level: 'warn', stream: 'stderr' });
  const tracing = setupTracing(log);
  const workflowsPath = process.env['EP_REPLAY_WORKFLOWS_PATH'] || WORKFLOWS_PATH;
  const byWorkflowId = new Map(histories.map((h) => [h.workflowId, h]));
  const results: ReplayResult[] = [];
  try {
    const replay = Worker.runReplayHistories(
      { workflowsPath, plugins: [tracing.plugin], replayName: 'test/unit/replay.test.ts' },
      histories.map((h) => ({ workflowId: h.workflowId, history: h.history })),
    );
    for await (const r of replay) results.push(r);
  } finally {
    await tracing.shutdown();
  }
  assert.equal(results.length, histories.length, 'one result per history');
  const failures = results
    .filter((r) => r.error !== undefined)
    .map((r) => `${byWorkflowId.get(r.workflowId)?.file ?? r.workflowId}: ${r.error!.name}: ${r.error!.message}`);
  assert.deepEqual(failures, [], `histories that no longer replay (workflows: ${workflowsPath})`);
});
