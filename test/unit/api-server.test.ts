/**
 * The HTTP API's routes over a fake Temporal store (in-process, app.inject): auth (401 vs 403,
 * the constant-time compare), validation (400 naming the field; the store is never asked to
 * start anything), idempotent create (200 / 409), discovery lists only Healthy proxies with an
 * address, page tokens cannot be forged, and no error answers with a stack trace.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { after, before, describe, it, mock } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { parseTokenFile, TokenAuth, TokenFileError } from '../../api/auth.ts';
import { API_ERRORS, TemporalUnavailableError } from '../../api/errors.ts';
import type { ApiErrorCode } from '../../api/errors.ts';
import { IDENTIFIER_PATTERN } from '../../api/schemas.ts';
import { buildApi } from '../../api/server.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { IDENTIFIER_RE } from '../../lib/rules.ts';
import { FakeStore, fakeStatus } from '../support/fake-store.ts';

const ADMIN = 'a'.repeat(20) + 'admin-token';
const READER = 'r'.repeat(20) + 'read-token';
const auth = new TokenAuth([
  { token: ADMIN, role: 'admin' },
  { token: READER, role: 'read' },
]);
const log = createLogger({ name: 'test', level: 'silent' });

describe('HTTP API over a fake store', () => {
  let app: FastifyInstance;
  let store: FakeStore;
  before(async () => {
    store = new FakeStore();
    app = await buildApi({ store, log, auth, taskQueue: 'tq' });
  });
  after(async () => {
    await app.close();
  });

  const call = (
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    o: { token?: string | null; body?: string | object; type?: string } = {},
  ) => {
    const headers: Record<string, string> = {};
    const token = o.token === undefined ? ADMIN : o.token;
    if (token !== null) headers['authorization'] = `Bearer ${token}`;
    if (o.body !== undefined) headers['content-type'] = o.type ?? 'application/json';
    const payload = typeof o.body === 'object' ? JSON.stringify(o.body) : o.body;
    return app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
  };
  const errorOf = (res: { json: () => unknown }) =>
    (res.json() as { error: { code: string; field?: string; message: string } }).error;

  describe('auth', () => {
    it('401 without a header, with another scheme and with an unknown token; each body says which', async () => {
      const none = await call('GET', '/v1/proxies', { token: null });
      assert.equal(none.statusCode, 401);
      assert.match(errorOf(none).message, /missing Authorization header/);
      const basic = await app.inject({ url: '/v1/proxies', headers: { authorization: 'Basic dXNlcjpwYXNz' } });
      assert.equal(basic.statusCode, 401);
      assert.match(errorOf(basic).message, /must be "Bearer <token>"/);
      const wrong = await call('GET', '/v1/proxies', { token: ADMIN + 'x' });
      assert.equal(wrong.statusCode, 401);
      assert.match(errorOf(wrong).message, /not one of the configured tokens/);
      for (const path of ['/metrics', '/openapi.json', '/v1/discovery', '/v1/providers', '/v1/proxies/e/n']) {
        assert.equal((await call('GET', path, { token: null })).statusCode, 401, path);
      }
    });

    it('403 for a read-only token on create and delete, saying the role it needs; GET is allowed', async () => {
      const create = await call('POST', '/v1/proxies', {
        token: READER,
        body: { name: 'p', entry: 'e', imageKey: 'i' },
      });
      assert.equal(create.statusCode, 403);
      assert.match(errorOf(create).message, /read-only.*admin role/);
      assert.equal((await call('DELETE', '/v1/proxies/e/p', { token: READER })).statusCode, 403);
      assert.equal((await call('GET', '/v1/proxies', { token: READER })).statusCode, 200);
      assert.equal(store.calls['start'] ?? 0, 0);
    });

    it('health endpoints need no token', async () => {
      assert.equal((await call('GET', '/healthz', { token: null })).statusCode, 200);
      assert.equal((await call('GET', '/readyz', { token: null })).statusCode, 200);
    });

    it('compares digests of equal length with timingSafeEqual, every configured token, no early exit', () => {
      const spy = mock.method(crypto, 'timingSafeEqual');
      syncBuiltinESMExports();
      try {
        assert.equal(auth.authenticate(`Bearer ${ADMIN}`), 'admin');
        assert.throws(() => auth.authenticate('Bearer short'), /not one of the configured/);
        assert.equal(spy.mock.callCount(), 4, 'two tokens configured, two requests');
        for (const c of spy.mock.calls) {
          const [a, b] = c.arguments as [Buffer, Buffer];
          assert.equal(a.length, 32);
          assert.equal(b.length, 32);
        }
      } finally {
        spy.mock.restore();
        syncBuiltinESMExports();
      }
    });

    it('token files: roles, comments, and short tokens refused with the fix', () => {
      assert.deepEqual(parseTokenFile(`# ops\n${ADMIN}\n\n${READER} read\n`, 'f'), [
        { token: ADMIN, role: 'admin' },
        { token: READER, role: 'read' },
      ]);
      assert.throws(
        () => parseTokenFile('short\n', 'f'),
        (e: unknown) => e instanceof TokenFileError && /f:1.*openssl rand/.test(e.message),
      );
      assert.throws(() => parseTokenFile(`${ADMIN} root\n`, 'f'), /f:1: a line is/);
      assert.throws(() => parseTokenFile('# nothing\n', 'f'), /no token/);
    });
  });

  describe('validation: 400 naming the field, nothing started', () => {
    const good = { name: 'p1', entry: 'lab', imageKey: 'deb' };
    const cases: [string, { body: string | object; type?: string }, string, string | undefined][] = [
      ['an unknown top-level field', { body: { ...good, colour: 'red' } }, 'UNKNOWN_FIELD', 'colour'],
      [
        'an unknown nested field',
        { body: { ...good, squid: { port: 3128, acl: 'all' } } },
        'UNKNOWN_FIELD',
        'squid.acl',
      ],
      ['a missing field', { body: { name: 'p1', entry: 'lab' } }, 'MISSING_FIELD', 'imageKey'],
      ['a string where an integer belongs', { body: { ...good, vm: { vcpus: '2' } } }, 'INVALID_FIELD', 'vm.vcpus'],
      ['a name with capitals', { body: { ...good, name: 'P1' } }, 'INVALID_FIELD', 'name'],
      [
        'a bad CIDR in a list',
        { body: { ...good, squid: { allowedClientCidrs: ['x'] } } },
        'INVALID_FIELD',
        'squid.allowedClientCidrs[0]',
      ],
      [
        'an open proxy (IPv4)',
        { body: { ...good, squid: { allowedClientCidrs: ['0.0.0.0/0'] } } },
        'OPEN_PROXY_REFUSED',
        'squid.allowedClientCidrs[0]',
      ],
      [
        'an open proxy (IPv6)',
        { body: { ...good, squid: { allowedClientCidrs: ['10.0.0.0/8', '::/0'] } } },
        'OPEN_PROXY_REFUSED',
        'squid.allowedClientCidrs[1]',
      ],
      ...(
        [
          [['::ffff:0.0.0.0/96'], 0],
          [['10.0.0.0/8', '0.0.0.0/1', '128.0.0.0/1'], 2],
          [['8000::/1', '::/1'], 1],
        ] as const
      ).map(([cidrs, i]): (typeof cases)[number] => [
        `an open proxy (${cidrs.join(' + ')})`,
        { body: { ...good, squid: { allowedClientCidrs: cidrs } } },
        'OPEN_PROXY_REFUSED',
        `squid.allowedClientCidrs[${i}]`,
      ]),
      ...['0/0', '0.0.0.0/00', '10.0.0.1/8'].map((cidr): (typeof cases)[number] => [
        `a block the schema's characters allow but that is not one (${cidr})`,
        { body: { ...good, squid: { allowedClientCidrs: ['10.0.0.0/8', cidr] } } },
        'INVALID_CIDR',
        'squid.allowedClientCidrs[1]',
      ]),
      ['invalid JSON', { body: '{"name": "p1",' }, 'INVALID_JSON', 'body'],
      [
        'a __proto__ key',
        { body: '{"__proto__": {"x": 1}, "name": "p1", "entry": "lab", "imageKey": "deb"}' },
        'INVALID_JSON',
        'body',
      ],
      ['text/plain', { body: 'name=p1', type: 'text/plain' }, 'UNSUPPORTED_CONTENT_TYPE', 'body'],
      [
        'form encoding',
        { body: 'name=p1', type: 'application/x-www-form-urlencoded' },
        'UNSUPPORTED_CONTENT_TYPE',
        'body',
      ],
      ['a JSON array', { body: [good] }, 'INVALID_FIELD', undefined],
    ];
    for (const [what, req, code, field] of cases) {
      const status = API_ERRORS[code as ApiErrorCode];
      it(`${what} → ${status} ${code}${field ? ` (${field})` : ''}`, async () => {
        const res = await call('POST', '/v1/proxies', req);
        assert.equal(res.statusCode, status, res.body);
        const err = errorOf(res);
        assert.equal(err.code, code);
        assert.equal(err.field, field);
        if (field !== undefined && field !== 'body') assert.ok(err.message.includes(field), err.message);
        assert.equal(store.calls['start'] ?? 0, 0, 'nothing started');
      });
    }

    it('a body over the limit → 413; unknown query fields → 400 naming them', async () => {
      const big = await call('POST', '/v1/proxies', { body: { ...good, pad: 'x'.repeat(70_000) } });
      assert.equal(big.statusCode, 413);
      assert.equal(errorOf(big).code, 'BODY_TOO_LARGE');
      const q = await call('GET', '/v1/proxies?stat=Running');
      assert.equal(q.statusCode, 400);
      assert.deepEqual([errorOf(q).code, errorOf(q).field], ['UNKNOWN_FIELD', 'stat']);
      const bool = await call('GET', '/v1/proxies?healthy=maybe');
      assert.deepEqual([bool.statusCode, errorOf(bool).field], [400, 'healthy']);
      assert.equal(store.calls['start'] ?? 0, 0);
    });

    it('the identifier rule is the providers file rule', () => {
      assert.equal(IDENTIFIER_PATTERN, IDENTIFIER_RE.source);
    });
  });

  describe('create is idempotent per (entry, name) and spec', () => {
    it('201 new, 200 same spec, 409 another spec naming what differs', async () => {
      const spec = { name: 'idem', entry: 'lab', imageKey: 'deb', vm: { vcpus: 2, memoryMiB: 512 } };
      const first = await call('POST', '/v1/proxies', { body: spec });
      assert.equal(first.statusCode, 201, first.body);
      assert.equal(first.json<{ created: boolean }>().created, true);
      // Same spec, keys in another order.
      const again = await call('POST', '/v1/proxies', {
        body: { vm: { memoryMiB: 512, vcpus: 2 }, imageKey: 'deb', entry: 'lab', name: 'idem' },
      });
      assert.equal(again.statusCode, 200, again.body);
      assert.equal(again.json<{ created: boolean }>().created, false);
      const other = await call('POST', '/v1/proxies', { body: { ...spec, vm: { vcpus: 4, memoryMiB: 512 } } });
      assert.equal(other.statusCode, 409);
      assert.equal(errorOf(other).code, 'CONFLICT');
      assert.match(errorOf(other).message, /differs in vm/);
    });
  });

  describe('discovery', () => {
    it('lists only proxies whose status is Running, Healthy and addressed, as ip:port with entry and age', async () => {
      const healthySince = '2026-01-01T00:05:00.000Z';
      const ok = { status: 'True' as const, reason: 'ProbesPass', since: healthySince };
      store.add(
        { name: 'h1', entry: 'disc', imageKey: 'i' },
        { state: 'Running', healthy: true, host: 'hv1' },
        fakeStatus({
          name: 'h1',
          entry: 'disc',
          ip: '10.0.0.5',
          port: 8080,
          host: 'hv1',
          runningSince: new Date(Date.now() - 90_000).toISOString(),
          conditions: { VmRunning: ok, AddressAssigned: ok, Healthy: ok },
        }),
      );
      // Listed as healthy (search attributes lag) but the status says otherwise: left out.
      store.add(
        { name: 'h2', entry: 'disc', imageKey: 'i' },
        { state: 'Running', healthy: true },
        fakeStatus({ name: 'h2', entry: 'disc', ip: '10.0.0.6' }),
      );
      // Not healthy at all.
      store.add(
        { name: 'h3', entry: 'disc', imageKey: 'i' },
        { state: 'Running', healthy: false },
        fakeStatus({
          name: 'h3',
          entry: 'disc',
          ip: '10.0.0.7',
          conditions: { VmRunning: ok, AddressAssigned: ok, Healthy: ok },
        }),
      );
      // Healthy but its query fails: skipped and counted.
      store.add({ name: 'h4', entry: 'disc', imageKey: 'i' }, { state: 'Running', healthy: true });
      const res = await call('GET', '/v1/discovery?entry=disc');
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json<{ proxies: Record<string, unknown>[]; skipped: number }>();
      assert.equal(body.skipped, 1);
      assert.equal(body.proxies.length, 1);
      const [p] = body.proxies;
      assert.equal(p!['address'], '10.0.0.5:8080');
      assert.equal(p!['entry'], 'disc');
      assert.equal(p!['name'], 'h1');
      assert.equal(p!['host'], 'hv1');
      assert.equal(p!['healthySince'], healthySince);
      assert.ok((p!['ageSeconds'] as number) >= 89 && (p!['ageSeconds'] as number) < 200, String(p!['ageSeconds']));
    });
  });

  describe('paging', () => {
    it('page tokens round-trip, and an altered one, or one reused with other filters, is a 400 before Temporal', async () => {
      for (let i = 0; i < 3; i++) store.add({ name: `pg${i}`, entry: 'paging', imageKey: 'i' }, { state: 'Running' });
      const first = await call('GET', '/v1/proxies?entry=paging&pageSize=2');
      const token = first.json<{ nextPageToken?: string }>().nextPageToken;
      assert.ok(token, first.body);
      assert.equal((await call('GET', `/v1/proxies?entry=paging&pageSize=2&pageToken=${token}`)).statusCode, 200);
      const lists = store.calls['list'];
      const altered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
      for (const url of [
        `/v1/proxies?entry=paging&pageToken=${altered}`,
        `/v1/proxies?entry=other&pageToken=${token}`,
      ]) {
        const res = await call('GET', url);
        assert.equal(res.statusCode, 422);
        assert.deepEqual([errorOf(res).code, errorOf(res).field], ['INVALID_PAGE_TOKEN', 'pageToken']);
      }
      assert.equal(store.calls['list'], lists, 'Temporal was not asked');
    });
  });

  describe('errors', () => {
    it('Temporal unavailable → 503 with a plain message; an unexpected error → 500 without a stack', async () => {
      store.failWith = new TemporalUnavailableError('connect ECONNREFUSED');
      try {
        const res = await call('GET', '/v1/proxies');
        assert.equal(res.statusCode, 503);
        assert.deepEqual(res.json(), {
          error: {
            code: 'TEMPORAL_UNAVAILABLE',
            message: 'Temporal is unavailable or did not answer in time; retry later',
          },
        });
        store.failWith = new TypeError('boom');
        const boom = await call('GET', '/v1/proxies/e/n');
        assert.equal(boom.statusCode, 500);
        assert.equal(errorOf(boom).code, 'INTERNAL');
        assert.doesNotMatch(boom.body, /boom|at .*\.ts|TypeError/);
      } finally {
        store.failWith = undefined;
      }
    });

    it('unknown routes are JSON 404s; the OpenAPI document lists every route', async () => {
      const res = await call('GET', '/v2/nothing');
      assert.equal(res.statusCode, 404);
      assert.equal(errorOf(res).code, 'NOT_FOUND');
      const doc = (await call('GET', '/openapi.json')).json<{ paths: Record<string, Record<string, unknown>> }>();
      assert.deepEqual(Object.keys(doc.paths).sort(), [
        '/healthz',
        '/metrics',
        '/readyz',
        '/v1/discovery',
        '/v1/providers',
        '/v1/proxies',
        '/v1/proxies/{entry}/{name}',
        '/v1/proxies/{entry}/{name}/resize',
      ]);
      assert.deepEqual(Object.keys(doc.paths['/v1/proxies']!).sort(), ['get', 'post']);
      assert.deepEqual(Object.keys(doc.paths['/v1/proxies/{entry}/{name}']!).sort(), ['delete', 'get']);
    });

    it('/metrics is Prometheus text with proxies by state and request counts', async () => {
      const res = await call('GET', '/metrics');
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/plain/);
      assert.match(res.body, /^egress_proxies\{state="Running"\} \d+$/m);
      assert.match(res.body, /^egress_api_requests_total\{method="GET",route="\/v1\/proxies",status="200"\} \d+$/m);
      assert.match(res.body, /^egress_api_temporal_up 1$/m);
    });
  });
});
