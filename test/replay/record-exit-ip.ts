/**
 * Records the replay history of a booting proxy with an exit IP, from a run on the time-skipping
 * test server (the real workflows; the workflow tests' fake activities, the monitor the real loop
 * of activities/monitor.ts over them): create → Running with Healthy=Unknown (Booting) while
 * three probes fail → Healthy with its first exit IP (one monitor return) → steady reads (none) →
 * the exit IP changes (one return, the memo upserted) → delete → Deleted. Writes
 * `proxy-booting-exit-ip.sdk-<version>.json` here, in the form record.ts writes;
 * test/unit/replay.test.ts replays it.
 *
 *   node test/replay/record-exit-ip.ts
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { format, resolveConfig } from 'prettier';
import { proxyDeleteUpdate } from '../../contracts/messages.ts';
import type { ProbeOutcome } from '../../contracts/proxy.ts';
import {
  Env,
  Fakes,
  monitorStep,
  monitorWaiting,
  resolvedProxy,
  startProxy,
  statusWhen,
  withWorker,
} from '../support/workflow-harness.ts';

const OUT_DIR = fileURLToPath(new URL('./', import.meta.url));
const SDK_VERSION = (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string })
  .version;

const e = new Env();
await e.load();
const f = new Fakes(e);
f.resolve = (spec) => resolvedProxy(spec, { health: { egressIpUrl: 'http://198.51.100.7/ip', egressIpIntervalMs: 1 } });
let exitIp = '203.0.113.9';
f.probe = (input, n): ProbeOutcome => {
  if (n < 3) return { ok: false, code: 'PROBE_REFUSED', message: 'squid is still starting' };
  return input.readExitIp === true ? { ok: true, latencyMs: 12, exitIp } : { ok: true, latencyMs: 12 };
};
const started: WorkflowHandle[] = [];
const history = await withWorker(
  e,
  f.activities(),
  async (tq) => {
    f.taskQueue = tq;
    const { handle: h } = await startProxy(e, tq, started, { healthLoop: 'monitor' });
    const booting = await statusWhen(h, (s) => s.state === 'Running', 'Running');
    assert.deepEqual(
      [booting.conditions.Healthy.status, booting.conditions.Healthy.reason],
      ['Unknown', 'Booting'],
      'Running with Healthy=Unknown (Booting)',
    );
    await monitorWaiting(f, 0, 'the first poll');
    for (let i = 2; i <= 3; i++) {
      const s = await monitorStep(e, f, h, `poll ${i}`);
      assert.equal(s.conditions.Healthy.reason, 'Booting', `still booting after failing poll ${i}`);
    }
    for (let i = 4; i <= 5; i++) await monitorStep(e, f, h, `poll ${i}`);
    await statusWhen(h, (s) => s.exitIp === '203.0.113.9', 'Healthy with the first exit IP');
    await monitorStep(e, f, h, 'a steady read');
    exitIp = '198.51.100.44';
    await monitorStep(e, f, h, 'the exit IP changes');
    await statusWhen(h, (s) => s.exitIp === '198.51.100.44', 'the new exit IP');
    await h.executeUpdate(proxyDeleteUpdate);
    assert.equal((await h.result()).state, 'Deleted');
    return h.fetchHistory();
  },
  started,
);
await e.close();
const text = historyToJSON(history);
const file = join(OUT_DIR, `proxy-booting-exit-ip.sdk-${SDK_VERSION}.json`);
await writeFile(file, await format(text, { ...(await resolveConfig(file)), filepath: file }));
process.stderr.write(`record-exit-ip: ${file}\n`);
process.exit(0);
