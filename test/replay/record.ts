/**
 * Re-records the replay histories under test/replay/ from real runs: the dev server
 * (`scripts/temporal up`, or TEMPORAL_ADDRESS), the namespaced test hosts (`test/hosts/testhost up`),
 * a loopback image mirror, and an in-process worker configured as workers/worker.ts configures
 * its own (the real workflows and activities, the OpenTelemetry plugin).
 *
 *   node test/replay/record.ts [scenario ...]     default: every scenario
 *
 * Scenarios: create-delete, capacity-wait, failed-create, cancel-mid-upload, monitor-create-delete
 * (the health monitor's loop), join-finds-base (a join that finds the base in the pool),
 * carried-create-delete (a run that began from carried state: its predecessor continued as new at
 * a checkpoint). Each writes
 * `<name>.sdk-<version of @temporalio/workflow>.json`, the history as the Temporal CLI prints it
 * (`temporal workflow show --output json`, the form `historyFromJSON` reads and the Web UI
 * downloads); the workflow ID is in its first event. Runs are kept short (a few polls of Running,
 * one capacity re-check) so the files stay small. Everything a scenario creates on the hosts is
 * removed at its end. test/unit/replay.test.ts replays every file.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { format, resolveConfig } from 'prettier';
import { WorkflowFailedError } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { createLogger } from '../../lib/log/logger.ts';
import type { ProvidersConfig } from '../../lib/config/index.ts';
import { imageWorkflowId } from '../../contracts/image.ts';
import {
  PROXY_DELETE_UPDATE,
  PROXY_STATUS_QUERY,
  PROXY_WORKFLOW_TYPE,
  proxyWorkflowId,
} from '../../contracts/proxy.ts';
import type { ProxyOutcome, ProxyStatus } from '../../contracts/proxy.ts';
import { setupTracing } from '../../runtime/telemetry.ts';
import type { Activities } from '../../activities/index.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import {
  PROJECT_ROOT,
  TEMPORAL_ADDRESS,
  TEMPORAL_NAMESPACE,
  connectClient,
  connectWorker,
  installTestRuntime,
  pollUntil,
  uniqueId,
  withTimeout,
} from '../support/temporal.ts';
import { domainsOf, hostTarget, loadTestHosts, removeEntryLeftovers, volumesOf } from '../support/testhosts.ts';
import { plantVerifiedBase } from '../support/verified-base.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const OUT_DIR = fileURLToPath(new URL('./', import.meta.url));
const SDK_VERSION = (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string })
  .version;
const run = Date.now().toString(36);
const SCENARIOS = [
  'create-delete',
  'capacity-wait',
  'failed-create',
  'cancel-mid-upload',
  'monitor-create-delete',
  'join-finds-base',
  'carried-create-delete',
] as const;
type Scenario = (typeof SCENARIOS)[number];

const log = createLogger({ name: 'record', level: 'warn', stream: 'stderr' });
const tracing = setupTracing(log.child({ component: 'otel' }));

interface Ctx {
  client: Client;
  connection: NativeConnection;
  mirror: ImageMirror;
  hosts: TestHost[];
  image: Buffer;
}

/**
 * Removes whatever the scenario of `entry` left on `host`: the base and marker it published, and,
 * after a failed recording, any domain or volume of its proxies.
 */
async function cleanHost(host: TestHost, entry: string): Promise<void> {
  const left = await removeEntryLeftovers(host, entry);
  if (left.length > 0) throw new Error(`could not remove from ${host.name}: ${left.join(', ')}`);
}

/**
 * Writes the closed run of `workflowId` as `<name>.sdk-<version>.json` in the CLI's JSON form, the
 * same form the Web UI downloads, so a history from a production incident can be dropped in too.
 */
async function save(name: string, workflowId: string, what: string): Promise<void> {
  const { stdout: cli } = await pexec(join(PROJECT_ROOT, 'scripts/temporal'), ['path'], { timeout: 30_000 });
  const { stdout } = await pexec(
    cli.trim(),
    [
      ...['workflow', 'show', '--workflow-id', workflowId, '--output', 'json'],
      ...['--address', TEMPORAL_ADDRESS, '--namespace', TEMPORAL_NAMESPACE],
      ...['--disable-config-file', '--disable-config-env'],
    ],
    { timeout: 30_000, maxBuffer: 64 * 1024 * 1024 },
  );
  const history = JSON.parse(stdout) as { events: { eventType: string }[] };
  assert.match(history.events.at(-1)?.eventType ?? '', /WORKFLOW_EXECUTION_(COMPLETED|FAILED|CANCELED|TERMINATED)/);
  const file = join(OUT_DIR, `${name}.sdk-${SDK_VERSION}.json`);
  // Formatted as the project's `prettier --check .` wants it.
  const text = await format(JSON.stringify(history), { ...(await resolveConfig(file)), filepath: file });
  await writeFile(file, text);
  process.stderr.write(`record: ${file}: ${what} (${history.events.length} events)\n`);
}

const waitState = (ctx: Ctx, handle: WorkflowHandle, state: string, timeoutMs: number): Promise<ProxyStatus> =>
  pollUntil(
    async () => {
      const st = await handle.query<ProxyStatus>(PROXY_STATUS_QUERY).catch(() => undefined);
      return st?.state === state ? st : undefined;
    },
    { timeoutMs, intervalMs: 250, what: `${handle.workflowId} ${state}` },
  );

async function withWorker<T>(
  ctx: Ctx,
  config: ProvidersConfig,
  taskQueue: string,
  fn: () => Promise<T>,
  activities?: (real: Activities) => Activities,
): Promise<T> {
  const worker: RunningWorker = await startFleetWorker(ctx.connection, ctx.client, config, taskQueue, {
    plugins: [tracing.plugin],
    activities,
  });
  try {
    return await fn();
  } finally {
    await withTimeout(worker.stop(), 30_000, 'the recording worker to stop');
  }
}

const startProxy = (
  ctx: Ctx,
  entry: string,
  name: string,
  taskQueue: string,
  imageKey: string,
  extra: Record<string, unknown> = {},
) =>
  ctx.client.workflow.start(PROXY_WORKFLOW_TYPE, {
    workflowId: proxyWorkflowId(entry, name),
    taskQueue,
    args: [{ name, entry, imageKey, ...extra }],
  });

/** create → Running (two polls) → delete → Deleted; also the ensure-image run that fetched the base. */
async function createDelete(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  const url = ctx.mirror.serve(`/${entry}/empty.qcow2`, ctx.image);
  const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { empty: { url } } });
  const taskQueue = uniqueId('record-cd');
  await withWorker(ctx, config, taskQueue, async () => {
    const handle = await startProxy(ctx, entry, 'p1', taskQueue, 'empty');
    await waitState(ctx, handle, 'Running', 120_000);
    await new Promise((resolve) => setTimeout(resolve, 2_500)); // a couple of health-loop polls
    await handle.executeUpdate(PROXY_DELETE_UPDATE);
    const outcome = (await withTimeout(handle.result(), 120_000, 'delete')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    await save('proxy-create-delete', handle.workflowId, 'create → Running → delete');
    await save(
      'image-ensure',
      imageWorkflowId(host.name, entry, 'empty'),
      'one cold base fetched, verified and published for one waiter',
    );
  });
}

/**
 * WaitingForCapacity and its exit: the first worker's only host is a closed port on 127.0.0.1, so
 * the survey finds no reachable host and the workflow sleeps; a worker with the real host then
 * serves the re-check, which places the proxy; it reaches Running and is deleted.
 */
async function capacityWait(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  const url = ctx.mirror.serve(`/${entry}/empty.qcow2`, ctx.image);
  const closedPort = await closedLoopbackPort();
  const dead = { ...host, address: '127.0.0.1', port: closedPort };
  const ownerUid = `uid-${run}`;
  const deadConfig = fleetConfig({ entry, ownerUid, hosts: [dead], images: { empty: { url } } });
  const liveConfig = fleetConfig({ entry, ownerUid, hosts: [host], images: { empty: { url } } });
  const taskQueue = uniqueId('record-cw');
  let handle: WorkflowHandle | undefined;
  await withWorker(ctx, deadConfig, taskQueue, async () => {
    handle = await startProxy(ctx, entry, 'w1', taskQueue, 'empty');
    const st = await waitState(ctx, handle, 'WaitingForCapacity', 60_000);
    process.stderr.write(`record: capacity wait: ${st.reason ?? ''}\n`);
  });
  await withWorker(ctx, liveConfig, taskQueue, async () => {
    // The backoff's first timer is 30 s; then the re-check finds the host.
    await waitState(ctx, handle!, 'Running', 180_000);
    await handle!.executeUpdate(PROXY_DELETE_UPDATE);
    const outcome = (await withTimeout(handle!.result(), 120_000, 'delete')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    await save(
      'proxy-capacity-wait',
      handle!.workflowId,
      'no reachable host → WaitingForCapacity → re-check finds one → Running → delete',
    );
  });
}

/**
 * A create that fails (non-retryable) after the overlay and the seed were made (the entry names a
 * network the host lacks): the compensation deletes what was made and the proxy ends Failed.
 */
async function failedCreate(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  const url = ctx.mirror.serve(`/${entry}/empty.qcow2`, ctx.image);
  const config = fleetConfig({
    entry,
    ownerUid: `uid-${run}`,
    hosts: [{ ...host, network: `nonet${run}` }],
    images: { empty: { url } },
  });
  const taskQueue = uniqueId('record-fc');
  await withWorker(ctx, config, taskQueue, async () => {
    const handle = await startProxy(ctx, entry, 'f1', taskQueue, 'empty');
    await assert.rejects(withTimeout(handle.result(), 120_000, 'the failed create'), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError, String(err));
      process.stderr.write(`record: failed create: ${err.cause?.message ?? ''}\n`);
      return true;
    });
    const st = await handle.query<ProxyStatus>(PROXY_STATUS_QUERY);
    assert.equal(st.state, 'Failed');
    assert.deepEqual(await domainsOf(host, entry), []);
    const left = (await volumesOf(host, entry)).filter((v) => !v.startsWith('base-'));
    assert.deepEqual(left, [], 'the compensation removed the overlay and the seed');
    await save(
      'proxy-failed-create',
      handle.workflowId,
      'create fails non-retryably after overlay and seed → compensation → Failed',
    );
  });
}

/** Cancel while the image upload stalls: the proxy ends Cancelled (Deleted), the image run is abandoned. */
async function cancelMidUpload(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  const path = `/${entry}/big.qcow2`;
  const big = Buffer.concat([ctx.image, Buffer.alloc(32 * 1024 * 1024, 7)]);
  const url = ctx.mirror.serve(path, big, { kind: 'stall', afterBytes: 4 * 1024 * 1024 });
  const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { big: { url } } });
  const taskQueue = uniqueId('record-cx');
  await withWorker(ctx, config, taskQueue, async () => {
    const handle = await startProxy(ctx, entry, 'x1', taskQueue, 'big');
    await pollUntil(
      async () =>
        ctx.mirror.sentBytes(path) >= 4 * 1024 * 1024 && (await volumesOf(host, entry)).length > 0 ? true : undefined,
      { timeoutMs: 60_000, what: 'the upload to be under way' },
    );
    await waitState(ctx, handle, 'Provisioning', 30_000);
    await handle.cancel();
    await assert.rejects(withTimeout(handle.result(), 90_000, 'the cancel'), WorkflowFailedError);
    const imageId = imageWorkflowId(host.name, entry, 'big');
    await withTimeout(ctx.client.workflow.getHandle(imageId).result(), 90_000, 'the image run to end');
    await pollUntil(async () => ((await volumesOf(host, entry)).length === 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the half-written base to be removed',
    });
    await save(
      'proxy-cancel-mid-upload',
      handle.workflowId,
      'cancelled while the base uploads → leave the image run → Deleted, ends Cancelled',
    );
    await save('image-abandoned', imageId, 'every waiter left mid-upload → abandoned');
  });
}

/** After a failed recording: terminates the scenario's runs that are still open (at most 20). */
async function terminateLeftovers(client: Client, host: TestHost, entry: string): Promise<void> {
  const query =
    `ExecutionStatus = "Running" AND (WorkflowId STARTS_WITH "proxy/${entry}/" OR ` +
    `WorkflowId STARTS_WITH "image/${host.name}/${entry}/")`;
  let n = 0;
  for await (const wf of client.workflow.list({ query, pageSize: 20 })) {
    if (++n > 20) break;
    await client.workflow
      .getHandle(wf.workflowId, wf.runId)
      .terminate('record.ts: the recording failed')
      .catch(() => undefined);
    process.stderr.write(`record: terminated ${wf.workflowId}\n`);
  }
}

/** A loopback port nothing listens on (bound, then closed). */
function closedLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * create → Running under the health monitor (the guest never gets an address: the monitor returns
 * on AddressAssigned False, the workflow publishes and starts the next monitor) → delete, which
 * cancels that monitor → Deleted.
 */
async function monitorCreateDelete(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  const url = ctx.mirror.serve(`/${entry}/empty.qcow2`, ctx.image);
  const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { empty: { url } } });
  const taskQueue = uniqueId('record-mcd');
  await withWorker(ctx, config, taskQueue, async () => {
    const handle = await startProxy(ctx, entry, 'p1', taskQueue, 'empty');
    await waitState(ctx, handle, 'Running', 120_000);
    await pollUntil(
      async () => {
        const st = await handle.query<ProxyStatus>(PROXY_STATUS_QUERY);
        return st.conditions.AddressAssigned.status === 'False' ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250, what: 'the monitor to return on the missing address' },
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // the next monitor under way
    await handle.executeUpdate(PROXY_DELETE_UPDATE);
    const outcome = (await withTimeout(handle.result(), 120_000, 'delete')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    await save('proxy-monitor-create-delete', handle.workflowId, 'create → Running (monitor) → delete');
  });
}

/**
 * The join that finds the base (patch `join-finds-base`): the entry's verified base is in the pool,
 * but the proxy's first look (findBaseImage) is made to miss, as it does when the upload completes
 * between that look and the join; the real joinImage then joins the ensure-image workflow, finds
 * the base in the pool, and the proxy creates at once → Running → delete. The only change to the
 * real activities is that miss.
 */
async function joinFindsBase(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  // The url plantVerifiedBase records in the marker: the image run finds the base cached, no fetch.
  const config = fleetConfig({
    entry,
    ownerUid: `uid-${run}`,
    hosts: [host],
    images: { empty: { url: `http://127.0.0.1/${entry}/empty.qcow2` } },
  });
  const links = new HostLinks(hostTarget(host));
  try {
    await plantVerifiedBase(links, host.pool, entry, 'empty');
  } finally {
    links.close();
  }
  const taskQueue = uniqueId('record-jf');
  const firstLookMisses = (real: Activities): Activities => ({ ...real, findBaseImage: () => Promise.resolve(null) });
  await withWorker(
    ctx,
    config,
    taskQueue,
    async () => {
      const handle = await startProxy(ctx, entry, 'j1', taskQueue, 'empty');
      await waitState(ctx, handle, 'Running', 120_000);
      const imageId = imageWorkflowId(host.name, entry, 'empty');
      await withTimeout(ctx.client.workflow.getHandle(imageId).result(), 90_000, 'the image run to end');
      await handle.executeUpdate(PROXY_DELETE_UPDATE);
      const outcome = (await withTimeout(handle.result(), 120_000, 'delete')) as ProxyOutcome;
      assert.equal(outcome.state, 'Deleted');
      await save(
        'proxy-join-finds-base',
        handle.workflowId,
        'the first look misses, the join finds the base → create at once → Running → delete',
      );
    },
    firstLookMisses,
  );
}

/**
 * A run that began from carried state: the proxy's monitor checkpoints after two polls, the run
 * continues as new with its status carried (Running, no new VM), the new run watches again →
 * delete → Deleted. The history saved is the new run's.
 */
async function carriedCreateDelete(ctx: Ctx, entry: string): Promise<void> {
  const host = ctx.hosts[0]!;
  const url = ctx.mirror.serve(`/${entry}/empty.qcow2`, ctx.image);
  const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { empty: { url } } });
  const taskQueue = uniqueId('record-ccd');
  await withWorker(ctx, config, taskQueue, async () => {
    const handle = await startProxy(ctx, entry, 'p1', taskQueue, 'empty', { continueAsNewAfterPolls: 2 });
    const first = handle.firstExecutionRunId;
    await pollUntil(
      async () => {
        const d = await ctx.client.workflow.getHandle(handle.workflowId).describe();
        return d.runId !== first ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500, what: 'the proxy run to continue as new at its checkpoint' },
    );
    const carried = ctx.client.workflow.getHandle(handle.workflowId);
    await waitState(ctx, carried, 'Running', 60_000);
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // the new run's watch under way
    await carried.executeUpdate(PROXY_DELETE_UPDATE);
    const outcome = (await withTimeout(carried.result(), 120_000, 'delete')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    // The saved run began from carried state (the runs continue as new every two polls: maybe not the second).
    const started = (await carried.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
    assert.ok(started?.continuedExecutionRunId, 'the saved run is a continued one');
    await save('proxy-carried', handle.workflowId, 'carried → Running (monitor) → delete');
  });
}

const RUNNERS: Record<Scenario, (ctx: Ctx, entry: string) => Promise<void>> = {
  'join-finds-base': joinFindsBase,
  'monitor-create-delete': monitorCreateDelete,
  'create-delete': (ctx, entry) => createDelete(ctx, entry),
  'carried-create-delete': carriedCreateDelete,
  'capacity-wait': capacityWait,
  'failed-create': failedCreate,
  'cancel-mid-upload': cancelMidUpload,
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  for (const w of wanted) {
    if (!(SCENARIOS as readonly string[]).includes(w)) {
      throw new Error(`unknown scenario ${JSON.stringify(w)}; known: ${SCENARIOS.join(', ')}`);
    }
  }
  const scenarios = (wanted.length > 0 ? wanted : SCENARIOS) as Scenario[];
  installTestRuntime();
  const hosts = loadTestHosts();
  const client = await connectClient();
  const connection = await connectWorker();
  const mirror = await ImageMirror.start();
  const tmp = await mkdtemp(join(tmpdir(), 'ep-record-'));
  try {
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const ctx: Ctx = { client, connection, mirror, hosts, image: await readFile(file) };
    for (const [i, s] of scenarios.entries()) {
      const t0 = performance.now();
      const entry = `rec${run}${i}`;
      try {
        await withTimeout(RUNNERS[s](ctx, entry), 600_000, `scenario ${s}`);
      } finally {
        await terminateLeftovers(client, hosts[0]!, entry);
        await cleanHost(hosts[0]!, entry);
      }
      process.stderr.write(`record: ${s} done in ${Math.round((performance.now() - t0) / 1000)} s\n`);
    }
  } finally {
    await mirror.close();
    await connection.close();
    await client.connection.close();
    await tracing.shutdown();
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
