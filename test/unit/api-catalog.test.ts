/**
 * Validation before start against the workers' catalog (api/catalog.ts, client/catalog.ts): an
 * unknown entry or image key is a 422 naming the field and the known values; no catalog, or two
 * workers that publish different ones, is a 503; in every case nothing is started.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { viewOf } from '../../client/catalog.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeStore, fakeCatalog } from '../support/fake-store.ts';

const TOKEN = 'a'.repeat(32);

describe('validation against the catalog', () => {
  let app: FastifyInstance;
  const store = new FakeStore();
  const warmer = {
    start: () => Promise.reject(new Error('must not start')),
    view: () => Promise.resolve(undefined),
  };

  before(async () => {
    app = await buildApi({
      store,
      warmer,
      log: createLogger({ name: 'api-catalog-test', level: 'silent' }),
      auth: new TokenAuth([{ token: TOKEN, role: 'admin' }]),
      taskQueue: 'tq',
    });
  });
  after(() => app.close());

  const post = (url: string, body?: unknown) =>
    app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${TOKEN}` },
      ...(body ? { payload: body } : {}),
    });
  const err = (res: { body: string }) =>
    (JSON.parse(res.body) as { error: { code: string; field?: string; message: string } }).error;

  const cases: [
    string,
    () => Promise<{ statusCode: number; body: string }>,
    number,
    string,
    string | undefined,
    RegExp,
  ][] = [
    [
      'an unknown entry',
      () => post('/v1/proxies', { name: 'p', entry: 'nope', imageKey: 'deb' }),
      422,
      'UNKNOWN_ENTRY',
      'entry',
      /known: disc, e, lab|known: lab, e, disc/,
    ],
    [
      'an unknown image key',
      () => post('/v1/proxies', { name: 'p', entry: 'lab', imageKey: 'nope' }),
      422,
      'UNKNOWN_IMAGE',
      'imageKey',
      /known: deb/,
    ],
    ['a warm of an unknown entry', () => post('/v1/images/nope/deb/warm'), 422, 'UNKNOWN_ENTRY', 'entry', /known/],
    ['a warm of an unknown key', () => post('/v1/images/lab/nope/warm'), 422, 'UNKNOWN_IMAGE', 'key', /known: deb/],
  ];
  for (const [what, call, status, code, field, message] of cases) {
    it(`${what} → ${status} ${code}, nothing started`, async () => {
      const before = store.calls['start'] ?? 0;
      const res = await call();
      assert.equal(res.statusCode, status, res.body);
      assert.equal(err(res).code, code);
      assert.equal(err(res).field, field);
      assert.match(err(res).message, message);
      assert.equal(store.calls['start'] ?? 0, before);
    });
  }

  it('no catalog published → 503 CATALOG_UNAVAILABLE, nothing started', async () => {
    const saved = store.catalogView;
    store.catalogView = { kind: 'none', reason: 'no catalog workflow catalog/tq: no worker of tq ran yet' };
    try {
      const res = await post('/v1/proxies', { name: 'p', entry: 'lab', imageKey: 'deb' });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(err(res).code, 'CATALOG_UNAVAILABLE');
      assert.match(err(res).message, /start a worker/);
      assert.equal(store.calls['start'] ?? 0, 0);
    } finally {
      store.catalogView = saved;
    }
  });

  it('two workers with different catalogs → a conflict naming the difference', () => {
    const now = Date.parse('2026-01-01T00:01:00Z');
    const at = '2026-01-01T00:00:30Z';
    const view = viewOf(
      [
        { publisher: 'w1', publishedAt: at, catalog: fakeCatalog({ lab: ['deb'] }, 'd1') },
        { publisher: 'w2', publishedAt: at, catalog: fakeCatalog({ lab: ['deb', 'alp'] }, 'd2') },
      ],
      now,
    );
    assert.equal(view.kind, 'conflict');
    assert.match(
      view.kind === 'conflict' ? view.difference : '',
      /w1.*w2.*entry lab images: \["deb"\] vs \["deb","alp"\]/,
    );
    // A stale publication (a worker that went away) does not count.
    const stale = viewOf(
      [
        { publisher: 'w1', publishedAt: at, catalog: fakeCatalog({ lab: ['deb'] }, 'd1') },
        { publisher: 'w0', publishedAt: '2025-12-31T00:00:00Z', catalog: fakeCatalog({ lab: [] }, 'd0') },
      ],
      now,
    );
    assert.equal(stale.kind, 'ok');
  });

  it('the known proxy is accepted: the catalog allows it', async () => {
    const res = await post('/v1/proxies', { name: 'okp', entry: 'lab', imageKey: 'deb' });
    assert.equal(res.statusCode, 201, res.body);
  });
});
