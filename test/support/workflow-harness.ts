/**
 * Harness of the workflow tests: one time-skipping test server and one workflow bundle per test
 * file, a worker per test on its own task queue, and a scripted fake of every activity (the real
 * activities are tested against real hosts elsewhere). Every wait here is bounded.
 *
 * Time: outside `handle.result()` the test server's clock is locked (it runs at wall speed). The
 * tests give the proxy an hour-long health interval, so a Running proxy does nothing until a test
 * skips time with `env.sleep`: each `step` is exactly one health poll.
 */
import { after, before } from 'node:test';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import type { Client, WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import type { NativeConnection, WorkerOptions, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { toFailure } from '../../activities/errors.ts';
import type { Activities } from '../../activities/index.ts';
import { InsufficientCapacity } from '../../lib/kvm2/errors.ts';
import type { CreatedProxy, DeletedProxy, ListedProxy, ResizedProxy } from '../../lib/kvm2/index.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import { IMAGE_WORKFLOW_TYPE, imageWorkflowId } from '../../contracts/image.ts';
import { imageJoinSignal, imageProgressSignal, imageStatusQuery, proxyStatusQuery } from '../../contracts/messages.ts';
import type { EnsuredBase, ImageJoin, ImageProgressSignal, ImageWorkflowInput } from '../../contracts/image.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../../contracts/proxy.ts';
import type {
  Condition,
  ProbeOutcome,
  ProxySpec,
  ProxyStatus,
  ResolvedProxy,
  VmReading,
} from '../../contracts/proxy.ts';
import type { PlacedProxy } from '../../activities/proxy.ts';
import { resumedDetails, runMonitor } from '../../activities/monitor.ts';
import type { MonitorIo } from '../../activities/monitor.ts';
import type { MonitorDetails, MonitorInput } from '../../contracts/health.ts';
import type { proxyLifecycle } from '../../workflows/proxy/index.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { CUSTOM_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import { freshProxyStatus, monitorHeartbeat } from '../../client/health.ts';
import {
  connectClient,
  connectWorker,
  INDEXED_VALUE_TYPE_NAMES,
  installTestRuntime,
  pollUntil,
  testServerPath,
  uniqueId,
  withTimeout,
  WORKFLOWS_PATH,
} from './temporal.ts';

export const HOUR_MS = 60 * 60 * 1000;
/** The health interval the tests give proxies: long, so nothing happens between `step`s. */
export const INTERVAL_MS = HOUR_MS;
/** Bound on any single wait of a test (real time). */
export const WAIT_MS = 15_000;
/** Bound on one test (real time). */
export const TEST_TIMEOUT_MS = 90_000;
/** Bound on a test's body inside its worker (real time), under the test's own timeout. */
const BODY_TIMEOUT_MS = 60_000;

/** History event types used here (`temporal.api.enums.v1.EventType`). */
const EventType = {
  WORKFLOW_TASK_SCHEDULED: 5,
  WORKFLOW_TASK_STARTED: 6,
  WORKFLOW_TASK_COMPLETED: 7,
  WORKFLOW_TASK_FAILED: 9,
  TIMER_STARTED: 17,
} as const;
const WORKFLOW_TASK_EVENTS: readonly number[] = [
  EventType.WORKFLOW_TASK_SCHEDULED,
  EventType.WORKFLOW_TASK_STARTED,
  EventType.WORKFLOW_TASK_COMPLETED,
];

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

// ---- the environment ---------------------------------------------------------------------------

/**
 * A test file's workflow bundle (built once) and the time-skipping server of the test running
 * (`env`, set by {@link withWorker}). Each test gets a server of its own: the test server's
 * time-skipping lock is shared by everything on it, and a workflow terminated with a task
 * outstanding leaks its share of the lock (the server's lock log shows it), after which every
 * `env.sleep` runs at wall speed; a fresh server per test (about a second) rules that out.
 */
export class Env {
  /** Worker plugins the test worker runs with (the bundle must have been built with the same). */
  plugins: WorkerOptions['plugins'];
  private loaded: WorkflowBundleWithSourceMap | undefined;
  private current: TestWorkflowEnvironment | undefined;
  get bundle(): WorkflowBundleWithSourceMap {
    if (this.loaded === undefined) throw new Error('no workflow bundle: call load() first (fileEnv does)');
    return this.loaded;
  }
  get env(): TestWorkflowEnvironment {
    if (this.current === undefined) throw new Error('no test server: call this inside withWorker');
    return this.current;
  }
  /** Bundles the workflows (once for a test file). */
  async load(): Promise<void> {
    installTestRuntime();
    this.loaded = await withTimeout(
      bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger }),
      60_000,
      'bundle the workflows',
    );
  }
  /** Starts the test's server (installed by scripts/temporal, never downloaded). */
  async open(): Promise<TestWorkflowEnvironment> {
    const path = await testServerPath();
    const env = await withTimeout(
      TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } }),
      30_000,
      `start the time-skipping test server ${path}`,
    );
    await registerSearchAttributes(env);
    this.current = env;
    return env;
  }
  async close(): Promise<void> {
    const env = this.current;
    this.current = undefined;
    await env?.teardown();
  }
}

/**
 * The test file's Env: the workflows are bundled before its first test and the server of the
 * last test is closed after them (node:test's before and after hooks of the file).
 */
export function fileEnv(): Env {
  const e = new Env();
  before(() => e.load());
  after(() => e.close());
  return e;
}

/**
 * The time-skipping server knows no custom search attributes: an upsert of `ProxyState` fails the
 * workflow task ("search attribute ProxyState is not defined"). It does implement the operator
 * service's AddSearchAttributes (not List), so the project's list is registered here, as
 * client/search-attributes.ts registers it on the dev server.
 */
async function registerSearchAttributes(env: TestWorkflowEnvironment): Promise<void> {
  const typeOf = Object.fromEntries(Object.entries(INDEXED_VALUE_TYPE_NAMES).map(([n, kind]) => [kind, Number(n)]));
  const searchAttributes = Object.fromEntries(
    Object.entries(CUSTOM_SEARCH_ATTRIBUTES).map(([name, kind]) => [name, typeOf[kind]!]),
  );
  await env.connection.operatorService.addSearchAttributes({ namespace: env.namespace ?? 'default', searchAttributes });
}

export const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

export interface DevServerParts {
  client: Client;
  connection: NativeConnection;
  bundle: WorkflowBundleWithSourceMap;
}

/**
 * For the integration tests that run the real workflows on the dev server: a client, a worker
 * connection and the workflows bundled, made before the suite's tests and closed after them
 * (read them inside the tests).
 */
export function devServerSuite(): DevServerParts {
  const parts = {} as DevServerParts;
  before(async () => {
    installTestRuntime();
    parts.client = await connectClient();
    parts.connection = await connectWorker();
    parts.bundle = await withTimeout(
      bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger }),
      60_000,
      'bundle the workflows',
    );
  });
  after(async () => {
    await parts.connection?.close();
    await parts.client?.connection.close();
  });
  return parts;
}

/**
 * Runs `fn` on a fresh time-skipping server with a worker that serves the workflows and
 * `activities`. Every workflow the test started (`started`) is terminated afterwards if still
 * open, then the server is stopped.
 */
export async function withWorker<T>(
  e: Env,
  activities: object,
  fn: (taskQueue: string) => Promise<T>,
  started: WorkflowHandle[] = [],
): Promise<T> {
  const env = await e.open();
  try {
    const taskQueue = uniqueId('wf-tq');
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      workflowBundle: e.bundle,
      activities,
      plugins: e.plugins,
      // Cancellation reaches an activity only through a heartbeat's response: send them at once.
      defaultHeartbeatThrottleInterval: 50,
      maxHeartbeatThrottleInterval: 100,
      shutdownGraceTime: 2_000,
    });
    return await worker.runUntil(async () => {
      try {
        return await withTimeout(fn(taskQueue), BODY_TIMEOUT_MS, 'the test body');
      } finally {
        // While the worker still polls, so nothing of this test is left half-done.
        for (const h of started) await h.terminate('test over').catch(() => undefined);
      }
    });
  } finally {
    await e.close();
  }
}

// ---- fixtures ----------------------------------------------------------------------------------

export const ENTRY = 'e1';
export const IMAGE_KEY = 'img';
export const GiB = 1024 ** 3;

export interface ProxyOverrides {
  timeouts?: Partial<ResolvedProxy['timeouts']>;
  health?: Partial<ResolvedProxy['health']>;
}

/** What the fake resolveProxy returns for `spec`: two hosts of weight 1, an hour-long health interval. */
export function resolvedProxy(spec: Pick<ProxySpec, 'name' | 'imageKey'>, over: ProxyOverrides = {}): ResolvedProxy {
  return {
    ownerUid: 'owner-test',
    name: spec.name,
    entry: ENTRY,
    imageKey: spec.imageKey,
    hosts: [
      { name: 'h1', weight: 1 },
      { name: 'h2', weight: 1 },
    ],
    vm: { vcpus: 1, memoryMiB: 512, diskGiB: 4 },
    squid: { port: 3128, allowedClientCidrs: ['10.0.0.0/8'] },
    timeouts: { rpcMs: 30_000, bootMs: 300_000, shutdownGraceMs: 10_000, downloadTotalMs: 600_000, ...over.timeouts },
    health: {
      target: 'example.com:443',
      intervalMs: INTERVAL_MS,
      probeTimeoutMs: 5_000,
      healthyAfter: 2,
      unhealthyAfter: 3,
      addressGracePolls: 2,
      maxRecreations: 2,
      ...over.health,
    },
  };
}

/** h1 and h2, both reachable with room; h1 already holds 3 of our proxies, so placement picks h2. */
export function roomySurvey(): HostSurvey[] {
  return [
    { entry: ENTRY, host: 'h1', weight: 1, reachable: true, poolAvailableBytes: 50 * GiB, proxies: 3 },
    { entry: ENTRY, host: 'h2', weight: 1, reachable: true, poolAvailableBytes: 80 * GiB, proxies: 0 },
  ];
}

/** The same hosts, now h2 is the loaded one: placement would pick h1. */
export function h1Survey(): HostSurvey[] {
  return [
    { entry: ENTRY, host: 'h1', weight: 1, reachable: true, poolAvailableBytes: 80 * GiB, proxies: 0 },
    { entry: ENTRY, host: 'h2', weight: 1, reachable: true, poolAvailableBytes: 50 * GiB, proxies: 3 },
  ];
}

/** h1 and h2 reachable, both pools nearly full. */
export function fullSurvey(): HostSurvey[] {
  return [
    { entry: ENTRY, host: 'h1', weight: 1, reachable: true, poolAvailableBytes: 10 * 1024 ** 2, proxies: 3 },
    { entry: ENTRY, host: 'h2', weight: 1, reachable: true, poolAvailableBytes: 20 * 1024 ** 2, proxies: 3 },
  ];
}

export const BASE: EnsuredBase = {
  volumeName: `base-${ENTRY}-${IMAGE_KEY}.qcow2`,
  path: `/var/lib/libvirt/images/base-${ENTRY}-${IMAGE_KEY}.qcow2`,
  format: 'qcow2',
  sizeBytes: 1024,
  sha256: 'a'.repeat(64),
  cached: false,
};

/** An activity failure as activities/errors.ts makes it: type = code, details[0] = {kind, code}. */
export function failure(code: string, kind: 'Transient' | 'Permanent' | 'NotFound', message: string): Error {
  return ApplicationFailure.create({
    message,
    type: code,
    nonRetryable: kind !== 'Transient',
    details: [{ kind, code }],
  });
}

/** The failure createProxyVm gives for a full pool: KVM2_INSUFFICIENT_CAPACITY, Transient. */
export function capacityError(): Error {
  return toFailure(new InsufficientCapacity('default', 2 * 1024 ** 3, 1024 ** 2));
}

// ---- the fake activities -----------------------------------------------------------------------

type Fn<I, O> = (input: I, call: number) => O | Promise<O>;

/** A promise a test resolves later; `wait` also ends (rejecting) when the activity is cancelled. */
export class Gate {
  private release!: () => void;
  readonly opened: Promise<void>;
  constructor() {
    this.opened = new Promise((resolve) => {
      this.release = resolve;
    });
  }
  open(): void {
    this.release();
  }
}

/**
 * Waits for `gate` inside an activity, heartbeating so a cancellation reaches it; rejects with
 * the cancellation when the activity is cancelled (as a real activity's AbortSignal would).
 */
export async function held(gate: Gate, onCancel?: () => void): Promise<void> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 20);
  try {
    ctx.heartbeat();
    await Promise.race([
      gate.opened,
      ctx.cancelled.catch((err: unknown) => {
        onCancel?.();
        throw err;
      }),
    ]);
  } finally {
    clearInterval(beat);
  }
}

export interface CallRecord {
  activity: string;
  input: unknown;
  /** Server time the attempt was scheduled (ms). */
  scheduledMs: number;
  attempt: number;
}

/** Scripted fakes of every activity the workflows call, with a log of each call. */
export class Fakes {
  readonly calls: CallRecord[] = [];
  /** The task queue image workflows are started on (as the real joinImage does); set by the test. */
  taskQueue = '';
  private readonly envs: Env;
  constructor(envs: Env) {
    this.envs = envs;
  }

  resolve: Fn<ProxySpec & { ownerUid?: string }, ResolvedProxy> = (spec) => resolvedProxy(spec);
  survey: Fn<{ entry: string }, HostSurvey[]> = () => roomySurvey();
  /** A base already in the pool (null: none, join the image workflow). */
  findBase: Fn<ImageWorkflowInput, EnsuredBase | null> = () => null;
  /** What joinImage finds in the pool after joining (null: not there yet, wait for imageReady). */
  joinFinds: Fn<ImageWorkflowInput, EnsuredBase | null> = () => null;
  ensureBase: Fn<ImageWorkflowInput & { workflowId: string }, EnsuredBase> = () => BASE;
  create: Fn<PlacedProxy & { base: EnsuredBase; createdAt: string }, CreatedProxy> = (input) => created(input);
  read: Fn<PlacedProxy, VmReading> = () => ({ state: 'Running', ip: '10.0.0.5', source: 'lease' });
  probe: Fn<PlacedProxy & { ip: string; readExitIp?: boolean }, ProbeOutcome> = () => ({ ok: true, latencyMs: 12 });
  /** The exit-IP changes the fake monitor reported (activities/monitor.ts MonitorIo.exitIpChanged). */
  readonly exitIpChanges: { from?: string; to: string }[] = [];
  delete: Fn<PlacedProxy, DeletedProxy> = () => ({ domain: 'deleted', overlay: 'deleted', seed: 'deleted' });
  consoleTail: Fn<PlacedProxy, string[]> = () => ['[  OK  ] Reached target Cloud-init', 'login:'];
  resize: Fn<PlacedProxy, ResizedProxy> = () => {
    throw new Error('resizeProxyVm is not scripted in this test');
  };
  hosts: Fn<void, { entry: string; host: string }[]> = () => [
    { entry: ENTRY, host: 'h1' },
    { entry: ENTRY, host: 'h2' },
  ];
  marked: Fn<{ entry: string; host: string }, ListedProxy[]> = () => [];
  open: Fn<{ entry: string; name: string }, boolean> = () => false;
  deleteOrphan: Fn<{ entry: string; host: string; name: string }, DeletedProxy> = () => ({
    domain: 'deleted',
    overlay: 'deleted',
    seed: 'deleted',
  });

  /** Waits the fake monitor began (each poll that did not end the activity ends in one). */
  monitorWaits = 0;
  /** Ticks of the test: each ends one wait of the fake monitor (one poll). */
  ticks = 0;
  /** The fake monitor's waits end on the test's ticks only, never on their own (a test that steps every poll). */
  ticksOnly = false;
  /** The poll count of the fake monitor's last heartbeat. */
  lastBeatPolls = -1;
  /** The next wait of the monitor hangs without heartbeats, as on a worker that died, until this opens. */
  freezeNextWait: Gate | undefined;

  /**
   * The monitor activity: the real loop (activities/monitor.ts runMonitor) over the fake read and
   * probe; a wait of one interval ends on the test's tick (monitorStep), or after the interval in
   * real time when it is short.
   */
  private monitor(): (input: MonitorInput & { waitFirst?: boolean }) => Promise<unknown> {
    const read = this.record('readProxyVm', () => this.read);
    const probe = this.record('probeProxy', () => this.probe);
    return async (input) => {
      const ctx = Context.current();
      this.calls.push({
        activity: 'monitorProxy',
        input,
        scheduledMs: ctx.info.currentAttemptScheduledTimestampMs,
        attempt: ctx.info.attempt,
      });
      const now = () => Date.now();
      let last: MonitorDetails | undefined;
      const io: MonitorIo = {
        read: () => read({ proxy: input.proxy, host: input.host }),
        probe: (ip, readExitIp) => probe({ proxy: input.proxy, host: input.host, ip, readExitIp }),
        exitIpChanged: (change) => this.exitIpChanges.push(change),
        now,
        wait: async (ms) => {
          const frozen = this.freezeNextWait;
          this.freezeNextWait = undefined;
          if (frozen !== undefined) {
            // No heartbeat, no result: the server sees a dead worker. (Cancellation ends it, for the worker's shutdown.)
            await Promise.race([frozen.opened, ctx.cancelled]);
            throw new Error('this attempt belonged to a worker that died');
          }
          this.monitorWaits += 1;
          // The test server does not skip time while an activity runs: a poll is a tick of the test
          // (or, for a short interval, the interval in real time).
          const seen = this.ticks;
          const until = Date.now() + (this.ticksOnly ? TEST_TIMEOUT_MS : Math.min(ms, TEST_TIMEOUT_MS));
          while (this.ticks === seen && Date.now() < until) {
            ctx.heartbeat(last);
            await ctx.sleep(10);
          }
        },
        heartbeat: (d) => {
          last = d;
          this.lastBeatPolls = d.state.polls;
          ctx.heartbeat(d);
        },
        resumed: () => (ctx.info.attempt > 1 ? resumedDetails(input, ctx.info.heartbeatDetails) : undefined),
      };
      return runMonitor(input, io);
    };
  }

  /** Calls of one activity, in order. */
  of<I = unknown>(activity: string): I[] {
    return this.calls.filter((c) => c.activity === activity).map((c) => c.input as I);
  }
  count(activity: string): number {
    return this.of(activity).length;
  }
  /** The activity names in call order. */
  sequence(): string[] {
    return this.calls.map((c) => c.activity);
  }

  private record<I, O>(activity: string, fn: () => Fn<I, O>): (input: I) => Promise<O> {
    return async (input: I) => {
      const n = this.count(activity);
      const info = Context.current().info;
      this.calls.push({
        activity,
        input,
        scheduledMs: info.currentAttemptScheduledTimestampMs,
        attempt: info.attempt,
      });
      return fn()(input, n);
    };
  }

  /** The fake activity set for a worker: names and signatures of createActivities (those the tests use). */
  activities(): Partial<Activities> {
    const envs = this.envs;
    return {
      resolveProxy: this.record('resolveProxy', () => this.resolve),
      surveyHosts: this.record('surveyHosts', () => this.survey),
      // As the real joinImage: signal-with-start of the one ensure-image workflow of this base, then a
      // look in the pool (joinFinds).
      joinImage: this.record(
        'joinImage',
        () => async (input: { workflowId: string; image: ImageWorkflowInput; waiter: string }, call: number) => {
          const join: ImageJoin = { waiter: input.waiter };
          await envs.env.client.workflow.signalWithStart(IMAGE_WORKFLOW_TYPE, {
            workflowId: input.workflowId,
            taskQueue: this.taskQueue,
            args: [input.image],
            signal: imageJoinSignal,
            signalArgs: [join],
          });
          return this.joinFinds(input.image, call);
        },
      ),
      findBaseImage: this.record('findBaseImage', () => this.findBase),
      ensureBaseImage: this.record('ensureBaseImage', () => this.ensureBase),
      createProxyVm: this.record('createProxyVm', () => this.create),
      readProxyVm: this.record('readProxyVm', () => this.read),
      probeProxy: this.record('probeProxy', () => this.probe),
      monitorProxy: this.monitor() as Activities['monitorProxy'],
      deleteProxyVm: this.record('deleteProxyVm', () => this.delete),
      resizeProxyVm: this.record('resizeProxyVm', () => this.resize),
      readConsoleTail: this.record('readConsoleTail', () => this.consoleTail),
      listHosts: this.record('listHosts', () => this.hosts),
      listMarkedDomains: this.record('listMarkedDomains', () => this.marked),
      proxyWorkflowOpen: this.record('proxyWorkflowOpen', () => this.open),
      deleteOrphan: this.record('deleteOrphan', () => this.deleteOrphan),
    };
  }

  /** Tells the image workflow's waiters of upload progress, as the real ensureBaseImage does. */
  async progress(imageWorkflowId: string, bytes: number, totalBytes: number): Promise<void> {
    const { client } = this.envs.env;
    const status = await client.workflow.getHandle(imageWorkflowId).query(imageStatusQuery);
    const p: ImageProgressSignal = { workflowId: imageWorkflowId, bytes, totalBytes, bytesPerSecond: 1000 };
    for (const w of status.waiters) await client.workflow.getHandle(w).signal(imageProgressSignal, p);
  }
}

export function created(input: PlacedProxy): CreatedProxy {
  return {
    domain: `ep-${input.proxy.entry}-${input.proxy.name}`,
    uuid: '00000000-0000-4000-8000-000000000001',
    mac: '52:54:00:00:00:01',
    overlayPath: `/pool/${input.proxy.name}.qcow2`,
    seedPath: `/pool/${input.proxy.name}-seed.iso`,
    defined: true,
    started: true,
  };
}

// ---- driving and observing a proxy -------------------------------------------------------------

export function proxyId(name: string): string {
  return proxyWorkflowId(ENTRY, name);
}

export function uniqueName(prefix: string): string {
  return uniqueId(prefix)
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-');
}

export async function status(handle: WorkflowHandle): Promise<ProxyStatus> {
  return handle.query(proxyStatusQuery);
}

/** Queries `status` until `pred` holds (bounded); returns that status. */
export async function statusWhen(
  handle: WorkflowHandle,
  pred: (s: ProxyStatus) => boolean,
  what: string,
): Promise<ProxyStatus> {
  return pollUntil(
    async () => {
      const s = await status(handle).catch(() => undefined);
      return s !== undefined && pred(s) ? s : undefined;
    },
    { timeoutMs: WAIT_MS, intervalMs: 25, what },
  );
}

/** The history's events of the current run. */
export async function events(handle: WorkflowHandle): Promise<HistoryEvent[]> {
  const history = await handle.fetchHistory();
  return history.events ?? [];
}

/** Timers the run has started so far (every health poll ends by starting one). */
export async function timersStarted(handle: WorkflowHandle): Promise<number> {
  return (await events(handle)).filter((e) => Number(e.eventType) === EventType.TIMER_STARTED).length;
}

/** The durations (ms of workflow time) of the timers the run has started, in order. */
export async function timerDurationsMs(handle: WorkflowHandle): Promise<number[]> {
  return (await events(handle))
    .filter((e) => Number(e.eventType) === EventType.TIMER_STARTED)
    .map((e) => {
      const d = e.timerStartedEventAttributes?.startToFireTimeout;
      return Number(d?.seconds ?? 0) * 1000 + Math.round(Number(d?.nanos ?? 0) / 1e6);
    });
}

/** A health loop waiting for its next poll (not a wait on an image or a backoff). */
const inHealthLoop = (s: ProxyStatus): boolean => s.state === 'Running';

/**
 * Waits until the run is idle in a timer (its last event is TimerStarted) and its status
 * satisfies `pred` (default: Running, i.e. the health loop's wait). Returns the timer count.
 */
export async function idle(handle: WorkflowHandle, what: string, pred = inHealthLoop): Promise<number> {
  let seen = 'nothing yet';
  try {
    return await pollUntil(
      async () => {
        const now = await idleNow(handle, pred);
        seen = now.seen;
        return now.timers;
      },
      { timeoutMs: WAIT_MS, intervalMs: 25, what: `${what} (the workflow idle in a timer)` },
    );
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}; saw ${seen}`, { cause: err });
  }
}

/** One look: the timer count if the run is idle in a timer with `pred` holding, else undefined. */
export async function idleNow(
  handle: WorkflowHandle,
  pred = inHealthLoop,
): Promise<{ timers: number | undefined; seen: string }> {
  const ev = await events(handle);
  // Workflow tasks that only answer queries or handle no-op activations may follow the timer.
  const last = ev.filter((e) => !WORKFLOW_TASK_EVENTS.includes(Number(e.eventType))).at(-1);
  const s = await status(handle);
  const seen = `last event type ${last?.eventType} of ${ev.length}, state ${s.state}`;
  if (Number(last?.eventType) !== EventType.TIMER_STARTED || !pred(s)) return { timers: undefined, seen };
  return { timers: ev.filter((e) => Number(e.eventType) === EventType.TIMER_STARTED).length, seen };
}

/**
 * Skips `ms` of server time and waits until the workflow is idle again in a later timer with its
 * status satisfying `pred` (default: back in the health loop): one health poll, or one poll and
 * the recreation it started.
 */
export async function step(
  { env }: Env,
  handle: WorkflowHandle,
  what: string,
  ms = INTERVAL_MS,
  pred = inHealthLoop,
): Promise<ProxyStatus> {
  const before = await idle(handle, `before ${what}`, () => true);
  await env.sleep(ms);
  await pollUntil(async () => ((await idle(handle, what, pred)) > before ? true : undefined), {
    timeoutMs: WAIT_MS,
    intervalMs: 25,
    what,
  });
  return status(handle);
}

/** Workflow task failures in the run's history (a workflow that throws a non-failure error). */
export async function workflowTaskFailures(handle: WorkflowHandle): Promise<string[]> {
  return (await events(handle))
    .filter((e) => Number(e.eventType) === EventType.WORKFLOW_TASK_FAILED)
    .map((e) => {
      const a = e.workflowTaskFailedEventAttributes;
      return a?.failure?.message ?? `workflow task failed (cause ${String(a?.cause)})`;
    });
}

/** The ProxyState values the run upserted, in order (from the history's upsert events). */
export async function upsertedStates(handle: WorkflowHandle): Promise<string[]> {
  const out: string[] = [];
  for (const e of await events(handle)) {
    const fields = e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
    const payload = fields?.['ProxyState'];
    if (payload?.data) out.push(JSON.parse(Buffer.from(payload.data).toString('utf8')) as string);
  }
  return out;
}

/** One memo the run published (an upsert in its history): the fields upserted and the event's server time. */
export interface PublishedMemo {
  /** Server time of the upsert (ms; the time-skipping server's clock, skipped time included). */
  atMs: number;
  memo: Record<string, unknown>;
}

/**
 * Every memo upsert of the run, in order, from its history: what the workflow published, each one,
 * however briefly it held (a check over these cannot miss a dip that a query sampled every few
 * milliseconds would). Fields are JSON payloads (the default converter's).
 */
export async function publishedMemos(handle: WorkflowHandle): Promise<PublishedMemo[]> {
  const out: PublishedMemo[] = [];
  for (const e of await events(handle)) {
    const fields = e.workflowPropertiesModifiedEventAttributes?.upsertedMemo?.fields;
    if (fields === undefined || fields === null) continue;
    const memo: Record<string, unknown> = {};
    for (const [k, p] of Object.entries(fields)) {
      if (p?.data) memo[k] = JSON.parse(Buffer.from(p.data).toString('utf8')) as unknown;
    }
    const t = e.eventTime;
    out.push({ atMs: Number(t?.seconds ?? 0) * 1000 + Math.round(Number(t?.nanos ?? 0) / 1e6), memo });
  }
  return out;
}

/** Consecutive duplicates removed: the states as a client watching the search attribute saw them. */
export function distinctStates(xs: string[]): string[] {
  return xs.filter((x, i) => i === 0 || xs[i - 1] !== x);
}

// ---- starting proxies --------------------------------------------------------------------------

export interface Started {
  handle: WorkflowHandleWithFirstExecutionRunId<typeof proxyLifecycle>;
  name: string;
  imageKey: string;
}

/**
 * Starts a proxy workflow with a unique name and a unique image key (image workflow IDs are fixed
 * per host, entry and key, so tests must not share one). Its image workflows and itself are added
 * to `started` for termination when the test ends.
 */
export async function startProxy(
  { env }: Env,
  taskQueue: string,
  started: WorkflowHandle[],
  extra: Partial<ProxyWorkflowInput> = {},
): Promise<Started> {
  const name = uniqueName('px');
  const imageKey = uniqueName('img');
  // The tests of the older health loop (a timer per poll) run it; the monitor's tests ask for theirs.
  const input: ProxyWorkflowInput = { name, entry: ENTRY, imageKey, healthLoop: 'poll', ...extra };
  const handle = await env.client.workflow.start<typeof proxyLifecycle>(PROXY_WORKFLOW_TYPE, {
    taskQueue,
    workflowId: proxyId(input.name),
    args: [input],
  });
  started.push(handle);
  for (const host of ['h1', 'h2']) started.push(env.client.workflow.getHandle(imageWorkflowId(host, ENTRY, imageKey)));
  return { handle, name: input.name, imageKey };
}

/**
 * Runs `fn` with a worker serving `f`'s activities (`f.taskQueue` set to its queue) and one proxy
 * started there with `extra` in its input; `started` collects what the test starts, and all of it
 * is terminated afterwards.
 */
export async function withProxy<T>(
  e: Env,
  f: Fakes,
  fn: (p: Started & { taskQueue: string; started: WorkflowHandle[] }) => Promise<T>,
  extra: Partial<ProxyWorkflowInput> = {},
): Promise<T> {
  const started: WorkflowHandle[] = [];
  return withWorker(
    e,
    f.activities(),
    async (taskQueue) => {
      f.taskQueue = taskQueue;
      const proxy = await startProxy(e, taskQueue, started, extra);
      return fn({ ...proxy, taskQueue, started });
    },
    started,
  );
}

/** The failure a workflow ended with (rejects if it completed). */
export async function failureOf(p: Promise<unknown>): Promise<WorkflowFailedError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof WorkflowFailedError) return err;
    throw err;
  }
  throw new Error('the workflow completed; a failure was expected');
}

/** The project's search attributes the server holds for the workflow, as plain values (not Temporal's own). */
export async function searchAttributes(handle: WorkflowHandle): Promise<Record<string, unknown>> {
  const d = await handle.describe();
  const out: Record<string, unknown> = {};
  for (const pair of d.typedSearchAttributes.getAll()) {
    if (Object.hasOwn(CUSTOM_SEARCH_ATTRIBUTES, pair.key.name)) out[pair.key.name] = pair.value;
  }
  return out;
}

/** Skips server time in `stepMs` slices until `pred` holds (bounded in real time). */
export async function skipUntil<T>(
  { env }: Env,
  probe: () => Promise<T | undefined>,
  what: string,
  stepMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${WAIT_MS} ms skipping time until ${what}`);
    await env.sleep(stepMs);
  }
}

/** The three conditions of a status, as a list. */
export function conditionsOf(s: ProxyStatus): Condition[] {
  return [s.conditions.VmRunning, s.conditions.AddressAssigned, s.conditions.Healthy];
}

// ---- the health monitor ------------------------------------------------------------------------

/** Waits until the fake monitor is waiting for its next poll more often than `before` times (bounded). */
export async function monitorWaiting(f: Fakes, before: number, what: string): Promise<void> {
  await pollUntil(() => Promise.resolve(f.monitorWaits > before ? true : undefined), {
    timeoutMs: WAIT_MS,
    intervalMs: 10,
    what: `${what} (the monitor waiting for its next poll)`,
  });
}

/**
 * One poll of the monitor loop: ends the monitor's wait (a tick), waits until the monitor waits again (the same
 * activity after a quiet poll, or the next one after a transition) and returns the fresh status.
 */
export async function monitorStep(_e: Env, f: Fakes, handle: WorkflowHandle, what: string): Promise<ProxyStatus> {
  const before = f.monitorWaits;
  f.ticks += 1;
  await monitorWaiting(f, before, what);
  await pollUntil(
    async () => {
      const beat = await monitorHeartbeat(handle);
      return (beat?.details as MonitorDetails | undefined)?.state.polls === f.lastBeatPolls ? true : undefined;
    },
    { timeoutMs: WAIT_MS, intervalMs: 10, what: `${what} (its heartbeat at the server)` },
  );
  return freshProxyStatus(handle);
}
