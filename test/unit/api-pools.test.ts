/**
 * /v1/pools and discovery by pool over the fake stores: bad input is a 400 naming the field
 * (schema, then contracts/pool.ts poolSpecProblems) before any pool call; the catalog checks the
 * template like a proxy create; the same spec again is 200, another a 409; what the pool refuses is
 * a 409 POOL_UPDATE_REFUSED with its reason; writes need the admin role; discovery by pool answers
 * the available members with ready/desired and a weak ETag (304 on If-None-Match). The schema's
 * ranges are held to poolSpecProblems field by field.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Ajv } from 'ajv';
import { TokenAuth } from '../../api/auth.ts';
import { etagMatches } from '../../api/routes-ops.ts';
import { poolSummaryOf } from '../../client/pools.ts';
import { poolSpecSchema } from '../../api/schemas-pools.ts';
import { buildApi } from '../../api/server.ts';
import { poolSpecProblems } from '../../contracts/pool.ts';
import type { PoolSpec } from '../../contracts/pool.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakePools, FakeStore, fakeMember } from '../support/fake-store.ts';

const ADMIN = 'a'.repeat(32);
const READER = 'r'.repeat(32);
const spec = (o: Partial<PoolSpec> = {}): PoolSpec => ({
  entry: 'lab',
  name: 'crawl',
  size: 2,
  template: { imageKey: 'deb' },
  ...o,
});

describe('pool routes', () => {
  let app: FastifyInstance;
  const store = new FakeStore();
  const pools = new FakePools();

  before(async () => {
    app = await buildApi({
      store,
      pools,
      log: createLogger({ name: 'api-pools-test', level: 'silent' }),
      auth: new TokenAuth([
        { token: ADMIN, role: 'admin' },
        { token: READER, role: 'read' },
      ]),
      taskQueue: 'tq',
      writesPerMinute: 0,
    });
  });
  after(() => app.close());

  const call = (method: string, url: string, payload?: unknown, o: { token?: string; headers?: object } = {}) =>
    app.inject({
      method: method as 'GET',
      url,
      headers: { authorization: `Bearer ${o.token ?? ADMIN}`, ...o.headers },
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
  const error = (res: { body: string }) =>
    (JSON.parse(res.body) as { error: { code: string; message: string; field?: string } }).error;
  const json = <T = Record<string, unknown>>(res: { body: string }) => JSON.parse(res.body) as T;

  it('refuses bad specs with a 400 naming the field before any pool call', async () => {
    const cases: [unknown, string][] = [
      [spec({ size: 1001 }), 'size'],
      [spec({ name: 'a'.repeat(35) }), 'name'],
      [{ ...spec(), extra: 1 }, 'extra'],
      [spec({ template: { imageKey: 'deb', vm: { vcpus: 65 } } }), 'template.vm.vcpus'],
      [spec({ rollout: { maxSurge: 0 } }), 'rollout.maxSurge'],
      [spec({ rotation: { jitter: 0.9 } }), 'rotation.jitter'],
    ];
    for (const [body, field] of cases) {
      const res = await call('POST', '/v1/pools', body);
      assert.deepEqual([res.statusCode, error(res).field], [400, field], res.body);
    }
    assert.match(error(await call('POST', '/v1/pools', spec({ rollout: { maxSurge: 0 } }))).message, /set one of them/);
    assert.equal(pools.pools.size, 0);
  });

  it('checks the template against the catalog like a proxy create (422 naming template.*)', async () => {
    const img = await call('POST', '/v1/pools', spec({ template: { imageKey: 'nope' } }));
    assert.deepEqual([img.statusCode, error(img).code, error(img).field], [422, 'UNKNOWN_IMAGE', 'template.imageKey']);
    const entry = await call('POST', '/v1/pools', spec({ entry: 'mars' }));
    assert.deepEqual([entry.statusCode, error(entry).code], [422, 'UNKNOWN_ENTRY']);
    const open = await call(
      'POST',
      '/v1/pools',
      spec({ template: { imageKey: 'deb', squid: { allowedClientCidrs: ['0.0.0.0/0'] } } }),
    );
    assert.deepEqual([open.statusCode, error(open).field], [422, 'template.squid.allowedClientCidrs[0]']);
    assert.equal(pools.pools.size, 0);
  });

  it('creates: 201, the same spec again 200, another spec 409 naming the fields; a read token is 403', async () => {
    const first = await call('POST', '/v1/pools', spec());
    assert.equal(first.statusCode, 201, first.body);
    assert.deepEqual(json(first)['created'], true);
    const again = await call('POST', '/v1/pools', spec());
    assert.deepEqual([again.statusCode, json(again)['created']], [200, false]);
    const other = await call('POST', '/v1/pools', spec({ size: 3 }));
    assert.deepEqual([other.statusCode, error(other).code], [409, 'CONFLICT']);
    assert.match(error(other).message, /differs in size/);
    const reader = await call('POST', '/v1/pools', spec({ name: 'other' }), { token: READER });
    assert.equal(reader.statusCode, 403);
  });

  it('lists (by entry) and gets; an unknown pool is 404', async () => {
    pools.add(spec({ entry: 'e', name: 'elsewhere' }));
    const all = json<{ pools: { name: string }[] }>(await call('GET', '/v1/pools', undefined, { token: READER }));
    assert.deepEqual(all.pools.map((p) => p.name).sort(), ['crawl', 'elsewhere']);
    const lab = json<{ pools: { name: string }[] }>(await call('GET', '/v1/pools?entry=lab'));
    assert.deepEqual(
      lab.pools.map((p) => p.name),
      ['crawl'],
    );
    const got = await call('GET', '/v1/pools/lab/crawl', undefined, { token: READER });
    assert.equal(got.statusCode, 200);
    assert.equal(json<{ status: { desired: number } }>(got).status.desired, 2);
    assert.equal((await call('GET', '/v1/pools/lab/none')).statusCode, 404);
  });

  it('scale: 400 naming size over the limit, 200 with the new status, 404 for no pool', async () => {
    const big = await call('POST', '/v1/pools/lab/crawl/scale', { size: 1001 });
    assert.deepEqual([big.statusCode, error(big).field], [400, 'size']);
    const ok = await call('POST', '/v1/pools/lab/crawl/scale', { size: 3, spares: 1 });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(json<{ status: { desired: number } }>(ok).status.desired, 3);
    assert.equal((await call('POST', '/v1/pools/lab/none/scale', { size: 1 })).statusCode, 404);
    assert.equal((await call('POST', '/v1/pools/lab/crawl/scale', undefined)).statusCode, 400);
  });

  it('PATCH: the merged spec is checked (400 naming the field), a template makes revision 2', async () => {
    const before = pools.updates.length;
    const bad = await call('PATCH', '/v1/pools/lab/crawl', { rollout: { maxSurge: 0 } });
    assert.deepEqual([bad.statusCode, error(bad).field], [400, 'rollout.maxSurge'], bad.body);
    const img = await call('PATCH', '/v1/pools/lab/crawl', { template: { imageKey: 'nope' } });
    assert.deepEqual([img.statusCode, error(img).field], [422, 'template.imageKey']);
    assert.equal(pools.updates.length, before, 'nothing was sent');
    const ok = await call('PATCH', '/v1/pools/lab/crawl', { template: { imageKey: 'deb', vm: { memoryMiB: 1024 } } });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(json<{ status: { revision: number } }>(ok).status.revision, 2);
    assert.equal((await call('PATCH', '/v1/pools/lab/crawl', {})).statusCode, 400);
  });

  it('the pool refusing an update is a 409 POOL_UPDATE_REFUSED with its reason', async () => {
    pools.add(spec({ name: 'single' }));
    const rb = await call('POST', '/v1/pools/lab/single/rollback', {});
    assert.deepEqual([rb.statusCode, error(rb).code], [409, 'POOL_UPDATE_REFUSED']);
    assert.match(error(rb).message, /only one revision/);
    pools.refuse = 'the pool is being deleted';
    const paused = await call('POST', '/v1/pools/lab/single/pause');
    assert.deepEqual([paused.statusCode, error(paused).code], [409, 'POOL_UPDATE_REFUSED']);
    assert.match(error(paused).message, /being deleted/);
    const p = await call('POST', '/v1/pools/lab/single/pause');
    assert.equal(json<{ status: { paused: boolean } }>(p).status.paused, true);
    const r = await call('POST', '/v1/pools/lab/single/resume');
    assert.equal(json<{ status: { paused: boolean } }>(r).status.paused, false);
    const back = await call('POST', '/v1/pools/lab/crawl/rollback', {});
    assert.equal((await call('POST', '/v1/pools/lab/crawl/rollback')).statusCode, 400, 'the body is required');
    assert.equal(back.statusCode, 200, back.body);
    assert.equal(json<{ status: { revision: number } }>(back).status.revision, 1);
  });

  it('replace a member: 200 counted, the reason required and bounded (400), an unknown member 409, a read token 403', async () => {
    pools.add(spec({ name: 'banned', size: 1 }), { members: [fakeMember({ name: 'banned-a1b2c' })] });
    const path = '/v1/pools/lab/banned/members';
    const before = pools.updates.length;
    const none = await call('POST', `${path}/banned-a1b2c/replace`, {});
    assert.deepEqual([none.statusCode, error(none).field], [400, 'reason'], none.body);
    const long = await call('POST', `${path}/banned-a1b2c/replace`, { reason: 'x'.repeat(201) });
    assert.equal(long.statusCode, 400, long.body);
    const reader = await call('POST', `${path}/banned-a1b2c/replace`, { reason: 'banned' }, { token: READER });
    assert.equal(reader.statusCode, 403);
    assert.equal(pools.updates.length, before, 'nothing was sent');
    const ok = await call('POST', `${path}/banned-a1b2c/replace`, { reason: 'banned by the target' });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(json<{ status: { replacedOnRequest: number } }>(ok).status.replacedOnRequest, 1);
    assert.deepEqual(pools.updates.at(-1), {
      kind: 'replaceMember',
      request: { name: 'banned-a1b2c', reason: 'banned by the target' },
    });
    const unknown = await call('POST', `${path}/banned-zzzzz/replace`, { reason: 'banned' });
    assert.deepEqual([unknown.statusCode, error(unknown).code], [409, 'POOL_UPDATE_REFUSED'], unknown.body);
    assert.match(error(unknown).message, /no member banned-zzzzz/);
  });

  it('delete: 202 accepted, ?wait=true 200 once ended, an ended pool 200, a read token 403', async () => {
    assert.equal((await call('DELETE', '/v1/pools/lab/single', undefined, { token: READER })).statusCode, 403);
    const accepted = await call('DELETE', '/v1/pools/lab/single');
    assert.deepEqual([accepted.statusCode, json(accepted)['done']], [202, false]);
    pools.deleteEnds = false;
    const pending = await call('DELETE', '/v1/pools/lab/single?wait=true&waitMs=5');
    assert.equal(pending.statusCode, 202);
    assert.match(String(json(pending)['message']), /still deleting after 5 ms/);
    pools.deleteEnds = true;
    const done = await call('DELETE', '/v1/pools/lab/single?wait=true&waitMs=1000');
    assert.equal(done.statusCode, 200, done.body);
    assert.equal(json<{ status: { phase: string } }>(done).status.phase, 'Deleted');
    const again = await call('DELETE', '/v1/pools/lab/single');
    assert.deepEqual([again.statusCode, json(again)['done']], [200, true]);
    assert.equal((await call('DELETE', '/v1/pools/lab/none')).statusCode, 404);
  });

  it('discovery by pool: available members only, ready/desired, an ETag and 304 until the list changes', async () => {
    const p = pools.add(spec({ name: 'disc', size: 2, spares: 1 }), {
      members: [
        fakeMember({ name: 'disc-bbbbb', address: '10.0.0.2:3128', host: 'hv2' }),
        fakeMember({ name: 'disc-aaaaa', address: '10.0.0.1:3128', ageMs: 5_500 }),
        fakeMember({ name: 'disc-spare', role: 'spare', available: false }),
        fakeMember({ name: 'disc-boot', state: 'Booting', healthy: 'Unknown', available: false, address: undefined }),
      ],
    });
    const res = await call('GET', '/v1/discovery?pool=lab/disc', undefined, { token: READER });
    assert.equal(res.statusCode, 200, res.body);
    const body = json<{ proxies: { name: string; ageSeconds: number }[]; ready: number; desired: number }>(res);
    assert.deepEqual(
      body.proxies.map((x) => x.name),
      ['disc-aaaaa', 'disc-bbbbb'],
    );
    assert.deepEqual([body.ready, body.desired, body.proxies[0]!.ageSeconds], [2, 2, 5]);
    const etag = String(res.headers['etag']);
    assert.match(etag, /^W\/"[A-Za-z0-9_-]+"$/);
    const same = await call('GET', '/v1/discovery?pool=lab/disc', undefined, { headers: { 'if-none-match': etag } });
    assert.deepEqual([same.statusCode, same.body], [304, '']);
    p.status.members = p.status.members.slice(1);
    const changed = await call('GET', '/v1/discovery?pool=lab/disc', undefined, { headers: { 'if-none-match': etag } });
    assert.equal(changed.statusCode, 200);
    assert.notEqual(changed.headers['etag'], etag);
    assert.equal(json<{ ready: number }>(changed).ready, 1);
    assert.equal((await call('GET', '/v1/discovery?pool=lab/none')).statusCode, 404);
    const mixed = await call('GET', '/v1/discovery?pool=lab/disc&entry=e');
    assert.deepEqual([mixed.statusCode, error(mixed).code], [404, 'NOT_FOUND'], 'a pool of lab is not in entry e');
    assert.equal((await call('GET', '/v1/discovery?pool=lab/disc&entry=lab')).statusCode, 200);
    assert.equal((await call('GET', '/v1/discovery?pool=lab')).statusCode, 400);
  });

  it('If-None-Match: weak comparison, lists and *', () => {
    assert.ok(etagMatches('W/"abc"', 'W/"abc"'));
    assert.ok(etagMatches('"abc"', 'W/"abc"'));
    assert.ok(etagMatches('"x", W/"abc"', 'W/"abc"'));
    assert.ok(etagMatches('*', 'W/"abc"'));
    assert.ok(!etagMatches('W/"abd"', 'W/"abc"'));
    assert.ok(!etagMatches(undefined, 'W/"abc"'));
  });

  it('/metrics has the counts of each open pool from its memo, labelled by entry and pool', async () => {
    const p = pools.add(spec({ name: 'metered', size: 3 }));
    Object.assign(p.summary, {
      healthy: 2,
      available: 2,
      spares: 1,
      updated: 3,
      replacements: 4,
      rollbacks: 1,
      phase: 'Degraded',
    });
    const text = (await call('GET', '/metrics')).body;
    const value = (metric: string): string | undefined =>
      new RegExp(`^${metric}\\{entry="lab",pool="metered"\\} (\\S+)$`, 'm').exec(text)?.[1];
    assert.equal(value('egress_pool_desired'), '3');
    assert.equal(value('egress_pool_available'), '2');
    assert.equal(value('egress_pool_healthy'), '2');
    assert.equal(value('egress_pool_spares'), '1');
    assert.equal(value('egress_pool_updated'), '3');
    assert.equal(value('egress_pool_replacements'), '4');
    assert.equal(value('egress_pool_rollbacks'), '1');
    assert.match(text, /^egress_pool_phase\{entry="lab",pool="metered",phase="Degraded"\} 1$/m);
    assert.doesNotMatch(text, /^egress_pool_phase\{entry="lab",pool="metered",phase="Ready"\}/m, 'one phase a pool');
    pools.pools.delete(p.summary.workflowId);
  });

  it('the OpenAPI document has every pool route with its operationId', async () => {
    const doc = json<{ paths: Record<string, Record<string, { operationId?: string }>> }>(
      await call('GET', '/openapi.json'),
    );
    const ids = (path: string) =>
      Object.values(doc.paths[path] ?? {})
        .map((o) => o.operationId)
        .sort();
    assert.deepEqual(ids('/v1/pools'), ['createPool', 'listPools']);
    assert.deepEqual(ids('/v1/pools/{entry}/{pool}'), ['deletePool', 'getPool', 'updatePool']);
    for (const op of ['scale', 'pause', 'resume', 'rollback']) {
      assert.deepEqual(ids(`/v1/pools/{entry}/{pool}/${op}`), [`${op}Pool`]);
    }
    assert.deepEqual(ids('/v1/pools/{entry}/{pool}/members/{member}/replace'), ['replacePoolMember']);
  });
});

describe('the pool spec schema and poolSpecProblems agree on every range', () => {
  const ajv = new Ajv({ strict: false });
  const check = ajv.compile(poolSpecSchema);
  const ranges: [string, number, number][] = [
    ['size', 0, 1000],
    ['spares', 0, 100],
    ['placement.maxPerHost', 1, 1100],
    ['rollout.maxSurge', 0, 1000],
    ['rollout.maxUnavailable', 0, 1000],
    ['rollout.minHealthyMs', 0, 30 * 86_400_000],
    ['rollout.progressDeadlineMs', 10_000, 30 * 86_400_000],
    ['replacement.unhealthyGraceMs', 0, 30 * 86_400_000],
    ['replacement.startupGraceMs', 0, 30 * 86_400_000],
    ['replacement.hostFailureGraceMs', 0, 30 * 86_400_000],
    ['replacement.maxFailures', 1, 100],
    ['replacement.windowMs', 1000, 30 * 86_400_000],
    ['replacement.backoffMs', 1000, 30 * 86_400_000],
    ['replacement.requestedPerHour', 0, 100],
    ['rotation.maxAgeMs', 60_000, 365 * 86_400_000],
    ['drainDelayMs', 0, 3_600_000],
  ];
  const withField = (path: string, v: number): PoolSpec => {
    const s = spec({ rollout: { maxUnavailable: 1 } }) as unknown as Record<string, Record<string, unknown>>;
    const [a, b] = path.split('.');
    if (b === undefined) (s as Record<string, unknown>)[a!] = v;
    else s[a!] = { ...s[a!], [b]: v };
    return s as unknown as PoolSpec;
  };
  for (const [path, min, max] of ranges) {
    it(path, () => {
      for (const [v, ok] of [
        [min, true],
        [max, true],
        [min - 1, false],
        [max + 1, false],
      ] as const) {
        const s = withField(path, v);
        // maxUnavailable 1 keeps the both-zero rule out of the way of maxSurge 0.
        if (path === 'rollout.maxUnavailable' && v === 0) s.rollout!.maxSurge = 1;
        assert.equal(check(s), ok, `${path}=${v} schema`);
        assert.equal(poolSpecProblems(s).length === 0, ok, `${path}=${v}: ${poolSpecProblems(s).join('; ')}`);
      }
    });
  }
});

describe('poolSummaryOf: a pool as visibility lists it', () => {
  it('reads the counts from the memo, and the names from the workflow ID when the memo lacks them', () => {
    const info = {
      workflowId: 'pool/lab/crawl',
      runId: 'r1',
      status: { name: 'RUNNING' },
      startTime: new Date('2026-01-01T00:00:00Z'),
      memo: {
        phase: 'Progressing',
        desired: 3,
        healthy: 2,
        available: 2,
        updated: 1,
        revision: 2,
        replacements: 4,
        rollbacks: 1,
        spares: 'x',
      },
    } as unknown as Parameters<typeof poolSummaryOf>[0];
    assert.deepEqual(poolSummaryOf(info), {
      name: 'crawl',
      entry: 'lab',
      workflowId: 'pool/lab/crawl',
      runId: 'r1',
      execution: 'RUNNING',
      startTime: '2026-01-01T00:00:00.000Z',
      phase: 'Progressing',
      desired: 3,
      healthy: 2,
      available: 2,
      updated: 1,
      revision: 2,
      replacements: 4,
      rollbacks: 1,
    });
  });
});
