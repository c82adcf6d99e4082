/**
 * Upload progress and a dead uploader, with real processes: two worker processes
 * (`workers/worker.ts`) on one task queue of the shared dev server, a test host over SSH, and a
 * loopback mirror that paces the image so that its upload lasts about 20 s. Proves:
 *  - while the upload runs, the ensure-image workflow's current details (what the Web UI shows,
 *    read through the SDK's metadata query) carry a progress sample never older than
 *    5 s + {@link READ_BOUND_MS}, and the waiting proxy's status shows the bytes moving at least
 *    that often;
 *  - the worker running the upload SIGKILLed: the server notices within the 10 s heartbeat
 *    timeout + {@link NOTICE_BOUND_MS}, the retry starts on the other worker within 10 s + the 2 s
 *    retry interval + {@link START_BOUND_MS}, and the proxy reaches Running with one domain, one
 *    base, one marker; delete leaves the base only.
 * The figures measured are printed on stderr (`# ...`).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { imageWorkflowId } from '../../contracts/image.ts';
import {
  PROXY_DELETE_UPDATE,
  PROXY_STATUS_QUERY,
  PROXY_WORKFLOW_TYPE,
  proxyWorkflowId,
} from '../../contracts/proxy.ts';
import type { ProxyOutcome, ProxyStatus } from '../../contracts/proxy.ts';
import { emptyQcow2 } from '../support/empty-image.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import type { WorkerProcess } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import { connectClient, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import { domainsOf, loadTestHosts, virsh, volumesOf } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const MiB = 1024 * 1024;
/** Progress is sent every 4 s; reading it back (a query through a worker) may take this long. */
const READ_BOUND_MS = 2_000;
/** The server's heartbeat-timeout timer and our 250 ms polls of `describe`. */
const NOTICE_BOUND_MS = 2_000;
/** Backoff jitter, the retry's dispatch to the surviving worker, our polls. */
const START_BOUND_MS = 3_000;
const HEARTBEAT_TIMEOUT_MS = 10_000;
const RETRY_INTERVAL_MS = 2_000;

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;

describe('image upload progress and a dead uploader', { timeout: 300_000 }, () => {
  let mirror: ImageMirror;
  let host: TestHost;
  let image: Buffer;
  let tmp: string;
  let client: Client;
  const processes: WorkerProcess[] = [];
  const leftovers: string[] = [];

  before(async () => {
    host = loadTestHosts()[0]!;
    mirror = await ImageMirror.start();
    client = await connectClient();
    tmp = await mkdtemp(join(tmpdir(), 'ep-progress-'));
    image = await emptyQcow2(tmp);
  });

  after(async () => {
    await Promise.all(processes.map((p) => p.kill()));
    for (const vol of leftovers) await virsh(host, 'vol-delete', '--pool', host.pool, vol).catch(() => undefined);
    await client?.connection.close().catch(() => undefined);
    await mirror?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('progress is fresh in the current details while uploading; a killed uploader is retried within 10 s', async () => {
    const run = Date.now().toString(36);
    const entry = `ip${run}`;
    const path = `/${entry}/big.qcow2`;
    // 48 MiB at 2 MiB/s: about 24 s per transfer.
    const url = mirror.serve(path, Buffer.concat([image, Buffer.alloc(48 * MiB, 0x5a)]), {
      kind: 'slow',
      bytesPerSecond: 2 * MiB,
    });
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { big: { url } } });
    const providers = await writeProvidersFile(tmp, config);
    const taskQueue = uniqueId('progress');
    const base = `base-${entry}-big.qcow2`;
    leftovers.push(`${base}.marker`, base);
    const workers = [await spawnWorker(providers, taskQueue), await spawnWorker(providers, taskQueue)];
    processes.push(...workers);
    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: proxyWorkflowId(entry, 'g1'),
      taskQueue,
      args: [{ name: 'g1', entry, imageKey: 'big' }],
    });
    const imageHandle = client.workflow.getHandle(imageWorkflowId(host.name, entry, 'big'));
    await pollUntil(() => Promise.resolve(mirror.sentBytes(path) >= 4 * MiB ? true : undefined), {
      timeoutMs: 90_000,
      intervalMs: 250,
      what: 'the upload to be under way',
    });

    // 10 s of the upload, sampled every 500 ms: the age of the sample in the image workflow's
    // current details, and how long the proxy's view of the bytes stood still.
    let worstDetailsAgeMs = 0;
    let worstProxyStillMs = 0;
    let worstHeartbeatAgeMs = 0;
    let lastBytes = -1;
    let lastChange = Date.now();
    const samples: string[] = [];
    for (let i = 0, end = Date.now() + 10_000; i < 40 && Date.now() < end; i++) {
      const meta = await imageHandle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      const details = meta.currentDetails ?? '';
      const at = /as of (\S+)$/.exec(details)?.[1];
      assert.ok(at !== undefined && !Number.isNaN(Date.parse(at)), `progress with its time in: ${details}`);
      worstDetailsAgeMs = Math.max(worstDetailsAgeMs, Date.now() - Date.parse(at));
      const st = await handle.query<ProxyStatus>(PROXY_STATUS_QUERY);
      const bytes = st.image?.bytes ?? -1;
      if (bytes !== lastBytes) {
        lastBytes = bytes;
        lastChange = Date.now();
      }
      worstProxyStillMs = Math.max(worstProxyStillMs, Date.now() - lastChange);
      const pending = (await imageHandle.describe()).raw.pendingActivities?.[0];
      if (pending?.lastHeartbeatTime)
        worstHeartbeatAgeMs = Math.max(worstHeartbeatAgeMs, Date.now() - ms(pending.lastHeartbeatTime));
      samples.push(details);
      await new Promise((r) => setTimeout(r, 500));
    }
    assert.ok(mirror.sentBytes(path) < 48 * MiB, 'the upload was still running while sampled');
    assert.ok(samples.length >= 10, `sampled ${samples.length} times`);
    assert.ok(
      worstDetailsAgeMs <= 5_000 + READ_BOUND_MS,
      `the current details' progress was ${worstDetailsAgeMs} ms old at worst (bound 5 s + ${READ_BOUND_MS} ms)`,
    );
    assert.ok(
      worstProxyStillMs <= 5_000 + READ_BOUND_MS,
      `the proxy's image bytes stood still ${worstProxyStillMs} ms at worst (bound 5 s + ${READ_BOUND_MS} ms)`,
    );

    // Kill the worker running the upload.
    const uploading = workers.findIndex((w) => w.lines.some((l) => l.includes('"activityType":"ensureBaseImage"')));
    assert.ok(uploading >= 0, 'one of the workers logged the upload activity');
    const survivor = workers[1 - uploading]!;
    await workers[uploading]!.kill();
    const killedAt = Date.now();
    const noticedAt = await pollUntil(
      async () => {
        const pending = (await imageHandle.describe()).raw.pendingActivities?.[0];
        return (pending?.attempt ?? 1) >= 2 ? Date.now() : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'the server to notice the dead uploader' },
    );
    const retryStartedAt = await pollUntil(
      async () => {
        const pending = (await imageHandle.describe()).raw.pendingActivities?.[0];
        const t = ms(pending?.lastStartedTime);
        return (pending?.attempt ?? 1) >= 2 && t > killedAt - 1_000 ? t : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'the retry to start' },
    );
    process.stderr.write(
      `# progress: details at worst ${worstDetailsAgeMs} ms old, proxy bytes still at worst ${worstProxyStillMs} ms, ` +
        `server heartbeat at worst ${worstHeartbeatAgeMs} ms old; kill noticed after ${noticedAt - killedAt} ms, ` +
        `retry started ${retryStartedAt - killedAt} ms after the kill\n`,
    );
    assert.ok(
      noticedAt - killedAt <= HEARTBEAT_TIMEOUT_MS + NOTICE_BOUND_MS,
      `the dead uploader was noticed ${noticedAt - killedAt} ms after the kill`,
    );
    assert.ok(
      retryStartedAt - killedAt <= HEARTBEAT_TIMEOUT_MS + RETRY_INTERVAL_MS + START_BOUND_MS,
      `the retry started ${retryStartedAt - killedAt} ms after the kill`,
    );

    const running = await pollUntil(
      async () => {
        const st = await handle.query<ProxyStatus>(PROXY_STATUS_QUERY).catch(() => undefined);
        return st?.state === 'Running' ? st : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500, what: 'the proxy Running' },
    );
    assert.equal(running.host, host.name);
    assert.equal(mirror.requests(path), 2, 'the retry fetched the image once more');
    assert.equal((await domainsOf(host, entry)).length, 1, 'exactly one domain');
    assert.deepEqual(
      // The proxy's owner record, where the provider writes one, is the proxy's too.
      (await volumesOf(host, entry)).filter((v) => v !== `ep_${entry}_g1.owner`),
      [base, `${base}.marker`, `ep_${entry}_g1.qcow2`, `ep_${entry}_g1.seed.iso`].sort(),
      'one base, one marker, one overlay, one seed: no leaked volume',
    );
    assert.match(
      (await imageHandle.query<{ currentDetails?: string }>('__temporal_workflow_metadata')).currentDetails ?? '',
      /: ready \(/,
    );
    await handle.executeUpdate(PROXY_DELETE_UPDATE);
    const outcome = (await withTimeout(handle.result(), 120_000, 'the delete')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    assert.deepEqual(await domainsOf(host, entry), []);
    assert.deepEqual(await volumesOf(host, entry), [base, `${base}.marker`].sort());
    await survivor.stop();
  });
});
