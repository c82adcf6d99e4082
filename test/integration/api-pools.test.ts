/**
 * /v1/pools end to end against the dev server and a real worker (in-process: the real pool and
 * proxy workflows and activities, one namespaced test host, two image keys over an empty qcow2
 * from a loopback mirror), with a pool of size 0 so that no VM is created: create (201, the same
 * spec 200, another 409), list and get, a scale over the limit (400 naming size), a spec update
 * the API refuses (400 naming the field) and one the pool's own validator refuses (client call), a
 * rollback with one revision (409, the validator's reason), pause and resume, a template update
 * making revision 2 and a rollback to 1, discovery by pool with its ETag and a 304, and a delete
 * with wait that ends the workflow. Members with VMs are tested end to end elsewhere.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { updatePoolSpec } from '../../client/pools.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import { POOL_DELETE_UPDATE, poolWorkflowId } from '../../contracts/pool.ts';
import { poolTaskQueue } from '../../contracts/task-queues.ts';
import { catalogOf, startCatalogPublisher } from '../../runtime/catalog.ts';
import { apiError, http, startTestApi, writeTokens } from '../support/api.ts';
import type { TestApi, TestTokens } from '../support/api.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import {
  connectClient,
  connectWorker,
  installTestRuntime,
  onTaskQueues,
  pollUntil,
  uniqueId,
} from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);

describe('pool routes (dev server, real worker, a pool of size 0)', { timeout: 300_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let mirror: ImageMirror;
  let tmp: string;
  let tokens: TestTokens;
  let worker: RunningWorker | undefined;
  let catalog: { stop(): Promise<void> } | undefined;
  let api: TestApi;
  const entry = `pl${run}`;
  const taskQueue = uniqueId('api-pools');
  const spec = { entry, name: 'crawl', size: 0, template: { imageKey: 'empty' } };
  const path = `/v1/pools/${entry}/crawl`;
  const call = (method: string, p: string, body?: unknown, token?: string) =>
    http(api.url, method, p, { token: token ?? tokens.admin, ...(body === undefined ? {} : { body }) });
  const status = (r: { body: Record<string, unknown> }) => r.body['status'] as PoolStatus;

  before(async () => {
    installTestRuntime();
    const hosts = loadTestHosts();
    client = await connectClient();
    connection = await connectWorker();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-pools-'));
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(file));
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts: [hosts[0]!],
      images: { empty: { url }, empty2: { url } },
    });
    worker = await startFleetWorker(connection, client, config, taskQueue);
    catalog = await startCatalogPublisher(client, taskQueue, catalogOf(config), { info() {}, warn() {} });
    tokens = await writeTokens(tmp);
    api = await startTestApi(client, taskQueue, tokens, 10_000);
  });

  after(async () => {
    // A pool left by a failed assertion: deleted through its own update, bounded; then ended.
    if (client) {
      for await (const wf of client.workflow.list({
        query: `${onTaskQueues(taskQueue)} AND ExecutionStatus = 'Running'`,
      })) {
        const h = client.workflow.getHandle(wf.workflowId);
        await h.executeUpdate(POOL_DELETE_UPDATE).catch(() => undefined);
        await h.terminate('api-pools test over').catch(() => undefined);
      }
    }
    await api?.close();
    await catalog?.stop();
    await worker?.stop();
    await mirror?.close();
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('create: 201, the same spec 200, another spec 409; a read token 403; an unknown image 422', async () => {
    const created = await call('POST', '/v1/pools', spec);
    assert.equal(created.status, 201, created.text);
    const again = await call('POST', '/v1/pools', spec);
    assert.deepEqual([again.status, again.body['created']], [200, false], again.text);
    const other = await call('POST', '/v1/pools', { ...spec, spares: 1 });
    assert.deepEqual([other.status, apiError(other).code], [409, 'CONFLICT'], other.text);
    assert.match(apiError(other).message, /differs in spares/);
    const reader = await call('POST', '/v1/pools', { ...spec, name: 'other' }, tokens.reader);
    assert.equal(reader.status, 403);
    const img = await call('POST', '/v1/pools', { ...spec, name: 'other', template: { imageKey: 'nope' } });
    assert.deepEqual([img.status, apiError(img).field], [422, 'template.imageKey'], img.text);
  });

  it('get answers the status query; the list finds the pool by entry', async () => {
    const got = await pollUntil(
      async () => {
        const r = await call('GET', path, undefined, tokens.reader);
        return r.status === 200 && r.body['status'] !== undefined ? r : undefined;
      },
      { timeoutMs: 30_000, what: 'the pool status' },
    );
    const st = status(got);
    assert.deepEqual([st.entry, st.name, st.desired, st.revision, st.members.length], [entry, 'crawl', 0, 1, 0]);
    assert.equal(st.spec.rollout.maxSurge, 1, 'defaults filled in');
    // The pool runs on the pools' own queue (its tasks never wait behind its members'), and the
    // worker's second worker polls it: the status query above was answered there.
    const described = await client.workflow.getHandle(poolWorkflowId(entry, 'crawl')).describe();
    assert.equal(described.taskQueue, poolTaskQueue(taskQueue));
    const listed = await pollUntil(
      async () => {
        const r = await call('GET', `/v1/pools?entry=${entry}`);
        const pools = r.body['pools'] as { name: string; phase?: string }[];
        return pools.length === 1 ? pools : undefined;
      },
      { timeoutMs: 30_000, what: 'the pool in the list' },
    );
    assert.equal(listed[0]!.name, 'crawl');
    assert.equal((await call('GET', `/v1/pools/${entry}/none`)).status, 404);
  });

  it('refusals: a size over the limit 400, a bad spec 400 naming the field, a rollback with one revision 409', async () => {
    const big = await call('POST', `${path}/scale`, { size: 1001 });
    assert.deepEqual([big.status, apiError(big).field], [400, 'size'], big.text);
    const patch = await call('PATCH', path, { rollout: { maxSurge: 0 } });
    assert.deepEqual([patch.status, apiError(patch).field], [400, 'rollout.maxSurge'], patch.text);
    // The pool's own validator refuses what the API would have: before the history, with the reason.
    const direct = await updatePoolSpec(client, entry, 'crawl', { rollout: { maxSurge: 0 } });
    assert.equal(direct?.kind, 'refused');
    assert.match(direct.kind === 'refused' ? direct.message : '', /rollout\.maxSurge and rollout\.maxUnavailable/);
    const rb = await call('POST', `${path}/rollback`, {});
    assert.deepEqual([rb.status, apiError(rb).code], [409, 'POOL_UPDATE_REFUSED'], rb.text);
    assert.match(apiError(rb).message, /only one revision/);
  });

  it('pause and resume; a template update makes revision 2 and a rollback goes back to 1', async () => {
    const paused = await call('POST', `${path}/pause`);
    assert.equal(paused.status, 200, paused.text);
    assert.equal(status(paused).paused, true);
    const resumed = await call('POST', `${path}/resume`);
    assert.equal(status(resumed).paused, false);
    const updated = await call('PATCH', path, { template: { imageKey: 'empty2' } });
    assert.equal(updated.status, 200, updated.text);
    assert.deepEqual([status(updated).revision, status(updated).spec.template.imageKey], [2, 'empty2']);
    const back = await call('POST', `${path}/rollback`, { revision: 1 });
    assert.equal(back.status, 200, back.text);
    assert.deepEqual(
      [status(back).revision, status(back).spec.template.imageKey, status(back).rollbacks],
      [1, 'empty', 1],
    );
    const scaled = await call('POST', `${path}/scale`, { size: 0, spares: 0 });
    assert.equal(status(scaled).desired, 0);
  });

  it('discovery by pool: ready/desired, a stable ETag, 304 on If-None-Match', async () => {
    const ask = (etag?: string) =>
      fetch(new URL(`/v1/discovery?pool=${entry}/crawl`, api.url), {
        headers: { authorization: `Bearer ${tokens.reader}`, ...(etag ? { 'if-none-match': etag } : {}) },
        signal: AbortSignal.timeout(15_000),
      });
    const first = await ask();
    assert.equal(first.status, 200);
    const body = (await first.json()) as { proxies: unknown[]; ready: number; desired: number; pool: string };
    assert.deepEqual([body.proxies, body.ready, body.desired, body.pool], [[], 0, 0, `${entry}/crawl`]);
    const etag = first.headers.get('etag');
    assert.match(etag ?? '', /^W\/".+"$/);
    const second = await ask();
    assert.equal(second.headers.get('etag'), etag, 'the same list, the same ETag');
    await second.body?.cancel();
    const same = await ask(etag!);
    assert.equal(same.status, 304);
    assert.equal(await same.text(), '');
    const stale = await ask('W/"not-this-one"');
    assert.equal(stale.status, 200);
    await stale.body?.cancel();
    const none = await call('GET', `/v1/discovery?pool=${entry}/none`);
    assert.equal(none.status, 404);
  });

  it('delete with wait ends the pool; it stays readable as ended and leaves the open list', async () => {
    const del = await http(api.url, 'DELETE', `${path}?wait=true&waitMs=60000`, {
      token: tokens.admin,
      timeoutMs: 70_000,
    });
    assert.equal(del.status, 200, del.text);
    assert.deepEqual([del.body['done'], status(del).phase], [true, 'Deleted']);
    const got = await call('GET', path);
    assert.equal(got.status, 200);
    assert.equal((got.body['pool'] as { execution: string }).execution, 'COMPLETED');
    const again = await call('DELETE', path);
    assert.deepEqual([again.status, again.body['done']], [200, true]);
    const scale = await call('POST', `${path}/scale`, { size: 1 });
    assert.deepEqual([scale.status, apiError(scale).code], [409, 'POOL_UPDATE_REFUSED']);
    await pollUntil(
      async () => {
        const r = await call('GET', `/v1/pools?entry=${entry}`);
        return (r.body['pools'] as unknown[]).length === 0 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'the deleted pool to leave the open list' },
    );
    const all = await call('GET', `/v1/pools?entry=${entry}&all=true`);
    assert.equal((all.body['pools'] as unknown[]).length, 1);
  });
});
