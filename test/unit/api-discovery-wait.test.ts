/**
 * Discovery by pool's long-poll (`?wait=` with If-None-Match) over a fake pool store: the request is
 * held while the ETag is the one the client has, re-reading the pool about once a second, and
 * answers 200 with the new list as soon as a read differs, 304 when the wait ends, 404 when the
 * pool goes away; a client that disconnects stops the re-reads; a closing server answers held
 * requests at once; requests held on one pool share their re-reads. A bad wait is a 400 naming `wait`.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { sleep, until, within } from '../support/bounded.ts';
import { FakePools, FakeStore, fakeMember } from '../support/fake-store.ts';

const TOKEN = 'r'.repeat(32);
const URL_BASE = '/v1/discovery?pool=lab/crawl';

/** FakePools that counts status reads and runs `onRead` (with the read's number) before each. */
class CountingPools extends FakePools {
  reads = 0;
  onRead: (n: number) => void = () => undefined;
  override poolStatus(entry: string, name: string): Promise<PoolStatus | undefined> {
    this.reads++;
    this.onRead(this.reads);
    return super.poolStatus(entry, name);
  }
}

async function api(pools: FakePools): Promise<FastifyInstance> {
  return buildApi({
    store: new FakeStore(),
    pools,
    log: createLogger({ name: 'api-discovery-wait-test', level: 'silent' }),
    auth: new TokenAuth([{ token: TOKEN, role: 'read' }]),
    taskQueue: 'tq',
    writesPerMinute: 0,
  });
}

describe('discovery by pool: the long-poll', () => {
  let app: FastifyInstance;
  const pools = new CountingPools();
  let etag: string;

  const get = (query = '', headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url: URL_BASE + query, headers: { authorization: `Bearer ${TOKEN}`, ...headers } });
  const field = (res: { body: string }) => (JSON.parse(res.body) as { error: { field?: string } }).error.field;

  before(async () => {
    app = await api(pools);
  });
  after(() => app.close());
  beforeEach(async () => {
    pools.pools.clear();
    pools.add(
      { entry: 'lab', name: 'crawl', size: 2, template: { imageKey: 'deb' } },
      {
        members: [
          fakeMember({ name: 'crawl-aaaaa', address: '10.0.0.1:3128' }),
          fakeMember({ name: 'crawl-bbbbb', address: '10.0.0.2:3128' }),
        ],
      },
    );
    pools.onRead = () => undefined;
    etag = String((await get()).headers['etag']);
    pools.reads = 0;
  });

  it('answers 200 with the new list and ETag once a re-read differs, after a bounded number of reads', async () => {
    pools.onRead = (n) => {
      if (n === 3) {
        const p = pools.pools.get('pool/lab/crawl')!;
        p.status.members = p.status.members.slice(1);
      }
    };
    const res = await within(get('&wait=30', { 'if-none-match': etag }), 20_000, 'the held request');
    assert.equal(res.statusCode, 200, res.body);
    assert.notEqual(res.headers['etag'], etag);
    assert.deepEqual(
      (JSON.parse(res.body) as { proxies: { name: string }[] }).proxies.map((p) => p.name),
      ['crawl-bbbbb'],
    );
    assert.equal(pools.reads, 3, 'the first read, one re-read that matched, the one that changed');
  });

  it('answers 304 when the wait ends with the list unchanged; about one read a second in between', async () => {
    const res = await within(get('&wait=2', { 'if-none-match': etag }), 20_000, 'the held request');
    assert.deepEqual([res.statusCode, res.body, res.headers['etag']], [304, '', etag]);
    assert.ok(pools.reads >= 2 && pools.reads <= 4, `${pools.reads} reads in a 2 s wait`);
  });

  it('requests held on one pool share their re-reads', async () => {
    const held = (): ReturnType<typeof get> => get('&wait=2', { 'if-none-match': etag });
    const answers = await within(Promise.all([held(), held(), held()]), 20_000, 'the held requests');
    assert.deepEqual(
      answers.map((r) => r.statusCode),
      [304, 304, 304],
    );
    // Each request's own first read, then about two shared re-reads: five (unshared: nine).
    assert.ok(pools.reads <= 6, `${pools.reads} reads for three 2 s waits`);
  });

  it('answers at once without If-None-Match, with another ETag, or with wait=0', async () => {
    assert.equal((await get('&wait=30')).statusCode, 200);
    assert.equal((await get('&wait=30', { 'if-none-match': 'W/"other"' })).statusCode, 200);
    assert.equal((await get('&wait=0', { 'if-none-match': etag })).statusCode, 304);
    assert.equal(pools.reads, 3, 'one read each');
  });

  it('answers 404 when the pool goes away while the request is held', async () => {
    pools.onRead = (n) => {
      if (n === 2) pools.pools.clear();
    };
    const res = await within(get('&wait=30', { 'if-none-match': etag }), 20_000, 'the held request');
    assert.equal(res.statusCode, 404, res.body);
  });

  it('refuses a bad wait with a 400 naming it; without pool, wait is ignored', async () => {
    for (const q of ['&wait=61', '&wait=-1', '&wait=1.5', '&wait=soon']) {
      const res = await get(q);
      assert.deepEqual([res.statusCode, field(res)], [400, 'wait'], `${q}: ${res.body}`);
    }
    // Unfiltered discovery has no ETag to wait on: wait is ignored, the answer comes at once.
    const unfiltered = await app.inject({
      method: 'GET',
      url: '/v1/discovery?wait=10',
      headers: { authorization: `Bearer ${TOKEN}`, 'if-none-match': '*' },
    });
    assert.equal(unfiltered.statusCode, 200, unfiltered.body);
    assert.equal(pools.reads, 0);
  });

  it('stops re-reading when the client disconnects', async () => {
    const server = await api(pools);
    try {
      await server.listen({ host: '127.0.0.1', port: 0 });
      const { port } = server.server.address() as AddressInfo;
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        path: `${URL_BASE}&wait=60`,
        headers: { authorization: `Bearer ${TOKEN}`, 'if-none-match': etag },
      });
      req.on('error', () => undefined);
      req.end();
      await until(() => pools.reads >= 2, 10_000, 'a re-read of the held request');
      req.destroy();
      const atClose = pools.reads;
      await sleep(2_500);
      assert.ok(pools.reads <= atClose + 1, `${pools.reads - atClose} reads after the client left`);
    } finally {
      await server.close();
    }
  });

  it('a closing server answers held requests at once', async () => {
    const closing = await api(pools);
    const held = closing.inject({
      method: 'GET',
      url: `${URL_BASE}&wait=60`,
      headers: { authorization: `Bearer ${TOKEN}`, 'if-none-match': etag },
    });
    await until(() => pools.reads >= 1, 10_000, 'the held request read the pool');
    await within(closing.close(), 10_000, 'close with a held request');
    const res = await within(held, 10_000, 'the held request');
    assert.equal(res.statusCode, 304);
  });
});
