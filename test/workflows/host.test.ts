/**
 * The host maintenance workflow on the time-skipping test server, driven through client/hosts.ts
 * as the API drives it: cordon and uncordon (idempotent, one workflow for concurrent cordons, no
 * event at rest, the workflow ends; an uncordon accepted during the first cordon applies after it),
 * drain (a pool with members on the host is told once and told again when the host is uncordoned,
 * a standalone proxy is asked to move and a refusal is asked again next pass, Drained once nothing
 * is left), and refusals (bad bodies before the history, an unknown host with the known ones
 * named). The activities are the real ones of activities/host.ts except the listing of the host
 * (scripted: no libvirt here) and the providers file (a stand-in).
 *
 * EP_RECORD_HOST_REPLAY=1 writes the histories of the cordon, the drain and the drain deadline tests,
 * and the second run of the continue-as-new test, to test/replay/host-*.sdk-<version>.json
 * (replayed by test/unit/replay.test.ts).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client, WithStartWorkflowOperation, WorkflowUpdateStage } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createHostActivities } from '../../activities/host.ts';
import type { HostRegistry } from '../../activities/hosts.ts';
import { withCordons } from '../../activities/index.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import { ProxySpecError } from '../../activities/errors.ts';
import {
  cordonedHosts,
  cordonHost,
  drainHost,
  HostActionRefusedError,
  hostStatus,
  uncordonHost,
} from '../../client/hosts.ts';
import { HOST_WORKFLOW_TYPE, hostWorkflowId } from '../../contracts/host.ts';
import type { HostCarried, HostProxy, HostStatus } from '../../contracts/host.ts';
import { hostDrainUpdate, hostUncordonUpdate } from '../../contracts/messages.ts';
import type { hostWorkflow } from '../../workflows/host.ts';
import { poolWorkflowId } from '../../contracts/pool.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import {
  drainNoticesQuery,
  movesQuery,
  POOL_STAND_IN_TYPE,
  PROXY_STAND_IN_TYPE,
  runningSignal,
} from '../support/host-stand-ins.ts';
import { installTestRuntime, pollUntil, withTimeout } from '../support/temporal.ts';
import { ENTRY, Env, Gate, held, HOUR_MS, TEST_TIMEOUT_MS, WAIT_MS, withWorker } from '../support/workflow-harness.ts';
import { recordReplay } from '../support/replay-record.ts';

const BUNDLE_PATH = fileURLToPath(new URL('../support/host-workflows.ts', import.meta.url));
const HOSTS = ['h1', 'h2'];
const opts = { timeout: TEST_TIMEOUT_MS };

class HostEnv extends Env {
  private hostBundle: WorkflowBundleWithSourceMap | undefined;
  override get bundle(): WorkflowBundleWithSourceMap {
    if (this.hostBundle === undefined) throw new Error('no workflow bundle: call load() first');
    return this.hostBundle;
  }
  override async load(): Promise<void> {
    installTestRuntime();
    const quiet = () => undefined;
    const logger = { log: quiet, trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet };
    this.hostBundle = await withTimeout(
      bundleWorkflowCode({ workflowsPath: BUNDLE_PATH, logger }),
      60_000,
      'bundle the host test workflows',
    );
  }
}
const e = new HostEnv();
before(() => e.load());
after(() => e.close());

/** The providers file's hosts of ENTRY, as the registry answers for them. */
const registry = {
  host(entry: string, host: string) {
    if (entry !== ENTRY || !HOSTS.includes(host))
      throw new ProxySpecError(
        'host',
        `entry ${entry} has no host ${JSON.stringify(host)} (known: ${HOSTS.join(', ')})`,
      );
    return {};
  },
} as unknown as HostRegistry;

interface Ctx {
  client: Client;
  tq: string;
  /** What the scripted listing of h1 returns (the test moves proxies off it). */
  onHost: HostProxy[];
  /** What the scripted listing says of the host's own domains (unset: it answered). */
  hostError?: string;
  started: WorkflowHandle[];
  /** When set, checkMaintenanceHost opens `started` and waits for `gate`. */
  holdCheck?: { started: Gate; gate: Gate };
}

async function withHosts(fn: (c: Ctx) => Promise<void>): Promise<void> {
  const started: WorkflowHandle[] = [];
  const ctx = { onHost: [] as HostProxy[], started } as Ctx;
  let client: Client | undefined;
  const real = {
    checkMaintenanceHost: async (i: { entry: string; host: string }) => {
      if (ctx.holdCheck !== undefined) {
        ctx.holdCheck.started.open();
        await held(ctx.holdCheck.gate);
      }
      return createHostActivities(registry, client!).checkMaintenanceHost(i);
    },
    signalPoolHostDrain: (i: { pool: string; host: string; draining: boolean }) =>
      createHostActivities(registry, client!).signalPoolHostDrain(i),
    moveProxyOffHost: (i: { entry: string; name: string; avoidHosts: string[]; reason?: string }) =>
      createHostActivities(registry, client!).moveProxyOffHost(i),
    listHostProxies: () =>
      Promise.resolve({
        proxies: structuredClone(ctx.onHost),
        ...(ctx.hostError === undefined ? {} : { hostError: ctx.hostError }),
      }),
  };
  await withWorker(
    e,
    real,
    async (tq) => {
      // A plain client: the test server's own would unlock time skipping in `result()`, and the
      // server would leap past the stand-ins' execution timeout.
      client = new Client({ connection: e.env.connection, namespace: e.env.namespace ?? 'default' });
      Object.assign(ctx, { client, tq });
      for (const h of [...HOSTS, 'h9']) started.push(client.workflow.getHandle(hostWorkflowId(ENTRY, h)));
      await fn(ctx);
    },
    started,
  );
}

async function historyOf(c: Ctx, host: string) {
  const events = (await c.client.workflow.getHandle(hostWorkflowId(ENTRY, host)).fetchHistory()).events ?? [];
  return {
    length: events.length,
    timers: events.filter((ev) => ev.timerStartedEventAttributes).length,
    updates: events.filter((ev) => ev.workflowExecutionUpdateAcceptedEventAttributes).length,
  };
}

async function statusWhen(c: Ctx, host: string, ok: (s: HostStatus) => boolean, what: string): Promise<HostStatus> {
  return pollUntil(
    async () => {
      const s = await hostStatus(c.client, ENTRY, host);
      return ok(s) ? s : undefined;
    },
    { timeoutMs: WAIT_MS, intervalMs: 50, what },
  );
}

/** Writes the run's history as a replay file when asked to (EP_RECORD_HOST_REPLAY=1). */
const record = (h: WorkflowHandle, name: string): Promise<void> => recordReplay(h, name, 'EP_RECORD_HOST_REPLAY');

/** The host workflow's result (bounded). */
async function ended(c: Ctx, host: string): Promise<HostStatus> {
  const h = c.client.workflow.getHandle<typeof hostWorkflow>(hostWorkflowId(ENTRY, host));
  return withTimeout(h.result(), WAIT_MS, `the host workflow of ${host} to complete`);
}

/** The stand-in pool's notices once it holds `n` (a query may run before a signal's task). */
async function noticesWhen(pool: WorkflowHandle, n: number) {
  return pollUntil(
    async () => {
      const got = await pool.query(drainNoticesQuery);
      return got.length >= n ? got : undefined;
    },
    { timeoutMs: WAIT_MS, intervalMs: 50, what: `${n} host-drain notices` },
  );
}

describe('host workflow', () => {
  it('cordon is idempotent, one workflow, silent at rest; uncordon ends it', opts, () =>
    withHosts(async (c) => {
      assert.deepEqual(await hostStatus(c.client, ENTRY, 'h1'), {
        entry: ENTRY,
        host: 'h1',
        phase: 'Schedulable',
        cordoned: false,
      });
      const [a, b] = await Promise.all([
        cordonHost(c.client, ENTRY, 'h1', { reason: 'kernel update' }, c.tq),
        cordonHost(c.client, ENTRY, 'h1', { reason: 'kernel update' }, c.tq),
      ]);
      assert.equal(a.phase, 'Cordoned');
      assert.equal(a.cordoned, true);
      assert.equal(a.reason, 'kernel update');
      assert.equal(b.since, a.since, 'the second cordon found the first one');
      const again = await cordonHost(c.client, ENTRY, 'h1', { reason: 'other' }, c.tq);
      assert.deepEqual(again, a, 'a cordon of a cordoned host returns its status unchanged');
      const desc = await c.client.workflow.getHandle(hostWorkflowId(ENTRY, 'h1')).describe();
      assert.equal(desc.status.name, 'RUNNING');
      assert.deepEqual([...(await cordonedHosts(c.client, ENTRY, HOSTS))], ['h1']);
      // The worker's surveyHosts marks it, and leaves the survey it wraps (its cache) unmarked.
      const cached: HostSurvey[] = HOSTS.map((host) => ({ entry: ENTRY, host, weight: 1, reachable: true }));
      const marked = await withCordons(() => Promise.resolve(cached), c.client)({ entry: ENTRY });
      assert.deepEqual(
        marked.map((h) => [h.host, h.cordoned]),
        [
          ['h1', true],
          ['h2', undefined],
        ],
      );
      assert.equal(cached[0]?.cordoned, undefined, 'the cached survey is not marked');

      // At rest: an hour passes and nothing is recorded.
      const before = await historyOf(c, 'h1');
      await e.env.sleep(HOUR_MS);
      const later = await historyOf(c, 'h1');
      assert.equal(later.length, before.length, 'no event at rest');
      assert.equal(later.timers, 0, 'no timer');

      const un = await uncordonHost(c.client, ENTRY, 'h1', {});
      assert.equal(un.phase, 'Schedulable');
      assert.equal(un.cordoned, false);
      assert.equal((await ended(c, 'h1')).phase, 'Schedulable');
      await record(c.client.workflow.getHandle(hostWorkflowId(ENTRY, 'h1')), 'host-cordon-uncordon');
      assert.equal((await hostStatus(c.client, ENTRY, 'h1')).phase, 'Schedulable');
      assert.equal((await cordonedHosts(c.client, ENTRY, HOSTS)).size, 0);
      const unmarked = await withCordons(() => Promise.resolve(cached), c.client)({ entry: ENTRY });
      assert.ok(
        unmarked.every((h) => h.cordoned === undefined),
        'an uncordoned host is schedulable at the next survey',
      );
      // Uncordon of a schedulable host: its status, no error, no workflow started.
      assert.equal((await uncordonHost(c.client, ENTRY, 'h2', {})).phase, 'Schedulable');
      await assert.rejects(c.client.workflow.getHandle(hostWorkflowId(ENTRY, 'h2')).describe(), /not found/i);
      // A cordon after the workflow ended starts a new run.
      assert.equal((await cordonHost(c.client, ENTRY, 'h1', {}, c.tq)).phase, 'Cordoned');
      assert.notEqual((await c.client.workflow.getHandle(hostWorkflowId(ENTRY, 'h1')).describe()).runId, desc.runId);
    }),
  );

  it('an uncordon accepted while the first cordon checks the host runs after it: Schedulable, the run ends', opts, () =>
    withHosts(async (c) => {
      c.holdCheck = { started: new Gate(), gate: new Gate() };
      const cordoned = cordonHost(c.client, ENTRY, 'h1', { reason: 'kernel update' }, c.tq);
      await withTimeout(c.holdCheck.started.opened, WAIT_MS, 'the cordon to check the host');
      const h = c.client.workflow.getHandle<typeof hostWorkflow>(hostWorkflowId(ENTRY, 'h1'));
      const un = await h.startUpdate(hostUncordonUpdate, { args: [{}], waitForStage: WorkflowUpdateStage.ACCEPTED });
      c.holdCheck.gate.open();
      assert.equal((await cordoned).phase, 'Cordoned');
      const after = await un.result();
      assert.deepEqual([after.phase, after.cordoned], ['Schedulable', false]);
      assert.equal((await hostStatus(c.client, ENTRY, 'h1')).phase, 'Schedulable', 'the last accepted action wins');
      assert.equal((await ended(c, 'h1')).phase, 'Schedulable');
      assert.equal((await cordonedHosts(c.client, ENTRY, HOSTS)).size, 0);
    }),
  );

  it(
    'drain tells each pool once, moves standalones (asking again after a refusal), ends Drained; uncordon tells the pools',
    opts,
    () =>
      withHosts(async (c) => {
        const pool = await c.client.workflow.start(POOL_STAND_IN_TYPE, {
          taskQueue: c.tq,
          workflowId: poolWorkflowId(ENTRY, 'p1'),
        });
        const proxy = await c.client.workflow.start(PROXY_STAND_IN_TYPE, {
          taskQueue: c.tq,
          workflowId: proxyWorkflowId(ENTRY, 's1'),
          args: [{ running: false }],
        });
        c.started.push(pool, proxy);
        c.onHost = [{ name: 'p1-a', pool: `${ENTRY}/p1` }, { name: 'p1-b', pool: `${ENTRY}/p1` }, { name: 's1' }];
        const started = await drainHost(c.client, ENTRY, 'h1', { reason: 'disk swap' }, c.tq);
        assert.equal(started.phase, 'Draining');
        assert.equal(started.cordoned, true);
        assert.equal(started.reason, 'disk swap');

        const first = await statusWhen(c, 'h1', (s) => s.drain?.proxies.length === 3, 'the first drain pass');
        assert.equal(first.drain?.remaining, 3);
        const s1 = first.drain?.proxies.find((p) => p.name === 's1');
        assert.match(s1?.error ?? '', /not Running/, 'the refusal is recorded');
        assert.deepEqual(
          first.drain?.proxies.filter((p) => p.pool !== undefined).map((p) => [p.name, p.pool, p.state, p.error]),
          [
            ['p1-a', `${ENTRY}/p1`, 'asked', undefined],
            ['p1-b', `${ENTRY}/p1`, 'asked', undefined],
          ],
        );
        assert.deepEqual(await pool.query(drainNoticesQuery), [{ host: 'h1', draining: true }]);
        assert.deepEqual(await proxy.query(movesQuery), []);
        assert.deepEqual([...(await cordonedHosts(c.client, ENTRY, HOSTS))], ['h1'], 'a draining host is cordoned');

        // The proxy is Running now: the next pass asks again and the move is accepted.
        await proxy.signal(runningSignal);
        c.onHost = c.onHost.filter((p) => p.name !== 'p1-a');
        await e.env.sleep(10_000);
        const second = await statusWhen(
          c,
          'h1',
          (s) => s.drain?.remaining === 2 && s.drain.proxies.find((p) => p.name === 's1')?.error === undefined,
          'the second drain pass',
        );
        assert.equal(second.phase, 'Draining');
        assert.equal(second.drain?.proxies.find((p) => p.name === 'p1-a')?.state, 'gone');
        assert.deepEqual(await proxy.query(movesQuery), [{ avoidHosts: ['h1'], reason: 'disk swap' }]);
        assert.deepEqual(
          await pool.query(drainNoticesQuery),
          [{ host: 'h1', draining: true }],
          'the pool is told once',
        );

        // Everything moved: the next pass finds the host empty.
        c.onHost = [];
        await e.env.sleep(10_000);
        const drained = await statusWhen(c, 'h1', (s) => s.phase === 'Drained', 'Drained');
        assert.equal(drained.drain?.remaining, 0);
        assert.ok(drained.drain?.finishedAt, 'finishedAt is set');
        assert.deepEqual(
          drained.drain?.proxies.map((p) => p.state),
          ['gone', 'gone', 'gone'],
        );
        assert.deepEqual(await proxy.query(movesQuery), [{ avoidHosts: ['h1'], reason: 'disk swap' }], 'asked once');
        assert.deepEqual(
          await drainHost(c.client, ENTRY, 'h1', {}, c.tq),
          drained,
          'a drain of a Drained host returns it',
        );
        // Drained at rest: no timers after the last pass.
        const before = await historyOf(c, 'h1');
        await e.env.sleep(HOUR_MS);
        assert.equal((await historyOf(c, 'h1')).length, before.length, 'no event once Drained');

        const un = await uncordonHost(c.client, ENTRY, 'h1', { reason: 'done' });
        assert.equal(un.phase, 'Schedulable');
        assert.deepEqual(await pool.query(drainNoticesQuery), [
          { host: 'h1', draining: true },
          { host: 'h1', draining: false },
        ]);
        await ended(c, 'h1');
        await record(c.client.workflow.getHandle(hostWorkflowId(ENTRY, 'h1')), 'host-drain');
        assert.equal((await hostStatus(c.client, ENTRY, 'h1')).phase, 'Schedulable');
      }),
  );

  it('uncordon mid-drain stops it and tells the pools; a continued run carries its state', opts, () =>
    withHosts(async (c) => {
      const pool = await c.client.workflow.start(POOL_STAND_IN_TYPE, {
        taskQueue: c.tq,
        workflowId: poolWorkflowId(ENTRY, 'p1'),
      });
      c.started.push(pool);
      c.onHost = [{ name: 'p1-a', pool: `${ENTRY}/p1` }];
      await drainHost(c.client, ENTRY, 'h1', {}, c.tq);
      await statusWhen(c, 'h1', (s) => s.drain?.proxies.length === 1, 'the first drain pass');
      const un = await uncordonHost(c.client, ENTRY, 'h1', {});
      assert.deepEqual([un.phase, un.cordoned, un.drain], ['Schedulable', false, undefined]);
      assert.deepEqual(await noticesWhen(pool, 2), [
        { host: 'h1', draining: true },
        { host: 'h1', draining: false },
      ]);
      await ended(c, 'h1');

      // What continue-as-new hands over: a Draining host whose pool was told.
      const carried: HostCarried = {
        phase: 'Draining',
        cordoned: true,
        since: '2026-01-01T00:00:00.000Z',
        reason: 'carried',
        drain: { startedAt: '2026-01-01T00:00:00.000Z', proxies: [], remaining: 1 },
        poolsTold: { [`${ENTRY}/p1`]: true },
        known: true,
      };
      await c.client.workflow.start<typeof hostWorkflow>(HOST_WORKFLOW_TYPE, {
        taskQueue: c.tq,
        workflowId: hostWorkflowId(ENTRY, 'h2'),
        args: [{ entry: ENTRY, host: 'h2', carried }],
      });
      c.onHost = [];
      const drained = await statusWhen(c, 'h2', (s) => s.phase === 'Drained', 'the carried drain ends');
      assert.equal(drained.reason, 'carried');
      assert.equal(drained.since, carried.since);
      assert.equal((await pool.query(drainNoticesQuery)).length, 2, 'the carried pool is not told again');
      await uncordonHost(c.client, ENTRY, 'h2', {});
      assert.deepEqual((await noticesWhen(pool, 3)).at(-1), { host: 'h2', draining: false });
    }),
  );

  it('a drain continued as new goes on in the next run: the pool told once, Drained, uncordon tells it', opts, () =>
    withHosts(async (c) => {
      const pool = await c.client.workflow.start(POOL_STAND_IN_TYPE, {
        taskQueue: c.tq,
        workflowId: poolWorkflowId(ENTRY, 'p1'),
      });
      c.started.push(pool);
      c.onHost = [{ name: 'p1-a', pool: `${ENTRY}/p1` }];
      // As drainHost starts it, with the test's limit: the run continues as new after its first update.
      const startWorkflowOperation = new WithStartWorkflowOperation<typeof hostWorkflow>(HOST_WORKFLOW_TYPE, {
        taskQueue: c.tq,
        workflowId: hostWorkflowId(ENTRY, 'h1'),
        args: [{ entry: ENTRY, host: 'h1', continueAsNewAfterUpdates: 1 }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      const started = await c.client.workflow.executeUpdateWithStart(hostDrainUpdate, {
        args: [{ reason: 'disk swap' }],
        startWorkflowOperation,
      });
      assert.equal(started.phase, 'Draining');
      const h = c.client.workflow.getHandle<typeof hostWorkflow>(hostWorkflowId(ENTRY, 'h1'));
      const first = await statusWhen(c, 'h1', (s) => s.drain?.proxies.length === 1, 'the first drain pass');
      assert.deepEqual(await noticesWhen(pool, 1), [{ host: 'h1', draining: true }]);
      const firstRun = (await h.describe()).runId;

      // Another member of the pool on the host; the next pass is due: the run continues as new
      // instead (no query meanwhile).
      c.onHost = [...c.onHost, { name: 'p1-b', pool: `${ENTRY}/p1` }];
      await e.env.sleep(10_000);
      const secondRun = await pollUntil(
        async () => {
          const run = (await h.describe()).runId;
          return run !== firstRun ? run : undefined;
        },
        { timeoutMs: WAIT_MS, intervalMs: 50, what: 'the host run continued as new' },
      );
      const firstEvents = (await c.client.workflow.getHandle(h.workflowId, firstRun).fetchHistory()).events ?? [];
      assert.ok(
        firstEvents.some((ev) => ev.workflowExecutionContinuedAsNewEventAttributes),
        'the first run ended by continue-as-new',
      );
      const run = c.client.workflow.getHandle<typeof hostWorkflow>(h.workflowId, secondRun);
      const startedEvent = (await run.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
      const input = JSON.parse(Buffer.from(startedEvent!.input!.payloads![0]!.data!).toString('utf8')) as {
        carried?: HostCarried;
      };
      assert.deepEqual(input.carried?.poolsTold, { [`${ENTRY}/p1`]: true }, 'the pool told is in its input');

      // The second run goes on from the carried drain: its first pass finds the pool's new member
      // and does not tell the pool again (told in the first run); the next finds the host empty.
      const second = await statusWhen(c, 'h1', (s) => s.drain?.proxies.length === 2, 'the second run’s first pass');
      assert.deepEqual(
        second.drain?.proxies.map((p) => [p.name, p.state]),
        [
          ['p1-a', 'asked'],
          ['p1-b', 'asked'],
        ],
      );
      assert.deepEqual(await pool.query(drainNoticesQuery), [{ host: 'h1', draining: true }], 'not told again');
      c.onHost = [];
      await e.env.sleep(10_000);
      const drained = await statusWhen(c, 'h1', (s) => s.phase === 'Drained', 'Drained in the second run');
      assert.equal(drained.reason, 'disk swap');
      assert.equal(drained.since, first.since);
      assert.equal(drained.drain?.startedAt, first.drain?.startedAt);
      assert.deepEqual(
        drained.drain?.proxies.map((p) => [p.name, p.pool, p.state]),
        [
          ['p1-a', `${ENTRY}/p1`, 'gone'],
          ['p1-b', `${ENTRY}/p1`, 'gone'],
        ],
      );
      assert.equal((await pool.query(drainNoticesQuery)).length, 1, 'the carried pool is not told again');
      const un = await uncordonHost(c.client, ENTRY, 'h1', {});
      assert.deepEqual([un.phase, un.cordoned], ['Schedulable', false]);
      assert.deepEqual(
        await noticesWhen(pool, 2),
        [
          { host: 'h1', draining: true },
          { host: 'h1', draining: false },
        ],
        'the second run tells the pool the first run told',
      );
      assert.equal((await withTimeout(run.result(), WAIT_MS, 'the second run to complete')).phase, 'Schedulable');
      assert.ok(
        !((await run.fetchHistory()).events ?? []).some((ev) => ev.workflowExecutionContinuedAsNewEventAttributes),
        'the second run completed, not continued again',
      );
      await record(run, 'host-carried');
    }),
  );

  it(
    'counts VMs without a workflow here (orphans noted, moving ones not asked) and shows an unreadable host',
    opts,
    () =>
      withHosts(async (c) => {
        const proxy = await c.client.workflow.start(PROXY_STAND_IN_TYPE, {
          taskQueue: c.tq,
          workflowId: proxyWorkflowId(ENTRY, 'moving'),
          args: [{ running: true }],
        });
        c.started.push(proxy);
        c.onHost = [
          { name: 'lost', orphan: true },
          { name: 'moving', elsewhere: true },
        ];
        c.hostError = 'KVM2_UNREACHABLE: ssh: connect timed out';
        await drainHost(c.client, ENTRY, 'h1', {}, c.tq);
        const s = await statusWhen(c, 'h1', (st) => st.drain?.proxies.length === 2, 'the first drain pass');
        assert.equal(s.phase, 'Draining');
        assert.equal(s.drain?.remaining, 2, 'both VMs count');
        assert.equal(s.drain?.lastError, c.hostError);
        assert.match(s.drain?.proxies.find((p) => p.name === 'lost')?.error ?? '', /orphan GC/);
        assert.equal(s.drain?.proxies.find((p) => p.name === 'moving')?.error, undefined);
        assert.deepEqual(await proxy.query(movesQuery), [], 'a proxy moving off the host is not asked again');
        delete c.hostError;
        c.onHost = [];
        await e.env.sleep(10_000);
        const drained = await statusWhen(c, 'h1', (st) => st.phase === 'Drained', 'Drained');
        assert.equal(drained.drain?.lastError, undefined, 'cleared once the host answers');
      }),
  );

  it('a drain past its deadline with a proxy that cannot move is overdue, goes on asking, and ends Drained', opts, () =>
    withHosts(async (c) => {
      const proxy = await c.client.workflow.start(PROXY_STAND_IN_TYPE, {
        taskQueue: c.tq,
        workflowId: proxyWorkflowId(ENTRY, 's1'),
        args: [{ running: false }],
      });
      c.started.push(proxy);
      c.onHost = [{ name: 's1' }];
      const started = await drainHost(c.client, ENTRY, 'h1', { reason: 'disk swap', deadlineMs: 60_000 }, c.tq);
      assert.equal(started.phase, 'Draining');
      const deadlineAt = Date.parse(started.drain?.deadlineAt ?? '');
      assert.equal(
        deadlineAt - Date.parse(started.drain?.startedAt ?? ''),
        60_000,
        'deadlineAt is 60 s after the start',
      );
      assert.equal(started.drain?.overdue, undefined);
      const first = await statusWhen(c, 'h1', (s) => s.drain?.proxies.length === 1, 'the first drain pass');
      assert.match(first.drain?.proxies[0]?.error ?? '', /not Running/);
      assert.equal(first.drain?.overdue, undefined, 'not overdue before the deadline');

      // Past the deadline (passes every 10 s): overdue, still Draining, still asking.
      await e.env.sleep(70_000);
      const late = await statusWhen(c, 'h1', (s) => s.drain?.overdue === true, 'the drain marked overdue');
      assert.equal(late.phase, 'Draining');
      assert.equal(late.drain?.remaining, 1);
      assert.deepEqual(
        late.drain?.proxies.map((p) => [p.name, p.state]),
        [['s1', 'asked']],
      );
      assert.deepEqual(await proxy.query(movesQuery), [], 'nothing moved or deleted by force');

      // A new drain request with a deadline sets it anew and clears overdue.
      const again = await drainHost(c.client, ENTRY, 'h1', { deadlineMs: 600_000 }, c.tq);
      assert.equal(again.drain?.overdue, undefined, 'a new deadline clears overdue');
      assert.ok(Date.parse(again.drain?.deadlineAt ?? '') > deadlineAt, 'the deadline moved');

      // The proxy can move now: the next pass asks again, then the host is empty.
      await proxy.signal(runningSignal);
      await e.env.sleep(10_000);
      await statusWhen(c, 'h1', (s) => s.drain?.proxies[0]?.error === undefined, 'the move accepted');
      assert.deepEqual(await proxy.query(movesQuery), [{ avoidHosts: ['h1'], reason: 'disk swap' }]);
      c.onHost = [];
      await e.env.sleep(10_000);
      const drained = await statusWhen(c, 'h1', (s) => s.phase === 'Drained', 'Drained');
      assert.equal(drained.drain?.overdue, undefined, 'done within the new deadline');
      assert.ok(drained.drain?.finishedAt);
      await uncordonHost(c.client, ENTRY, 'h1', {});
      await ended(c, 'h1');
      await record(c.client.workflow.getHandle(hostWorkflowId(ENTRY, 'h1')), 'host-drain-deadline');
    }),
  );

  it('refuses bad bodies before the history and an unknown host naming the known ones', opts, () =>
    withHosts(async (c) => {
      await cordonHost(c.client, ENTRY, 'h1', {}, c.tq);
      const updates = (await historyOf(c, 'h1')).updates;
      await assert.rejects(
        cordonHost(c.client, ENTRY, 'h1', { reason: 7 } as unknown as { reason: string }, c.tq),
        (err: Error) => err instanceof HostActionRefusedError && /reason must be a string/.test(err.message),
      );
      await assert.rejects(
        drainHost(c.client, ENTRY, 'h1', { force: true } as unknown as { reason: string }, c.tq),
        (err: Error) => err instanceof HostActionRefusedError && /unknown field force/.test(err.message),
      );
      await assert.rejects(
        uncordonHost(c.client, ENTRY, 'h1', { reason: 'x'.repeat(501) }),
        (err: Error) => err instanceof HostActionRefusedError && /longer than 500/.test(err.message),
      );
      await assert.rejects(
        cordonHost(c.client, ENTRY, 'h1', { deadlineMs: 60_000 }, c.tq),
        (err: Error) => err instanceof HostActionRefusedError && /deadlineMs is a drain's field/.test(err.message),
      );
      for (const deadlineMs of [0, 999, 1.5, 30 * 86_400_000 + 1]) {
        await assert.rejects(
          drainHost(c.client, ENTRY, 'h1', { deadlineMs }, c.tq),
          (err: Error) =>
            err instanceof HostActionRefusedError &&
            /deadlineMs must be a whole number of milliseconds/.test(err.message),
          `deadlineMs ${deadlineMs}`,
        );
      }
      assert.equal((await historyOf(c, 'h1')).updates, updates, 'refused before the history');
      assert.equal((await hostStatus(c.client, ENTRY, 'h1')).phase, 'Cordoned', 'still cordoned');

      await assert.rejects(
        cordonHost(c.client, ENTRY, 'h9', {}, c.tq),
        (err: Error) => err instanceof HostActionRefusedError && /no host "h9" \(known: h1, h2\)/.test(err.message),
      );
      // The run that the refused cordon started has ended: h9 reads schedulable.
      await ended(c, 'h9');
      assert.equal((await hostStatus(c.client, ENTRY, 'h9')).phase, 'Schedulable');
      assert.equal((await cordonedHosts(c.client, ENTRY, ['h9'])).size, 0);
    }),
  );
});
