/**
 * POST /v1/proxies/{entry}/{name}/resize: the size is validated by the schema (contracts/limits.ts
 * ranges, at least one field) before Temporal; the update's answers map to 200 (applied), 202
 * (still applying at the bound), 404 (no proxy) and 409 RESIZE_REFUSED.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeStore, fakeStatus } from '../support/fake-store.ts';

const TOKEN = 'r'.repeat(32);

describe('resize route', () => {
  let app: FastifyInstance;
  const store = new FakeStore();
  store.add({ name: 'p1', entry: 'lab', imageKey: 'deb' });

  before(async () => {
    app = await buildApi({
      store,
      log: createLogger({ name: 'api-resize-test', level: 'silent' }),
      auth: new TokenAuth([{ token: TOKEN, role: 'admin' }]),
      taskQueue: 'tq',
    });
  });
  after(() => app.close());

  const resize = (path: string, payload: unknown) =>
    app.inject({
      method: 'POST',
      url: path,
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: payload as object,
    });
  const code = (res: { body: string }) => (JSON.parse(res.body) as { error: { code: string; field?: string } }).error;

  it('bad sizes are a 400 naming the field; nothing is sent', async () => {
    const empty = await resize('/v1/proxies/lab/p1/resize', {});
    assert.equal(empty.statusCode, 400, empty.body);
    const big = await resize('/v1/proxies/lab/p1/resize', { vcpus: 65 });
    assert.deepEqual([big.statusCode, code(big).field], [400, 'vcpus']);
    const odd = await resize('/v1/proxies/lab/p1/resize', { gpus: 1 });
    assert.deepEqual([odd.statusCode, code(odd).code], [400, 'UNKNOWN_FIELD']);
    assert.equal(store.calls['resize'] ?? 0, 0);
  });

  it('202 while applying, 200 once applied, 409 when refused, 404 for no proxy', async () => {
    assert.equal((await resize('/v1/proxies/lab/p1/resize?waitMs=10', { vcpus: 2 })).statusCode, 202);
    assert.deepEqual(store.resized.at(-1), { vcpus: 2 });
    store.resizeAnswer = { kind: 'done', status: fakeStatus({ name: 'p1', entry: 'lab' }) };
    const done = await resize('/v1/proxies/lab/p1/resize', { memoryMiB: 1024 });
    assert.equal(done.statusCode, 200, done.body);
    assert.equal((JSON.parse(done.body) as { done: boolean }).done, true);
    store.resizeAnswer = { kind: 'refused', message: 'the proxy is Deleting: nothing to resize' };
    const refused = await resize('/v1/proxies/lab/p1/resize', { vcpus: 2 });
    assert.deepEqual([refused.statusCode, code(refused).code], [409, 'RESIZE_REFUSED']);
    const none = await resize('/v1/proxies/lab/nope/resize', { vcpus: 2 });
    assert.equal(none.statusCode, 404);
  });

  it('a method a path does not answer is a 405 with Allow', async () => {
    const res = await app.inject({
      method: 'PUT',
      url: '/v1/proxies/lab/p1',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(res.statusCode, 405, res.body);
    assert.match(String(res.headers['allow']), /DELETE/);
    assert.match(String(res.headers['allow']), /GET/);
    assert.equal(code(res).code, 'METHOD_NOT_ALLOWED');
    const long = await app.inject({
      method: 'GET',
      url: `/v1/proxies/lab/${'a'.repeat(300)}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.deepEqual([long.statusCode, code(long).code], [414, 'URI_TOO_LONG']);
  });
});
