/**
 * `egressctl proxy up` (client/proxy-up.ts) sees Healthy when the workflow records it: it follows
 * the workflow's history (a long poll), not only its periodic status read. On the dev server in
 * real time, the real proxy workflow and monitor activity over a read that has the address and a
 * probe refused until the test lets it pass; the other activities are the workflow tests' fakes.
 * The periodic read is set to ten minutes, so only the history can tell proxy up in time. (Not
 * timed: the bound is the test's.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMonitorActivities } from '../../activities/monitor.ts';
import { freshProxyStatus } from '../../client/health.ts';
import { proxyUp } from '../../client/proxy-up.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import type { ProbeOutcome, VmReading } from '../../contracts/proxy.ts';
import { createWorkerSet } from '../../runtime/worker-set.ts';
import { BASE, devServerSuite, Env, Fakes, HOUR_MS, resolvedProxy, uniqueName } from '../support/workflow-harness.ts';
import { pollUntil, TEMPORAL_NAMESPACE, uniqueId, withTimeout } from '../support/temporal.ts';

const ENTRY = 'e1';
const RUNNING: VmReading = { state: 'Running', ip: '10.0.0.5', source: 'lease' };
const OK: ProbeOutcome = { ok: true, latencyMs: 3 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_FAILED', message: 'connect ECONNREFUSED' };
/** Bound on each wait of the test (real time, a loaded machine). */
const WAIT_MS = 30_000;

describe('egressctl proxy up on the dev server', { timeout: 120_000 }, () => {
  const dev = devServerSuite();

  it('returns once the workflow records Healthy, without waiting for its periodic read', async () => {
    const { client, connection, bundle } = dev;
    const f = new Fakes(new Env());
    f.resolve = (spec) => resolvedProxy(spec, { health: { intervalMs: HOUR_MS } });
    f.findBase = () => BASE;
    let passing = false;
    let refused = 0;
    const monitor = createMonitorActivities({
      readProxyVm: () => Promise.resolve(RUNNING),
      probeProxy: () => {
        if (!passing) refused += 1;
        return Promise.resolve(passing ? OK : REFUSED);
      },
    });
    const taskQueue = uniqueId('proxy-up');
    const set = await createWorkerSet({
      connection,
      taskQueue,
      workflowBundle: bundle,
      activities: { ...f.activities(), ...monitor },
      shutdownGraceTime: '2 seconds',
    });
    const running = set.run();
    const name = uniqueName('up');
    const handle = client.workflow.getHandle(proxyWorkflowId(ENTRY, name));
    try {
      let settled = false;
      const up = proxyUp(client, {
        name,
        entry: ENTRY,
        imageKey: uniqueName('img'),
        taskQueue,
        waitMs: 10 * 60_000,
        pollMs: 10 * 60_000,
        webUi: 'http://127.0.0.1:8233',
        namespace: TEMPORAL_NAMESPACE,
      }).finally(() => {
        settled = true;
      });
      // Running, its address read, Squid refusing: proxy up is still waiting.
      await pollUntil(() => Promise.resolve(refused >= 2 ? true : undefined), {
        timeoutMs: WAIT_MS,
        what: 'two refused probes',
      });
      const before = await freshProxyStatus(handle);
      assert.equal(before.state, 'Running');
      assert.notEqual(before.conditions.Healthy.status, 'True');
      assert.equal(settled, false, 'proxy up returned before the proxy was Healthy');
      passing = true;
      const result = await withTimeout(up, WAIT_MS, 'proxy up to return once Healthy was recorded');
      assert.equal(result.ip, RUNNING.ip);
      assert.equal(result.reused, false);
      assert.equal((await freshProxyStatus(handle)).conditions.Healthy.status, 'True');
    } finally {
      await handle.terminate('test over').catch(() => undefined);
      set.shutdown();
      await withTimeout(running, 30_000, 'the worker to stop');
    }
  });
});
