/**
 * Writes a run's history as a replay file (test/replay/<name>.sdk-<version>.json, replayed by
 * test/unit/replay.test.ts) when the test is asked to record (its variable set to 1); the tests
 * that record histories share it.
 */
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { format, resolveConfig } from 'prettier';

export async function recordReplay(h: WorkflowHandle, name: string, variable: string): Promise<void> {
  if (process.env[variable] !== '1') return;
  const sdk = (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string }).version;
  const file = new URL(`../replay/${name}.sdk-${sdk}.json`, import.meta.url).pathname;
  const text = historyToJSON(await h.fetchHistory());
  await writeFile(file, await format(text, { ...(await resolveConfig(file)), filepath: file }));
}
