/**
 * The HTTP API against the dev server, a real worker (in-process, the real workflows and
 * activities) and the namespaced test hosts, with an empty qcow2 from a loopback mirror (it
 * reaches Running without an address, so no proxy here becomes Healthy; discovery's positive
 * side is proven in test/unit/api-server.test.ts with a fake store). Proves: readiness follows
 * the worker; auth; bad input is a 400 naming the field and starts nothing; create is idempotent
 * (200 same spec, 409 other spec); list filters and pages; discovery leaves out proxies that are
 * not Healthy; delete is 202, ?wait=true answers Deleted; Temporal away is a 503.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { API_ERRORS } from '../../api/errors.ts';
import type { ApiErrorCode } from '../../api/errors.ts';
import { PROXY_DELETE_UPDATE, proxyWorkflowId } from '../../contracts/proxy.ts';
import { catalogOf, startCatalogPublisher } from '../../runtime/catalog.ts';
import { apiError, http, startTestApi, writeTokens } from '../support/api.ts';
import type { TestApi, TestTokens } from '../support/api.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import { connectClient, connectWorker, installTestRuntime, pollUntil, uniqueId } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);

describe('HTTP API on the dev server with a real worker', { timeout: 300_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let mirror: ImageMirror;
  let hosts: TestHost[];
  let tmp: string;
  let tokens: TestTokens;
  let worker: RunningWorker | undefined;
  let api: TestApi;
  let catalog: { stop(): Promise<void> } | undefined;
  const apis: TestApi[] = [];
  const entry = `api${run}`;
  const taskQueue = uniqueId('api');

  before(async () => {
    installTestRuntime();
    hosts = loadTestHosts();
    client = await connectClient();
    connection = await connectWorker();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-api-'));
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(file));
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { empty: { url } } });
    worker = await startFleetWorker(connection, client, config, taskQueue);
    // What workers/worker.ts does at start-up: the API validates writes against it.
    catalog = await startCatalogPublisher(client, taskQueue, catalogOf(config), { info() {}, warn() {} });
    tokens = await writeTokens(tmp);
    api = await startTestApi(client, taskQueue, tokens);
    apis.push(api);
  });

  after(async () => {
    // Whatever a failed test left running: delete it through the workflow, then wait (bounded).
    for (const name of ['p1', 'p2']) {
      const h = client?.workflow.getHandle(proxyWorkflowId(entry, name));
      if (!h) continue;
      const open = await h
        .describe()
        .then((d) => d.status.name === 'RUNNING')
        .catch(() => false);
      if (open) {
        await h.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined);
        await client.withDeadline(Date.now() + 60_000, () => h.result()).catch(() => undefined);
      }
    }
    for (const a of apis) await a.close();
    await catalog?.stop();
    await worker?.stop();
    await mirror?.close();
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const call = (method: string, path: string, o: Parameters<typeof http>[3] = {}) =>
    http(api.url, method, path, { token: tokens.admin, ...o });

  it('readiness follows the worker: 200 while one polls the task queue, 503 naming a queue without one', async () => {
    const ready = await pollUntil(
      async () => {
        const r = await http(api.url, 'GET', '/readyz');
        return r.status === 200 ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: '/readyz 200' },
    );
    assert.equal(ready.body['ready'], true);
    const lonely = await startTestApi(client, uniqueId('api-no-worker'), tokens);
    apis.push(lonely);
    const r = await http(lonely.url, 'GET', '/readyz');
    assert.equal(r.status, 503);
    assert.match(String(r.body['reason']), /no worker polls task queue api-no-worker-/);
    assert.equal((await http(lonely.url, 'GET', '/healthz')).status, 200);
  });

  it('auth: 401 without a token or with an unknown one, 403 for a read-only token on create and delete', async () => {
    const none = await http(api.url, 'GET', '/v1/proxies');
    assert.equal(none.status, 401);
    assert.match(apiError(none).message, /missing Authorization header/);
    const unknown = await call('GET', '/v1/proxies', { token: tokens.admin.slice(0, -1) + 'x' });
    assert.equal(unknown.status, 401);
    assert.match(apiError(unknown).message, /not one of the configured tokens/);
    const body = { name: 'ro', entry, imageKey: 'empty' };
    const ro = await call('POST', '/v1/proxies', { token: tokens.reader, body });
    assert.equal(ro.status, 403);
    assert.match(apiError(ro).message, /read-only/);
    assert.equal((await call('DELETE', `/v1/proxies/${entry}/ro`, { token: tokens.reader })).status, 403);
    assert.equal((await call('GET', '/v1/proxies', { token: tokens.reader })).status, 200);
  });

  it('bad input is a 400 naming the field, and no workflow is started', async () => {
    const good = { name: 'bad', entry, imageKey: 'empty' };
    const cases: [Parameters<typeof http>[3], string, string][] = [
      [{ body: { ...good, colour: 'red' } }, 'UNKNOWN_FIELD', 'colour'],
      [{ body: { ...good, vm: { vcpus: 1, gpus: 1 } } }, 'UNKNOWN_FIELD', 'vm.gpus'],
      [{ body: { ...good, vm: { memoryMiB: '512' } } }, 'INVALID_FIELD', 'vm.memoryMiB'],
      [
        { body: { ...good, squid: { allowedClientCidrs: ['::/0'] } } },
        'OPEN_PROXY_REFUSED',
        'squid.allowedClientCidrs[0]',
      ],
      [{ raw: '{"name":"bad","entry":' }, 'INVALID_JSON', 'body'],
      // Against the catalog the worker published: named, with the known values, before any start.
      [{ body: { ...good, entry: 'nope' } }, 'UNKNOWN_ENTRY', 'entry'],
      [{ body: { ...good, imageKey: 'nope' } }, 'UNKNOWN_IMAGE', 'imageKey'],
      [{ raw: JSON.stringify(good), type: 'text/plain' }, 'UNSUPPORTED_CONTENT_TYPE', 'body'],
      [{ raw: 'name=bad', type: 'application/x-www-form-urlencoded' }, 'UNSUPPORTED_CONTENT_TYPE', 'body'],
    ];
    for (const [req, code, field] of cases) {
      const r = await call('POST', '/v1/proxies', req);
      assert.equal(r.status, API_ERRORS[code as ApiErrorCode], `${code}: ${r.text}`);
      assert.equal(apiError(r).code, code);
      assert.equal(apiError(r).field, field);
    }
    assert.equal(api.starts(), 0, 'the store was never asked to start a workflow');
    const started = [];
    // The worker's catalog workflow (catalog/<taskQueue>) is the only one on the queue.
    const query = `TaskQueue = '${taskQueue}' AND WorkflowType != 'catalogWorkflow'`;
    for await (const wf of client.workflow.list({ query })) started.push(wf.workflowId);
    assert.deepEqual(started, []);
  });

  it('create is idempotent: 201, 200 for the same spec, 409 for another; the proxy reaches Running', async () => {
    const spec = { name: 'p1', entry, imageKey: 'empty' };
    const first = await call('POST', '/v1/proxies', { body: spec });
    assert.equal(first.status, 201, first.text);
    assert.equal((first.body['proxy'] as { workflowId: string }).workflowId, proxyWorkflowId(entry, 'p1'));
    const same = await call('POST', '/v1/proxies', { body: { imageKey: 'empty', name: 'p1', entry } });
    assert.equal(same.status, 200, same.text);
    assert.equal(same.body['created'], false);
    const other = await call('POST', '/v1/proxies', { body: { ...spec, vm: { vcpus: 2 } } });
    assert.equal(other.status, 409, other.text);
    assert.match(apiError(other).message, /another spec \(differs in vm\)/);
    assert.equal((await call('POST', '/v1/proxies', { body: { name: 'p2', entry, imageKey: 'empty' } })).status, 201);
    for (const name of ['p1', 'p2']) {
      const st = await pollUntil(
        async () => {
          const r = await call('GET', `/v1/proxies/${entry}/${name}`);
          const s = r.body['status'] as { state?: string } | undefined;
          return s?.state === 'Running' ? s : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 500, what: `${name} Running` },
      );
      assert.equal((st as { host?: string }).host, hosts[0]!.name);
    }
  });

  it('list filters on entry, state, host and health, and pages with a token', async () => {
    const names = (r: { body: Record<string, unknown> }) =>
      (r.body['proxies'] as { name: string }[]).map((p) => p.name).sort();
    const running = await pollUntil(
      async () => {
        const r = await call('GET', `/v1/proxies?entry=${entry}&state=Running`);
        return names(r).length === 2 ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'both proxies listed Running' },
    );
    assert.deepEqual(names(running), ['p1', 'p2']);
    assert.deepEqual(names(await call('GET', `/v1/proxies?entry=${entry}&host=${hosts[0]!.name}`)), ['p1', 'p2']);
    assert.deepEqual(names(await call('GET', `/v1/proxies?entry=${entry}&host=no-such-host`)), []);
    assert.deepEqual(names(await call('GET', `/v1/proxies?entry=${entry}&healthy=true`)), []);
    assert.deepEqual(names(await call('GET', `/v1/proxies?entry=${entry}&healthy=false`)), ['p1', 'p2']);
    assert.deepEqual(names(await call('GET', `/v1/proxies?entry=${entry}&state=Deleted`)), []);
    const page1 = await call('GET', `/v1/proxies?entry=${entry}&pageSize=1`);
    const token = page1.body['nextPageToken'] as string;
    assert.equal(names(page1).length, 1);
    assert.ok(token);
    const page2 = await call('GET', `/v1/proxies?entry=${entry}&pageSize=1&pageToken=${token}`);
    assert.deepEqual([...names(page1), ...names(page2)].sort(), ['p1', 'p2']);
    const forged = await call('GET', `/v1/proxies?entry=${entry}&pageSize=1&pageToken=${token.slice(4)}`);
    assert.deepEqual([forged.status, apiError(forged).field], [422, 'pageToken']);
  });

  it('discovery leaves out proxies that are not Healthy (these have no address)', async () => {
    const r = await call('GET', `/v1/discovery?entry=${entry}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body['proxies'], []);
    const one = await call('GET', `/v1/proxies/${entry}/p1`);
    const status = one.body['status'] as { state: string; conditions: { Healthy: { status: string } } };
    assert.equal(status.state, 'Running');
    assert.notEqual(status.conditions.Healthy.status, 'True');
  });

  it('metrics count proxies by state from visibility', async () => {
    const r = await call('GET', '/metrics');
    assert.equal(r.status, 200);
    const m = /^egress_proxies\{state="Running"\} (\d+)$/m.exec(r.text);
    assert.ok(m && Number(m[1]) >= 2, r.text.slice(0, 400));
    assert.match(r.text, /^egress_api_temporal_up 1$/m);
  });

  it('delete: 202 at once, ?wait=true answers 200 Deleted, a second delete 200 done, an unknown proxy 404', async () => {
    const d1 = await call('DELETE', `/v1/proxies/${entry}/p1`);
    assert.equal(d1.status, 202, d1.text);
    assert.deepEqual([d1.body['accepted'], d1.body['fromState'], d1.body['done']], [true, 'Running', false]);
    const d2 = await call('DELETE', `/v1/proxies/${entry}/p2?wait=true&waitMs=90000`, { timeoutMs: 100_000 });
    assert.equal(d2.status, 200, d2.text);
    assert.equal(d2.body['state'], 'Deleted');
    await client.withDeadline(Date.now() + 60_000, () =>
      client.workflow.getHandle(proxyWorkflowId(entry, 'p1')).result(),
    );
    const again = await call('DELETE', `/v1/proxies/${entry}/p1`);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual([again.body['done'], again.body['state']], [true, 'Deleted']);
    assert.equal((await call('DELETE', `/v1/proxies/${entry}/never-made`)).status, 404);
    assert.equal((await call('GET', `/v1/proxies/${entry}/never-made`)).status, 404);
  });

  it('Temporal unreachable: 503 with a plain message on API routes, readiness 503, liveness 200', async () => {
    const connection = Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 1_000 });
    const away = await startTestApi(new Client({ connection }), taskQueue, tokens, 1_500);
    try {
      const r = await http(away.url, 'GET', '/v1/proxies', { token: tokens.admin });
      assert.equal(r.status, 503, r.text);
      assert.equal(apiError(r).code, 'TEMPORAL_UNAVAILABLE');
      assert.doesNotMatch(r.text, /\n\s+at |\.ts:\d+/);
      const c = await http(away.url, 'POST', '/v1/proxies', {
        token: tokens.admin,
        body: { name: 'x', entry, imageKey: 'empty' },
      });
      assert.equal(c.status, 503, c.text);
      assert.equal((await http(away.url, 'GET', '/readyz')).status, 503);
      assert.equal((await http(away.url, 'GET', '/healthz')).status, 200);
    } finally {
      await away.close();
      // Let the client's retry timers of the refused calls run out before the channel closes.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await connection.close().catch(() => undefined);
    }
  });
});
