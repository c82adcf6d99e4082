/**
 * One monitor per host (`providers[].health.monitor: host`, docs/health.md): on the dev server in
 * real time, with a worker built as the worker process builds it (runtime/worker-set.ts), the real
 * proxy workflow, the real host monitor workflow and its real activity (activities/host-monitor.ts)
 * over reads and probes this test answers (per proxy, switchable); the other activities are the
 * workflow tests' fakes. A 2 s interval.
 *
 * Three proxies on one host share one host monitor and its one pending activity; quiet polls add no
 * history to the proxies, and the fresh status reads each proxy's entry in the host monitor's
 * heartbeat. A proxy whose probes fail turns Unhealthy after the hysteresis and back, the others
 * unaffected. A worker that goes away hands the loop to the next with the counters kept. A VM gone
 * is recreated and watched again; a resize unwatches and watches again; a delete unwatches.
 *
 * EP_RECORD_HOST_MONITOR_REPLAY=1 writes the deleted proxy's history and the host monitor's to
 * test/replay/{proxy,host}-host-monitor.sdk-<version>.json (replayed by test/unit/replay.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { createHostMonitorActivities } from '../../activities/host-monitor.ts';
import { freshProxyStatus, hostMonitorHeartbeat, monitorHeartbeat } from '../../client/health.ts';
import { HOST_MONITOR_ACTIVITY, hostMonitorWorkflowId } from '../../contracts/host-monitor.ts';
import type { HostWatch } from '../../contracts/host-monitor.ts';
import { hostWatchesQuery, proxyDeleteUpdate, proxyResizeUpdate } from '../../contracts/messages.ts';
import { PROXY_WORKFLOW_TYPE } from '../../contracts/proxy.ts';
import type { ProbeOutcome, ProxyStatus, ResolvedProxy, VmReading } from '../../contracts/proxy.ts';
import { createWorkerSet } from '../../runtime/worker-set.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { recordReplay } from '../support/replay-record.ts';
import {
  BASE,
  devServerSuite,
  ENTRY,
  Env,
  Fakes,
  proxyId,
  resolvedProxy,
  uniqueName,
} from '../support/workflow-harness.ts';
import { pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';

const INTERVAL_MS = 2_000;
/** A bound for what must follow within a few intervals on a loaded machine. */
const WAIT_MS = 30_000;
const OK: ProbeOutcome = { ok: true, latencyMs: 3 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'squid refused the CONNECT' };

/** The host every proxy of this test lands on (the fakes' roomy survey picks h2). */
const HOST = 'h2';

/** What the test's host answers, per proxy name. */
class World {
  reads = new Map<string, VmReading>();
  probes = new Map<string, ProbeOutcome>();
  probed = new Map<string, number>();
  read = (input: { proxy: ResolvedProxy }): Promise<VmReading> =>
    Promise.resolve(this.reads.get(input.proxy.name) ?? { state: 'Running', ip: '10.0.0.5', source: 'lease' });
  probe = (input: { proxy: ResolvedProxy }): Promise<ProbeOutcome> => {
    this.probed.set(input.proxy.name, (this.probed.get(input.proxy.name) ?? 0) + 1);
    return Promise.resolve(this.probes.get(input.proxy.name) ?? OK);
  };
}

async function historyLength(h: WorkflowHandle): Promise<number> {
  return (await h.describe()).historyLength;
}

async function freshWhen(h: WorkflowHandle, pred: (s: ProxyStatus) => boolean, what: string): Promise<ProxyStatus> {
  return pollUntil(
    async () => {
      const s = await freshProxyStatus(h);
      return pred(s) ? s : undefined;
    },
    { timeoutMs: WAIT_MS, what },
  );
}

async function watchesOf(client: Client): Promise<HostWatch[]> {
  const r = await client.workflow.getHandle(hostMonitorWorkflowId(ENTRY, HOST)).query(hostWatchesQuery, -1);
  return r.watches ?? [];
}

describe('one monitor per host', { timeout: 240_000 }, () => {
  const dev = devServerSuite();

  it('watches three proxies with one activity: quiet polls, a failing probe, a lost worker, a VM gone, resize and delete', async (t) => {
    const { client, connection, bundle } = dev;
    const world = new World();
    const f = new Fakes(new Env());
    f.resolve = (spec) => resolvedProxy(spec, { health: { intervalMs: INTERVAL_MS, monitor: 'host' } });
    f.findBase = () => BASE;
    f.resize = () => ({ changed: true });
    const taskQueue = uniqueId('host-monitor');
    f.taskQueue = taskQueue;
    const startWorker = async () => {
      const set = await createWorkerSet({
        connection,
        taskQueue,
        workflowBundle: bundle,
        activities: {
          ...f.activities(),
          ...createHostMonitorActivities({ readProxyVm: world.read, probeProxy: world.probe }, client, taskQueue),
        },
        shutdownGraceTime: '1 second',
      });
      return { set, running: set.run() };
    };
    let w = await startWorker();
    const handles: WorkflowHandle[] = [];
    const monitor = client.workflow.getHandle(hostMonitorWorkflowId(ENTRY, HOST));
    try {
      const names = [uniqueName('hm-a'), uniqueName('hm-b'), uniqueName('hm-c')];
      for (const name of names) {
        const input: ProxyWorkflowInput = { name, entry: ENTRY, imageKey: uniqueName('img') };
        handles.push(
          await client.workflow.start(PROXY_WORKFLOW_TYPE, { taskQueue, workflowId: proxyId(name), args: [input] }),
        );
      }
      const [a, b, c] = handles as [WorkflowHandle, WorkflowHandle, WorkflowHandle];
      for (const h of handles)
        await freshWhen(h, (s) => s.conditions.Healthy.status === 'True', `${h.workflowId} Healthy`);

      // One host monitor, one pending activity, every proxy watched; no proxy runs its own monitor.
      const watched = await watchesOf(client);
      assert.deepEqual(watched.map((x) => x.workflowId).sort(), handles.map((h) => h.workflowId).sort());
      const pending = (await monitor.describe()).raw.pendingActivities ?? [];
      assert.deepEqual(
        pending.map((p) => p.activityType?.name),
        [HOST_MONITOR_ACTIVITY],
      );
      for (const h of handles) assert.equal(await monitorHeartbeat(h), undefined, 'no per-proxy monitor pending');

      // Quiet: four intervals add no event to any proxy, and none to the host monitor.
      const before = await Promise.all([...handles, monitor].map(historyLength));
      const okBefore = (await freshProxyStatus(a)).health.totalOk;
      await new Promise((r) => setTimeout(r, 4 * INTERVAL_MS + 500));
      const afterQuiet = await Promise.all([...handles, monitor].map(historyLength));
      assert.deepEqual(afterQuiet, before, 'quiet polls added history events');
      const fresh = await freshProxyStatus(a);
      assert.ok(
        fresh.health.totalOk >= okBefore + 3,
        `the fresh status counts the probes (${okBefore} → ${fresh.health.totalOk})`,
      );
      const age = Date.now() - Date.parse(fresh.health.lastProbeAt!);
      assert.ok(age <= INTERVAL_MS + 2_000, `the fresh status's last probe is ${age} ms old`);
      t.diagnostic(
        `quiet: histories ${before.join(', ')} unchanged over ${4 * INTERVAL_MS} ms; last probe ${age} ms old`,
      );

      // b's probes fail: Unhealthy after unhealthyAfter (3) failures, a and c unaffected; then back.
      world.probes.set(names[1]!, REFUSED);
      const failedAt = Date.now();
      await freshWhen(b, (s) => s.conditions.Healthy.status === 'False', 'b Unhealthy');
      const q = await b.query('status');
      assert.equal(
        (q as ProxyStatus).conditions.Healthy.status,
        'False',
        'the status query (history) has the transition',
      );
      t.diagnostic(`b Unhealthy ${Date.now() - failedAt} ms after its probes began to fail`);
      for (const h of [a, c]) assert.equal((await freshProxyStatus(h)).conditions.Healthy.status, 'True');
      world.probes.delete(names[1]!);
      await freshWhen(b, (s) => s.conditions.Healthy.status === 'True', 'b Healthy again');

      // The worker goes away: the next worker's attempt resumes every watch's counters.
      const beat = await hostMonitorHeartbeat(a, { entry: ENTRY, host: HOST });
      const okAtStop = beat!.details.state.status.health.totalOk;
      w.set.shutdown();
      await withTimeout(w.running, 30_000, 'the worker to stop');
      w = await startWorker();
      const resumed = await pollUntil(
        async () => {
          const d = await monitor.describe();
          const p = (d.raw.pendingActivities ?? [])[0];
          const st = await freshProxyStatus(a);
          return (p?.attempt ?? 1) > 1 && st.health.totalOk > okAtStop ? st : undefined;
        },
        { timeoutMs: WAIT_MS, what: 'the monitor retried on the new worker and probing again' },
      );
      assert.ok(
        resumed.health.consecutiveOk > 2 && resumed.health.totalOk > okAtStop,
        `the counters went on (${okAtStop} → ${resumed.health.totalOk}, consecutive ${resumed.health.consecutiveOk})`,
      );

      // c's VM goes away: recreated, watched again under a new token.
      const tokenBefore = (await watchesOf(client)).find((x) => x.workflowId === c.workflowId)!.token;
      const creates = f.count('createProxyVm');
      world.reads.set(names[2]!, { state: 'Missing' });
      await pollUntil(() => Promise.resolve(f.count('createProxyVm') > creates ? true : undefined), {
        timeoutMs: WAIT_MS,
        what: 'c recreated',
      });
      world.reads.delete(names[2]!);
      await freshWhen(
        c,
        (s) => s.recreations === 1 && s.conditions.Healthy.status === 'True',
        'c Healthy after its recreate',
      );
      const tokenAfter = (await watchesOf(client)).find((x) => x.workflowId === c.workflowId)?.token;
      assert.ok(
        tokenAfter !== undefined && tokenAfter !== tokenBefore,
        `watched again (${tokenBefore} → ${tokenAfter})`,
      );

      // A resize: unwatched, resized, watched again.
      const resized = await a.executeUpdate(proxyResizeUpdate, { args: [{ vcpus: 2, memoryMiB: 1024 }] });
      assert.equal(resized.vm.vcpus, 2);
      await freshWhen(
        a,
        (s) => s.conditions.Healthy.status === 'True' && s.state === 'Running',
        'a Healthy after the resize',
      );
      assert.ok(
        (await watchesOf(client)).some((x) => x.workflowId === a.workflowId),
        'a watched again after its resize',
      );

      // A delete: the watch ends with it.
      await b.executeUpdate(proxyDeleteUpdate);
      await withTimeout(b.result(), WAIT_MS, 'b deleted');
      const left = (await watchesOf(client)).map((x) => x.workflowId).sort();
      assert.deepEqual(left, [a.workflowId, c.workflowId].sort(), 'b left the host monitor with its delete');
      await recordReplay(b, 'proxy-host-monitor', 'EP_RECORD_HOST_MONITOR_REPLAY');
      await recordReplay(monitor, 'host-monitor', 'EP_RECORD_HOST_MONITOR_REPLAY');
    } finally {
      for (const h of handles) await h.terminate('test over').catch(() => undefined);
      await monitor.terminate('test over').catch(() => undefined);
      w.set.shutdown();
      await withTimeout(w.running, 30_000, 'the worker to stop');
    }
  });
});
