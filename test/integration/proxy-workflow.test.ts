/**
 * The proxy lifecycle through Temporal for real: the dev server, in-process workers running the
 * real workflows and activities, the namespaced test hosts over SSH, and a loopback image mirror.
 * The image is an empty qcow2 that does not boot, so a proxy reaches Running without an address
 * (the guest with Squid is the end-to-end test's). Proves: create → Running → delete leaves
 * nothing behind; two proxies on two workers needing one cold base cause one download and one
 * base; bad input fails at once and creates nothing; cancelling mid-upload aborts the stream,
 * cleans up and ends Cancelled.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { imageWorkflowId } from '../../contracts/image.ts';
import { WARM_WORKFLOW_TYPE, warmWorkflowId } from '../../contracts/warm.ts';
import type { WarmResult } from '../../contracts/warm.ts';
import {
  PROXY_DELETE_UPDATE,
  PROXY_RESIZE_UPDATE,
  PROXY_STATUS_QUERY,
  PROXY_WORKFLOW_TYPE,
  proxyWorkflowId,
} from '../../contracts/proxy.ts';
import type { DeleteAccepted, ProxyOutcome, ProxyStatus, VmSize } from '../../contracts/proxy.ts';
import { deleteAll, fleetConfig, spawnWorker, startFleetWorker, writeProvidersFile } from '../support/fleet.ts';
import type { RunningWorker, WorkerProcess } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import { connectClient, connectWorker, installTestRuntime, pollUntil, uniqueId } from '../support/temporal.ts';
import { domainsOf, loadTestHosts, virsh, volumesOf } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);

describe('proxy lifecycle workflows on the dev server and the test hosts', { timeout: 600_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let mirror: ImageMirror;
  let hosts: TestHost[];
  let image: Buffer;
  let tmp: string;
  const workers: RunningWorker[] = [];
  const processes: WorkerProcess[] = [];

  before(async () => {
    installTestRuntime();
    hosts = loadTestHosts();
    client = await connectClient();
    connection = await connectWorker();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-wf-'));
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    image = await readFile(file);
  });

  after(async () => {
    // A test that failed half way leaves proxies running: delete them while the workers still run.
    await deleteAll(client, started);
    await Promise.all([...workers.map((w) => w.stop()), ...processes.map((p) => p.stop())]);
    await mirror?.close();
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const status = (entry: string, name: string): Promise<ProxyStatus> =>
    client.workflow.getHandle(proxyWorkflowId(entry, name)).query<ProxyStatus>(PROXY_STATUS_QUERY);

  const waitState = (entry: string, name: string, state: string, timeoutMs = 120_000): Promise<ProxyStatus> =>
    pollUntil(
      async () => {
        const st = await status(entry, name).catch(() => undefined);
        return st?.state === state ? st : undefined;
      },
      { timeoutMs, intervalMs: 250, what: `proxy ${name} ${state}` },
    );

  const started: WorkflowHandle[] = [];
  const start = async (entry: string, name: string, taskQueue: string, imageKey = 'empty') => {
    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: proxyWorkflowId(entry, name),
      taskQueue,
      args: [{ name, entry, imageKey }],
    });
    started.push(handle);
    return handle;
  };

  it('create → Running → delete leaves no domain, overlay or seed; the base stays', async () => {
    const entry = `wa${run}`;
    const url = mirror.serve(`/${entry}/empty.qcow2`, image);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { empty: { url } } });
    const taskQueue = uniqueId('wf-a');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));

    const handle = await start(entry, 'p1', taskQueue);
    const running = await waitState(entry, 'p1', 'Running');
    assert.equal(running.host, hosts[0]!.name);
    assert.equal(running.conditions.VmRunning.status, 'True');
    assert.equal(running.ip, undefined, 'an image that does not boot has no address');
    assert.equal((await domainsOf(hosts[0]!, entry)).length, 1);
    const vols = await volumesOf(hosts[0]!, entry);
    assert.ok(vols.includes(`base-${entry}-empty.qcow2`), vols.join(','));
    assert.ok(vols.includes(`ep_${entry}_p1.qcow2`) && vols.includes(`ep_${entry}_p1.seed.iso`), vols.join(','));

    const desc = await handle.describe();
    const sa = desc.searchAttributes as Record<string, unknown[]>;
    assert.deepEqual(sa['ProxyState'], ['Running']);
    assert.deepEqual(sa['ProviderEntry'], [entry]);
    assert.deepEqual(sa['ProxyHost'], [hosts[0]!.name]);

    const accepted = await handle.executeUpdate<DeleteAccepted, []>(PROXY_DELETE_UPDATE);
    assert.deepEqual(accepted, { accepted: true, fromState: 'Running' });
    const outcome = (await handle.result()) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    assert.deepEqual(
      { ...outcome.deleted, logs: undefined },
      { domain: 'deleted', overlay: 'deleted', seed: 'deleted', ownerRecord: 'deleted', logs: undefined },
    );
    assert.notEqual(outcome.deleted?.logs, 'failed', 'the log files were removed');
    assert.deepEqual(await domainsOf(hosts[0]!, entry), []);
    assert.deepEqual(
      (await volumesOf(hosts[0]!, entry)).sort(),
      [`base-${entry}-empty.qcow2`, `base-${entry}-empty.qcow2.marker`].sort(),
    );
    assert.equal(mirror.requests(`/${entry}/empty.qcow2`), 1);
  });

  it('an unknown image key fails the workflow at once, naming the field; nothing is created', async () => {
    const entry = `wb${run}`;
    const url = mirror.serve(`/${entry}/empty.qcow2`, image);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { empty: { url } } });
    const taskQueue = uniqueId('wf-b');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));
    const handle = await start(entry, 'bad', taskQueue, 'nosuch');
    await assert.rejects(handle.result(), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      assert.match(String(err.cause?.message), /imageKey/);
      assert.match(String(err.cause?.message), /nosuch/);
      return true;
    });
    assert.equal(mirror.requests(`/${entry}/empty.qcow2`), 0);
    assert.deepEqual(await domainsOf(hosts[0]!, entry), []);
    assert.deepEqual(await volumesOf(hosts[0]!, entry), []);
  });

  it('an override that would make an open proxy fails at once, naming the field', async () => {
    const entry = `wf${run}`;
    const url = mirror.serve(`/${entry}/empty.qcow2`, image);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { empty: { url } } });
    const taskQueue = uniqueId('wf-f');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));
    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: proxyWorkflowId(entry, 'open'),
      taskQueue,
      args: [{ name: 'open', entry, imageKey: 'empty', squid: { allowedClientCidrs: ['10.0.0.0/8', '::/0'] } }],
    });
    await assert.rejects(handle.result(), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      assert.match(String(err.cause?.message), /squid\.allowedClientCidrs\[1\]: admits every address/);
      return true;
    });
    assert.equal(mirror.requests(`/${entry}/empty.qcow2`), 0);
    assert.deepEqual(await domainsOf(hosts[0]!, entry), []);
  });

  it('two proxies on two workers needing one cold base: one download, one base, both Running', async () => {
    const entry = `wc${run}`;
    const path = `/${entry}/empty.qcow2`;
    const url = mirror.serve(path, image);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[1]!], images: { empty: { url } } });
    const taskQueue = uniqueId('wf-c');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));
    const other = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue);
    processes.push(other);
    const [a, b] = await Promise.all([start(entry, 'q1', taskQueue), start(entry, 'q2', taskQueue)]);
    await Promise.all([waitState(entry, 'q1', 'Running'), waitState(entry, 'q2', 'Running')]);
    assert.equal(mirror.requests(path), 1, 'one download for both proxies');
    const vols = await volumesOf(hosts[1]!, entry);
    assert.equal(vols.filter((v) => v.startsWith('base-')).length, 2, `one base and its marker: ${vols.join(',')}`);
    assert.equal((await domainsOf(hosts[1]!, entry)).length, 2);
    const imageRun = await client.workflow.getHandle(imageWorkflowId(hosts[1]!.name, entry, 'empty')).describe();
    assert.equal(imageRun.status.name, 'COMPLETED');
    await Promise.all([a, b].map((h) => h.executeUpdate(PROXY_DELETE_UPDATE)));
    for (const h of [a, b]) assert.equal(((await h.result()) as ProxyOutcome).state, 'Deleted');
    assert.deepEqual(await domainsOf(hosts[1]!, entry), []);
  });

  it('cancelling mid-upload aborts the stream, cleans up and ends Cancelled; no base is published', async () => {
    const entry = `wd${run}`;
    const path = `/${entry}/big.qcow2`;
    const big = Buffer.concat([image, Buffer.alloc(32 * 1024 * 1024, 7)]);
    const url = mirror.serve(path, big, { kind: 'stall', afterBytes: 4 * 1024 * 1024 });
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { big: { url } } });
    const taskQueue = uniqueId('wf-d');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));
    const handle = await start(entry, 'r1', taskQueue, 'big');
    const imageId = imageWorkflowId(hosts[0]!.name, entry, 'big');
    await pollUntil(() => Promise.resolve(mirror.requests(path) > 0 ? true : undefined), {
      timeoutMs: 60_000,
      what: 'the download to start',
    });
    const st = await waitState(entry, 'r1', 'Provisioning');
    assert.equal(st.image?.workflowId, imageId);
    const t0 = performance.now();
    await handle.cancel();
    await assert.rejects(handle.result(), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError, String(err));
      assert.match(String(err.cause?.name), /CancelledFailure/);
      return true;
    });
    const imageResult: unknown = await client.workflow.getHandle(imageId).result();
    const took = performance.now() - t0;
    assert.ok(took < 60_000, `cancel to image workflow end took ${Math.round(took)} ms`);
    assert.deepEqual(imageResult, {
      ok: false,
      kind: 'Transient',
      code: 'IMAGE_ABANDONED',
      message: 'every waiter left',
    });
    const final = await status(entry, 'r1');
    assert.equal(final.state, 'Deleted');
    await pollUntil(async () => ((await volumesOf(hosts[0]!, entry)).length === 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the half-written base to be removed',
    });
    assert.deepEqual(await domainsOf(hosts[0]!, entry), []);
  });

  it('resize applies memory and vCPUs with a restart once Running; a disk resize is refused', async () => {
    const entry = `we${run}`;
    const url = mirror.serve(`/${entry}/empty.qcow2`, image);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[1]!], images: { empty: { url } } });
    const taskQueue = uniqueId('wf-e');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));
    const handle = await start(entry, 's1', taskQueue);
    await waitState(entry, 's1', 'Running');
    await assert.rejects(handle.executeUpdate(PROXY_RESIZE_UPDATE, { args: [{ diskGiB: 20 }] }), (err: unknown) => {
      assert.match(String((err as Error).cause), /diskGiB cannot be changed/);
      return true;
    });
    const after = await handle.executeUpdate<ProxyStatus, [VmSize]>(PROXY_RESIZE_UPDATE, {
      args: [{ memoryMiB: 256, vcpus: 2 }],
    });
    assert.deepEqual(after.vm, { vcpus: 2, memoryMiB: 256, diskGiB: 1 });
    assert.equal(after.state, 'Running');
    const xml = await virsh(hosts[1]!, 'dumpxml', `ep_${entry}_s1`);
    assert.match(xml, /<memory unit='KiB'>262144<\/memory>/);
    assert.match(xml, /<vcpu[^>]*>2<\/vcpu>/);
    assert.match(await virsh(hosts[1]!, 'domstate', `ep_${entry}_s1`), /running/);
    await handle.executeUpdate(PROXY_DELETE_UPDATE);
    assert.equal(((await handle.result()) as ProxyOutcome).state, 'Deleted');
  });

  it('warming an image puts the base on every host once; a proxy afterwards downloads nothing', async () => {
    const entry = `wg${run}`;
    const path = `/${entry}/empty.qcow2`;
    const url = mirror.serve(path, image);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: hosts.slice(0, 2), images: { empty: { url } } });
    const taskQueue = uniqueId('wf-g');
    workers.push(await startFleetWorker(connection, client, config, taskQueue));
    const warm: unknown = await client.workflow.execute(WARM_WORKFLOW_TYPE, {
      workflowId: warmWorkflowId(entry, 'empty'),
      taskQueue,
      args: [{ entry, key: 'empty' }],
      workflowExecutionTimeout: '2 minutes',
    });
    assert.deepEqual(
      (warm as WarmResult).hosts.map((h) => [h.host, h.ok, h.cached]).sort(),
      hosts
        .slice(0, 2)
        .map((h) => [h.name, true, false])
        .sort(),
    );
    assert.equal(mirror.requests(path), 2, 'one download per host');
    for (const h of hosts.slice(0, 2)) assert.ok((await volumesOf(h, entry)).includes(`base-${entry}-empty.qcow2`));
    const again = (await client.workflow.execute(WARM_WORKFLOW_TYPE, {
      workflowId: warmWorkflowId(entry, 'empty'),
      taskQueue,
      args: [{ entry, key: 'empty' }],
      workflowExecutionTimeout: '2 minutes',
    })) as WarmResult;
    assert.ok(
      again.hosts.every((h) => h.ok && h.cached === true),
      'a second warm finds the bases cached',
    );
    const handle = await start(entry, 'w1', taskQueue);
    await waitState(entry, 'w1', 'Running');
    assert.equal(mirror.requests(path), 2, 'the proxy downloaded nothing');
    await handle.executeUpdate(PROXY_DELETE_UPDATE);
    await handle.result();
    await assert.rejects(
      client.workflow.execute(WARM_WORKFLOW_TYPE, {
        workflowId: warmWorkflowId(entry, 'nosuch'),
        taskQueue,
        args: [{ entry, key: 'nosuch' }],
        workflowExecutionTimeout: '1 minute',
      }),
      (err: unknown) =>
        err instanceof WorkflowFailedError &&
        /key: entry .* has no image "nosuch"/.test(
          String(err.cause?.cause instanceof Error ? err.cause.cause.message : err.cause?.message),
        ),
    );
  });
});
