/**
 * A proxy's part of cordon, drain and host failure (workflows/proxy/move.ts, host-reach.ts) on the
 * time-skipping server, with the fake activities of the other proxy workflow tests
 * (test/support/workflow-harness.ts): the `move` update deletes the VM on the old host before it
 * creates one on the new host, avoids the hosts it was given, and ends Running on the new host
 * (a worker dying in the middle of it included); its refusals; and a pool member's report carrying
 * since when its host has not answered, cleared by the next good read. Pool members report to a
 * stand-in pool (test/support/report-sink-workflow.ts).
 *
 * EP_RECORD_PROXY_MOVE_REPLAY=1 writes the histories of the first move test and of the member's
 * silent host to test/replay/proxy-move.sdk-<version>.json and
 * proxy-member-host-unreachable.sdk-<version>.json (replayed by test/unit/replay.test.ts).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { ProxyMoveRequest } from '../../contracts/host.ts';
import { proxyDeleteUpdate, proxyMoveUpdate } from '../../contracts/messages.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import type { VmReading } from '../../contracts/proxy.ts';
import type { PlacedProxy } from '../../activities/proxy.ts';
import { REPORT_SINK_WORKFLOW_TYPE, sinkReportsQuery } from '../support/report-sink-workflow.ts';
import { installTestRuntime, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import {
  ENTRY,
  Env,
  Fakes,
  GiB,
  Gate,
  failure,
  fullSurvey,
  held,
  idle,
  monitorStep,
  monitorWaiting,
  searchAttributes,
  startProxy,
  status,
  statusWhen,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  withWorker,
  workflowTaskFailures,
} from '../support/workflow-harness.ts';
import { recordReplay } from '../support/replay-record.ts';

/** The bundle of the project's workflows with the stand-in pool beside them. */
class MemberEnv extends Env {
  private own: WorkflowBundleWithSourceMap | undefined;
  override get bundle(): WorkflowBundleWithSourceMap {
    if (this.own === undefined) throw new Error('no workflow bundle: call load() first');
    return this.own;
  }
  override async load(): Promise<void> {
    installTestRuntime();
    const quiet = () => undefined;
    const logger = { log: quiet, trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet };
    const workflowsPath = fileURLToPath(new URL('../support/member-workflows.ts', import.meta.url));
    this.own = await withTimeout(bundleWorkflowCode({ workflowsPath, logger }), 60_000, 'bundle the workflows');
  }
}
const e = new MemberEnv();
before(() => e.load());
after(() => e.close());

const opts = { timeout: TEST_TIMEOUT_MS };
const IP = { h1: '10.0.1.5', h2: '10.0.2.5', h3: '10.0.3.5' } as Record<string, string>;

/** h1 (3 proxies), h2 (none: the first placement), h3 (1): a move off h2 that avoids h3 goes to h1. */
function threeHosts(over: Partial<Record<string, Partial<HostSurvey>>> = {}): HostSurvey[] {
  const host = (name: string, proxies: number): HostSurvey => ({
    entry: ENTRY,
    host: name,
    weight: 1,
    reachable: true,
    poolAvailableBytes: 50 * GiB,
    proxies,
    ...over[name],
  });
  return [host('h1', 3), host('h2', 0), host('h3', 1)];
}

/** Fakes whose VM on each host has that host's address. */
function fakes(): Fakes {
  const f = new Fakes(e);
  f.survey = () => threeHosts();
  f.read = (input: PlacedProxy): VmReading => ({ state: 'Running', ip: IP[input.host]!, source: 'lease' });
  return f;
}

/** Starts a proxy on the monitor loop; waits until it is Healthy on h2 and its monitor waits. */
async function healthy(f: Fakes, tq: string, started: WorkflowHandle[], extra = {}) {
  f.taskQueue = tq;
  const p = await startProxy(e, tq, started, { healthLoop: 'monitor', ...extra });
  await statusWhen(p.handle, (s) => s.state === 'Running', 'Running');
  await monitorWaiting(f, 0, 'the first health poll');
  const s = await monitorStep(e, f, p.handle, 'the second poll (Healthy)');
  assert.equal(s.host, 'h2');
  assert.equal(s.conditions.Healthy.status, 'True');
  return p;
}

/** Calls of `activity` as [index in the call log, host]. */
function hostsOf(f: Fakes, activity: string): [number, string][] {
  return f.calls.flatMap((c, i) =>
    c.activity === activity ? [[i, (c.input as PlacedProxy).host] as [number, string]] : [],
  );
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof WorkflowUpdateFailedError, `expected an update failure, got ${String(err)}`);
    return err.cause?.message ?? err.message;
  }
  throw new Error('the update was accepted; a refusal was expected');
}

const move = (h: WorkflowHandle, req: unknown) => h.executeUpdate(proxyMoveUpdate, { args: [req as ProxyMoveRequest] });

/** Writes the run's history as a replay file when asked to (EP_RECORD_PROXY_MOVE_REPLAY=1). */
const record = (h: WorkflowHandle, name: string): Promise<void> => recordReplay(h, name, 'EP_RECORD_PROXY_MOVE_REPLAY');

describe('moving a proxy', () => {
  it(
    'deletes the VM on the old host before creating it on a host it does not avoid, and runs there',
    opts,
    async () => {
      const f = fakes();
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const { handle: h } = await healthy(f, tq, started);
          const accepted = await move(h, { avoidHosts: ['h3'], reason: 'drain of h2' });
          assert.equal(accepted.state, 'Provisioning', 'the update returns once the loop began the move');
          assert.match(accepted.reason ?? '', /^moving off h2 \(drain of h2\): deleting the VM there$/);
          assert.equal(accepted.ip, undefined, 'no address while the VM is moving');
          const s = await statusWhen(h, (x) => x.state === 'Running' && x.host === 'h1', 'Running on h1');
          assert.equal(s.reason, 'moved off h2 to h1 (drain of h2)');
          assert.equal(s.recreations, 0, 'a move is not a recreation');
          await statusWhen(h, (x) => x.ip === IP['h1'], 'the new address read on h1');

          const deletes = hostsOf(f, 'deleteProxyVm');
          const creates = hostsOf(f, 'createProxyVm');
          assert.deepEqual(
            deletes.map(([, host]) => host),
            ['h2'],
            'one delete, on the old host',
          );
          assert.deepEqual(
            creates.map(([, host]) => host),
            ['h2', 'h1'],
            'created on h2 at first, then on h1',
          );
          assert.ok(deletes[0]![0] < creates[1]![0], 'the old VM was deleted before the new one was created');
          assert.ok(
            hostsOf(f, 'monitorProxy')
              .filter(([i]) => i > creates[1]![0])
              .every(([, host]) => host === 'h1'),
            'the monitor watches h1 after the move',
          );
          assert.equal((await searchAttributes(h))['ProxyHost'], 'h1');
          await h.executeUpdate(proxyDeleteUpdate);
          const out = await h.result();
          assert.equal(out.state, 'Deleted');
          assert.deepEqual(
            hostsOf(f, 'deleteProxyVm').map(([, host]) => host),
            ['h2', 'h1'],
            'the delete removes the VM on its new host',
          );
          await record(h, 'proxy-move');
          // The run replays (the move's commands are deterministic).
          await Worker.runReplayHistory({ workflowBundle: e.bundle }, await h.fetchHistory(), h.workflowId);
        },
        started,
      );
    },
  );

  it(
    'a move made by a worker without a cache (as after a crash), its delete lost once: resumed from the history',
    opts,
    async () => {
      const f = fakes();
      f.delete = (_input, n) => {
        // The first attempt dies with its worker (a retryable failure, as the server records a lost attempt).
        if (n === 0) throw failure('WORKER_LOST', 'Transient', 'the worker running this attempt died');
        return { domain: 'deleted', overlay: 'deleted', seed: 'deleted' };
      };
      const started: WorkflowHandle[] = [];
      const env = await e.open();
      try {
        const taskQueue = uniqueId('wf-tq');
        // No workflow cache: every workflow task starts from the history alone, as a new worker
        // taking over a run does; the move must go on from what the history says.
        const worker = await Worker.create({
          connection: env.nativeConnection,
          namespace: env.namespace ?? 'default',
          taskQueue,
          workflowBundle: e.bundle,
          activities: f.activities(),
          defaultHeartbeatThrottleInterval: 50,
          maxHeartbeatThrottleInterval: 100,
          shutdownGraceTime: 2_000,
          maxCachedWorkflows: 0,
        });
        await worker.runUntil(async () => {
          try {
            const { handle: h } = await healthy(f, taskQueue, started);
            await move(h, { avoidHosts: [] });
            const s = await statusWhen(h, (x) => x.state === 'Running' && x.host !== 'h2', 'Running off h2');
            assert.equal(s.host, 'h3', 'h1 holds the most proxies: h3');
            const deletes = f.calls.filter((c) => c.activity === 'deleteProxyVm');
            assert.deepEqual(
              deletes.map((c) => [(c.input as PlacedProxy).host, c.attempt]),
              [
                ['h2', 1],
                ['h2', 2],
              ],
              'the lost delete was retried, on h2',
            );
            const creates = hostsOf(f, 'createProxyVm');
            assert.deepEqual(
              creates.map(([, host]) => host),
              ['h2', 'h3'],
            );
            assert.ok(creates[1]![0] > f.calls.indexOf(deletes[1]!), 'created on h3 after the delete on h2 completed');
            assert.deepEqual(await workflowTaskFailures(h), [], 'no task failed on replay');
          } finally {
            for (const x of started) await x.terminate('test over').catch(() => undefined);
          }
        });
      } finally {
        await e.close();
      }
    },
  );

  it('refuses a bad body, a proxy not Running, a second move, and a move with nowhere to go', opts, async () => {
    const f = fakes();
    const gate = new Gate();
    f.delete = async (_input, n) => {
      if (n === 0) await held(gate);
      return { domain: 'deleted', overlay: 'deleted', seed: 'deleted' };
    };
    const started: WorkflowHandle[] = [];
    try {
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const { handle: h } = await healthy(f, tq, started);
          assert.match(await refusal(move(h, {})), /^avoidHosts must be a list of host names/);
          assert.match(await refusal(move(h, { avoidHosts: [''] })), /^avoidHosts must be a list of host names/);
          assert.match(await refusal(move(h, { avoidHosts: [], reason: 7 })), /^reason must be a string/);
          // Only h2 and the avoided h1 and h3 answer: nowhere to go, nothing deleted.
          assert.equal(
            await refusal(move(h, { avoidHosts: ['h1', 'h3'] })),
            'no host to move to: no host but h2, h1, h3, which the move avoids',
          );
          f.survey = () =>
            threeHosts({ h1: { reachable: false, error: 'SSH_CONNECT_TIMEOUT: x' }, h3: { cordoned: true } });
          assert.match(
            await refusal(move(h, { avoidHosts: [] })),
            /^no host to move to: every reachable host is cordoned/,
          );
          assert.equal(f.count('deleteProxyVm'), 0, 'a refused move deletes nothing');
          assert.equal((await status(h)).state, 'Running');
          assert.equal((await status(h)).host, 'h2');
          // A move under way (its delete held): a second one is refused, and so is a move of a proxy not Running.
          f.survey = () => threeHosts();
          await move(h, { avoidHosts: [] });
          assert.equal(
            await refusal(move(h, { avoidHosts: [] })),
            'a move off h2 is already under way; wait for it to finish',
          );
          const s = await status(h);
          assert.equal(s.state, 'Provisioning');
          assert.equal(
            await refusal(move(h, { avoidHosts: [] })),
            'a move off h2 is already under way; wait for it to finish',
          );
          gate.open();
          await statusWhen(h, (x) => x.state === 'Running' && x.host === 'h3', 'moved to h3');
          const rejected = (await h.fetchHistory()).events?.filter(
            (ev) => ev.workflowExecutionUpdateAcceptedEventAttributes,
          );
          assert.equal(
            rejected?.length,
            3,
            'only the handler-refused moves (no host) and the one made entered the history',
          );
        },
        started,
      );
    } finally {
      gate.open();
    }
  });

  it('a proxy that is not Running, and a pool member, are not moved', opts, async () => {
    const f = fakes();
    f.survey = () => fullSurvey();
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        f.taskQueue = tq;
        const { handle: waiting } = await startProxy(e, tq, started, { healthLoop: 'monitor' });
        await statusWhen(waiting, (s) => s.state === 'WaitingForCapacity', 'WaitingForCapacity');
        assert.equal(
          await refusal(move(waiting, { avoidHosts: [] })),
          'the proxy is WaitingForCapacity: only a Running proxy (healthy or not) can be moved',
        );
        f.survey = () => threeHosts();
        const pool = await sink(tq, started);
        const { handle: member } = await startProxy(e, tq, started, {
          healthLoop: 'monitor',
          pool: { workflowId: pool.workflowId, serving: true },
        });
        await statusWhen(member, (s) => s.state === 'Running', 'the member Running');
        assert.equal(
          await refusal(move(member, { avoidHosts: [] })),
          `the proxy is a member of pool ${pool.workflowId}: its pool moves it (drain the host and the pool replaces its members there)`,
        );
      },
      started,
    );
  });
});

describe('placement and cordons', () => {
  it(
    'a proxy only cordoned hosts could take waits in WaitingForCapacity naming the cordon; uncordoned, it is placed',
    opts,
    async () => {
      const f = fakes();
      let cordoned = true;
      f.survey = () =>
        threeHosts({ h1: { cordoned }, h2: { cordoned }, h3: { reachable: false, error: 'SSH_CONNECT_TIMEOUT: x' } });
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          f.taskQueue = tq;
          const { handle: h } = await startProxy(e, tq, started, { healthLoop: 'monitor' });
          const s = await statusWhen(h, (x) => x.state === 'WaitingForCapacity', 'WaitingForCapacity');
          assert.equal(
            s.reason,
            'every reachable host is cordoned; uncordon one or add a host (h1: cordoned; h2: cordoned; h3: unreachable)',
          );
          assert.equal(f.count('createProxyVm'), 0, 'nothing created on a cordoned host');
          cordoned = false;
          await idle(h, 'the capacity backoff timer', (x) => x.state === 'WaitingForCapacity');
          await e.env.sleep(30_000); // the first capacity backoff
          const placed = await statusWhen(h, (x) => x.state === 'Running', 'Running once uncordoned');
          assert.equal(placed.host, 'h2');
        },
        started,
      );
    },
  );
});

/** Starts a stand-in pool that keeps its members' reports. */
async function sink(taskQueue: string, started: WorkflowHandle[]): Promise<WorkflowHandle> {
  const h = await e.env.client.workflow.start(REPORT_SINK_WORKFLOW_TYPE, {
    taskQueue,
    workflowId: `pool/${ENTRY}/${uniqueId('sink').toLowerCase()}`,
    args: [],
  });
  started.push(h);
  return h;
}

const reports = (pool: WorkflowHandle): Promise<MemberReport[]> => pool.query(sinkReportsQuery);

describe("a pool member's host that does not answer", () => {
  it('a silent host is reported at its first silent read, while the proxy still looks Healthy', opts, async () => {
    const f = fakes();
    let silent = false;
    f.read = (input) => {
      if (silent) throw failure('SSH_KEEPALIVE_TIMEOUT', 'Transient', `no answer from ${input.host}`);
      return { state: 'Running', ip: IP[input.host]!, source: 'lease' };
    };
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const pool = await sink(tq, started);
        const { handle: h } = await healthy(f, tq, started, { pool: { workflowId: pool.workflowId, serving: true } });
        const before = (await reports(pool)).length;
        silent = true;
        await monitorStep(e, f, h, 'the first silent read');
        const got = await pollUntil(
          async () => {
            const rs = await reports(pool);
            return rs.length > before ? rs.at(-1) : undefined;
          },
          { timeoutMs: WAIT_MS, what: 'a report after one silent read' },
        );
        assert.ok(got.hostUnreachableSince !== undefined, 'it says since when the host is silent');
        assert.deepEqual([got.health, got.ip], ['True', IP['h2']], 'nothing else changed yet');
        await h.executeUpdate(proxyDeleteUpdate);
      },
      started,
    );
  });

  it(
    'reports since when reads fail with a link error, the same report once, cleared by a good read',
    opts,
    async () => {
      const f = fakes();
      let failing: string | undefined;
      const silentAt: number[] = [];
      f.read = (input) => {
        if (failing === 'SSH_CONNECT_TIMEOUT') silentAt.push(Date.now());
        if (failing !== undefined) throw failure(failing, 'Transient', `${failing} from ${input.host}`);
        return { state: 'Running', ip: IP[input.host]!, source: 'lease' };
      };
      const started: WorkflowHandle[] = [];
      await withWorker(
        e,
        f.activities(),
        async (tq) => {
          const pool = await sink(tq, started);
          const { handle: h } = await healthy(f, tq, started, { pool: { workflowId: pool.workflowId, serving: true } });
          assert.ok(
            (await reports(pool)).every((r) => r.hostUnreachableSince === undefined),
            'nothing while the host answers',
          );
          // libvirt answering with an error, or every address source failing, is not a silent host.
          failing = 'KVM2_ADDRESS_UNREADABLE';
          for (let i = 1; i <= 3; i++) await monitorStep(e, f, h, `address unreadable ${i}`);
          await statusWhen(h, (s) => s.ip === undefined, 'the address dropped');
          let got = await pollUntil(
            async () => ((await reports(pool)).at(-1)?.ip === undefined ? reports(pool) : undefined),
            {
              timeoutMs: WAIT_MS,
              what: 'the report of the lost address',
            },
          );
          assert.equal(got.at(-1)!.hostUnreachableSince, undefined, 'KVM2_ADDRESS_UNREADABLE: the host answered');
          failing = undefined;
          await monitorStep(e, f, h, 'address back');
          await statusWhen(h, (s) => s.ip !== undefined, 'the address back');

          // The host stops answering: the SSH connect times out on every read.
          failing = 'SSH_CONNECT_TIMEOUT';
          for (let i = 1; i <= 3; i++) await monitorStep(e, f, h, `host silent ${i}`);
          const s = await statusWhen(h, (x) => x.ip === undefined, 'the address dropped (host silent)');
          got = await pollUntil(
            async () => {
              const rs = await reports(pool);
              return rs.at(-1)?.hostUnreachableSince !== undefined ? rs : undefined;
            },
            { timeoutMs: WAIT_MS, what: 'a report with hostUnreachableSince' },
          );
          const since = got.at(-1)!.hostUnreachableSince!;
          // The first silent read returned already (Healthy turned True on its probe): since is its time.
          const sinceMs = Date.parse(since);
          assert.ok(sinceMs >= silentAt[0]! && sinceMs < silentAt[1]!, `since ${since}: the first silent read`);
          assert.equal(s.lastError?.code, 'SSH_CONNECT_TIMEOUT');
          const count = got.length;
          for (let i = 1; i <= 3; i++) await monitorStep(e, f, h, `still silent ${i}`);
          assert.equal((await reports(pool)).length, count, 'no new report while nothing changes');

          // It answers again: the next report has no hostUnreachableSince.
          failing = undefined;
          await monitorStep(e, f, h, 'the host answers');
          const back = await pollUntil(
            async () => {
              const last = (await reports(pool)).at(-1);
              return last?.ip !== undefined ? last : undefined;
            },
            { timeoutMs: WAIT_MS, what: 'the report of the address back' },
          );
          assert.equal(back.hostUnreachableSince, undefined, 'cleared by the good read');
          const withSince = (await reports(pool)).filter((r) => r.hostUnreachableSince !== undefined);
          assert.deepEqual(
            withSince.map((r) => [r.hostUnreachableSince, r.health, r.ip ?? null]),
            [
              [since, 'True', IP['h2']],
              [since, 'False', null],
            ],
            'one time through the outage, on the two reports that changed anyway (Healthy on the first silent read, the address dropped)',
          );
          await h.executeUpdate(proxyDeleteUpdate);
          assert.equal((await h.result()).state, 'Deleted');
          await record(h, 'proxy-member-host-unreachable');
        },
        started,
      );
    },
  );

  it('the older poll loop records it per read, from the first silent read', opts, async () => {
    const f = fakes();
    let failing = false;
    f.read = (input) => {
      if (failing) throw failure('LIBVIRT_KEEPALIVE_TIMEOUT', 'Transient', 'no byte from the peer');
      return { state: 'Running', ip: IP[input.host]!, source: 'lease' };
    };
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        f.taskQueue = tq;
        const pool = await sink(tq, started);
        const { handle: h } = await startProxy(e, tq, started, {
          healthLoop: 'poll',
          pool: { workflowId: pool.workflowId, serving: true },
        });
        await statusWhen(h, (s) => s.state === 'Running' && s.ip !== undefined, 'Running with an address');
        failing = true;
        const first = f.count('readProxyVm');
        await e.env.sleep(60 * 60 * 1000);
        const rs = await pollUntil(
          async () => {
            const x = await reports(pool);
            return x.at(-1)?.hostUnreachableSince !== undefined ? x : undefined;
          },
          { timeoutMs: WAIT_MS, what: 'a report with hostUnreachableSince' },
        );
        assert.ok(f.count('readProxyVm') > first);
        const since = rs.at(-1)!.hostUnreachableSince!;
        const last = (await status(h)).lastError;
        assert.equal(last?.code, 'LIBVIRT_KEEPALIVE_TIMEOUT');
        assert.ok(since <= last.at, `since ${since}, the last silent read ${last.at}`);
        failing = false;
        await e.env.sleep(60 * 60 * 1000);
        const back = await pollUntil(
          async () => {
            const last = (await reports(pool)).at(-1);
            return last !== undefined && last.hostUnreachableSince === undefined ? last : undefined;
          },
          { timeoutMs: WAIT_MS, what: 'the report cleared' },
        );
        assert.equal(back.ip, IP['h2']);
      },
      started,
    );
  });
});
