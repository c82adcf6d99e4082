/**
 * How fresh the health monitor's values are where operators read them: the status query merged
 * with the monitor's last heartbeat as the server holds it (client/health.ts freshProxyStatus,
 * what the API and the Web UI show). On the dev server in real time, with a worker built as the
 * worker process builds it (runtime/worker-set.ts: its heartbeat throttle), the real proxy
 * workflow and the real monitor activity (activities/monitor.ts) over a read and a probe that
 * answer at once; the other activities are the workflow tests' fakes.
 *
 * The SDK sends an activity's heartbeats at most once per 0.8 x its heartbeat timeout unless the
 * worker caps it: at a 3 s interval (a 10 s timeout, so 8 s) the server held a last probe up to
 * about 11 s old. With the worker's cap every poll's heartbeat reaches the server when made, so
 * the last probe is at most one interval old, plus the poll's own time and the RPCs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { createMonitorActivities } from '../../activities/monitor.ts';
import { freshProxyStatus } from '../../client/health.ts';
import { PROXY_WORKFLOW_TYPE } from '../../contracts/proxy.ts';
import type { ProbeOutcome, VmReading } from '../../contracts/proxy.ts';
import { createWorkerSet } from '../../runtime/worker-set.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { BASE, devServerSuite, Env, Fakes, proxyId, resolvedProxy, uniqueName } from '../support/workflow-harness.ts';
import { pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';

const INTERVAL_MS = 3_000;
/** Slack over one interval: the poll's own time, the heartbeat and describe RPCs, a loaded machine. */
const SLACK_MS = 2_000;
/** How long the fresh status is sampled once the proxy runs: four intervals. */
const WATCH_MS = 4 * INTERVAL_MS;
const SAMPLE_EVERY_MS = 200;
const RUNNING: VmReading = { state: 'Running', ip: '10.0.0.5', source: 'lease' };
const OK: ProbeOutcome = { ok: true, latencyMs: 3 };

describe('the monitor heartbeat reaches the server at every poll', { timeout: 120_000 }, () => {
  const dev = devServerSuite();

  it(`the fresh status's last probe is never older than one interval (${INTERVAL_MS} ms) + ${SLACK_MS} ms`, async (t) => {
    const { client, connection, bundle } = dev;
    const f = new Fakes(new Env());
    f.resolve = (spec) => resolvedProxy(spec, { health: { intervalMs: INTERVAL_MS } });
    f.findBase = () => BASE;
    let probes = 0;
    const monitor = createMonitorActivities({
      readProxyVm: () => Promise.resolve(RUNNING),
      probeProxy: () => {
        probes += 1;
        return Promise.resolve(OK);
      },
    });
    const taskQueue = uniqueId('monitor-fresh');
    const set = await createWorkerSet({
      connection,
      taskQueue,
      workflowBundle: bundle,
      activities: { ...f.activities(), ...monitor },
      shutdownGraceTime: '2 seconds',
    });
    const running = set.run();
    let handle: WorkflowHandle | undefined;
    try {
      const input: ProxyWorkflowInput = {
        name: uniqueName('fresh'),
        entry: 'e1',
        imageKey: uniqueName('img'),
        healthLoop: 'monitor',
      };
      handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
        taskQueue,
        workflowId: proxyId(input.name),
        args: [input],
      });
      const h = handle;
      // Healthy (healthyAfter 2): after that transition the monitor runs on without returning.
      await pollUntil(
        async () => ((await freshProxyStatus(h)).conditions.Healthy.status === 'True' ? true : undefined),
        {
          timeoutMs: 30_000,
          what: 'the proxy Healthy',
        },
      );
      const ages: number[] = [];
      const deadline = Date.now() + WATCH_MS;
      for (let i = 0; i < WATCH_MS / SAMPLE_EVERY_MS + 10 && Date.now() < deadline; i++) {
        const s = await freshProxyStatus(h);
        const at = s.health.lastProbeAt;
        assert.ok(at, 'the fresh status has a last probe time');
        ages.push(Date.now() - Date.parse(at));
        await new Promise((r) => setTimeout(r, SAMPLE_EVERY_MS));
      }
      const oldest = Math.max(...ages);
      const median = [...ages].sort((a, b) => a - b)[ages.length >> 1];
      t.diagnostic(
        `last probe age in the fresh status: median ${median} ms, oldest ${oldest} ms, ${ages.length} samples`,
      );
      assert.ok(ages.length >= 20, `sampled ${ages.length} times`);
      assert.ok(probes >= 4, `the monitor probed ${probes} times in the window`);
      assert.ok(
        oldest <= INTERVAL_MS + SLACK_MS,
        `the oldest last probe the server held was ${oldest} ms old (bound ${INTERVAL_MS + SLACK_MS} ms; ${ages.length} samples, median ${median} ms)`,
      );
    } finally {
      await handle?.terminate('test over').catch(() => undefined);
      set.shutdown();
      await withTimeout(running, 30_000, 'the worker to stop');
    }
  });
});
