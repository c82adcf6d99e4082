/**
 * The exit IP in the API (over the fake store, app.inject): GET /v1/proxies/{entry}/{name} returns
 * the status query's `exitIp`, unfiltered discovery lists it beside the address, and the OpenAPI
 * document describes both fields.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeStore, fakeStatus } from '../support/fake-store.ts';

const TOKEN = 't'.repeat(24) + '-exit';
const auth = new TokenAuth([{ token: TOKEN, role: 'read' }]);
const log = createLogger({ name: 'test', level: 'silent' });

describe('exit IP in the API', () => {
  let app: FastifyInstance;
  before(async () => {
    const store = new FakeStore();
    const ok = { status: 'True' as const, reason: 'ProbePassed', since: '2026-01-01T00:05:00.000Z' };
    const conditions = { VmRunning: ok, AddressAssigned: ok, Healthy: ok };
    store.add(
      { name: 'x1', entry: 'exit', imageKey: 'i' },
      { state: 'Running', healthy: true, host: 'hv1' },
      fakeStatus({ name: 'x1', entry: 'exit', ip: '10.0.0.5', port: 3128, exitIp: '203.0.113.9', conditions }),
    );
    store.add(
      { name: 'x2', entry: 'exit', imageKey: 'i' },
      { state: 'Running', healthy: true, host: 'hv1' },
      fakeStatus({ name: 'x2', entry: 'exit', ip: '10.0.0.6', port: 3128, conditions }),
    );
    app = await buildApi({ store, log, auth, taskQueue: 'tq' });
  });
  after(async () => {
    await app.close();
  });
  const get = (url: string) => app.inject({ url, headers: { authorization: `Bearer ${TOKEN}` } });

  it('GET of a proxy returns the status with its exitIp', async () => {
    const res = await get('/v1/proxies/exit/x1');
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json<{ status: { exitIp?: string; ip?: string } }>();
    assert.equal(body.status.exitIp, '203.0.113.9');
    assert.equal(body.status.ip, '10.0.0.5');
  });

  it('discovery lists the exit IP beside the address, and none where none was read', async () => {
    const res = await get('/v1/discovery?entry=exit');
    assert.equal(res.statusCode, 200, res.body);
    const proxies = res.json<{ proxies: { name: string; address: string; exitIp?: string }[] }>().proxies;
    const byName = new Map(proxies.map((p) => [p.name, p]));
    assert.equal(byName.get('x1')?.address, '10.0.0.5:3128');
    assert.equal(byName.get('x1')?.exitIp, '203.0.113.9');
    assert.equal(byName.get('x2')?.address, '10.0.0.6:3128');
    assert.equal('exitIp' in byName.get('x2')!, false);
  });

  it('the OpenAPI document describes exitIp in the proxy status and in discovery', async () => {
    const res = await get('/openapi.json');
    assert.equal(res.statusCode, 200);
    const text = res.body;
    const doc = JSON.parse(text) as { paths: Record<string, Record<string, unknown>> };
    const getProxy = JSON.stringify(doc.paths['/v1/proxies/{entry}/{name}']?.['get']);
    const discovery = JSON.stringify(doc.paths['/v1/discovery']?.['get']);
    assert.match(getProxy, /"exitIp":\{"type":"string"/);
    assert.match(discovery, /"exitIp":\{"type":"string"/);
  });
});
