/**
 * Writes are limited per token (@fastify/rate-limit): over the limit a 429 RATE_LIMITED in the one
 * error shape with Retry-After; another token and reads are not held back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeStore } from '../support/fake-store.ts';

const A = 'a'.repeat(32);
const B = 'b'.repeat(32);

describe('rate limit of writes per token', () => {
  let app: FastifyInstance;
  const store = new FakeStore();

  before(async () => {
    app = await buildApi({
      store,
      log: createLogger({ name: 'api-rate-test', level: 'silent' }),
      auth: new TokenAuth([
        { token: A, role: 'admin' },
        { token: B, role: 'admin' },
      ]),
      taskQueue: 'tq',
      writesPerMinute: 3,
    });
  });
  after(() => app.close());

  const create = (token: string, name: string) =>
    app.inject({
      method: 'POST',
      url: '/v1/proxies',
      headers: { authorization: `Bearer ${token}` },
      payload: { name, entry: 'lab', imageKey: 'deb' },
    });

  it('the 4th write in a minute is a 429 with Retry-After; another token and reads go on', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await create(A, `r${i}`)).statusCode, 201);
    const limited = await create(A, 'r3');
    assert.equal(limited.statusCode, 429, limited.body);
    assert.equal((JSON.parse(limited.body) as { error: { code: string } }).error.code, 'RATE_LIMITED');
    assert.ok(Number(limited.headers['retry-after']) > 0, JSON.stringify(limited.headers));
    assert.equal(store.calls['start'], 3, 'the limited write started nothing');
    assert.equal((await create(B, 'other')).statusCode, 201);
    const read = await app.inject({ method: 'GET', url: '/v1/proxies', headers: { authorization: `Bearer ${A}` } });
    assert.equal(read.statusCode, 200);
  });
});
