/**
 * Records the replay history of the health monitor loop from a run on the time-skipping test
 * server (the real workflows; the activities are the workflow tests' fakes, the monitor the real
 * loop of activities/monitor.ts over them): create → Running (the monitor returns on the address,
 * then on Healthy) → resize (the monitor cancelled, a new one started) → delete (cancelling it) →
 * Deleted. Writes `proxy-monitor-loop.sdk-<version>.json` here, in the form record.ts writes;
 * test/unit/replay.test.ts replays it. record.ts's `monitor-create-delete` records the same loop
 * against the real test hosts (through the integration lock).
 *
 *   node test/replay/record-monitor.ts
 *   node test/replay/record-monitor.ts --name proxy-local-reads   # the same run, written under another name
 *
 * `--name` keeps an older recording: a run of the same scenario with newer workflow code (new
 * patch markers) is written as `<name>.sdk-<version>.json` beside it, and both replay.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { format, resolveConfig } from 'prettier';
import { proxyDeleteUpdate, proxyResizeUpdate } from '../../contracts/messages.ts';
import {
  Env,
  Fakes,
  monitorStep,
  monitorWaiting,
  startProxy,
  statusWhen,
  withWorker,
} from '../support/workflow-harness.ts';
import type { WorkflowHandle } from '@temporalio/client';

const OUT_DIR = fileURLToPath(new URL('./', import.meta.url));
const SDK_VERSION = (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string })
  .version;

const e = new Env();
await e.load();
const f = new Fakes(e);
f.resize = () => ({ changed: true });
const started: WorkflowHandle[] = [];
const text = await withWorker(
  e,
  f.activities(),
  async (tq) => {
    f.taskQueue = tq;
    const { handle: h } = await startProxy(e, tq, started, { healthLoop: 'monitor' });
    await statusWhen(h, (s) => s.state === 'Running', 'Running');
    await monitorWaiting(f, 0, 'the first poll');
    await monitorStep(e, f, h, 'Healthy');
    await monitorStep(e, f, h, 'a quiet poll');
    const before = f.monitorWaits;
    await h.executeUpdate(proxyResizeUpdate, { args: [{ memoryMiB: 1024 }] });
    await monitorWaiting(f, before, 'the monitor after the resize');
    await h.executeUpdate(proxyDeleteUpdate);
    assert.equal((await h.result()).state, 'Deleted');
    return historyToJSON(await h.fetchHistory());
  },
  started,
);
await e.close();
const { values: args } = parseArgs({ options: { name: { type: 'string', default: 'proxy-monitor-loop' } } });
if (!/^[a-z0-9-]+$/.test(args.name))
  throw new Error(`--name must be lower-case letters, digits and "-", got ${args.name}`);
const file = join(OUT_DIR, `${args.name}.sdk-${SDK_VERSION}.json`);
await writeFile(file, await format(text, { ...(await resolveConfig(file)), filepath: file }));
process.stderr.write(`record-monitor: ${file}\n`);
process.exit(0);
