/**
 * The fleet page's routes inside the real API (app.inject, a fake store): /fleet, its script and
 * its style answer without a token, with a strict Content-Security-Policy and nothing inline or
 * from another origin; the JSON routes the page calls still answer 401 without a token and 200
 * with a read token; the script never parses data as HTML; a bad refresh interval is refused.
 * What the script renders from the real routes over stand-in pools (test/support/fleet-script.ts):
 * each pool's door (its address and exits up of all, "no door", nothing when the status could not
 * be read), each exit's role and up or down, names holding markup as text, and no request more
 * than the list, one status per pool and the hosts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { FLEET_PAGE_CSP, registerFleetPage } from '../../api/fleet-page.ts';
import { buildApi } from '../../api/server.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeHosts } from '../support/fake-hosts.ts';
import { FakePools, FakeStore, fakeMember } from '../support/fake-store.ts';
import { renderFleetPage, rowsOf, textOf } from '../support/fleet-script.ts';
import type { RenderedPage, El } from '../support/fleet-script.ts';

const READER = 'r'.repeat(20) + 'read-token';
const auth = new TokenAuth([{ token: READER, role: 'read' }]);
const log = createLogger({ name: 'test', level: 'silent' });

describe('the fleet page in the API', () => {
  let app: FastifyInstance;
  before(async () => {
    const hosts = new FakeHosts();
    hosts.add('e', 'h1');
    app = await buildApi({ store: new FakeStore(), pools: new FakePools(), hosts, log, auth, taskQueue: 'tq' });
  });
  after(async () => {
    await app.close();
  });

  it('serves the page, its script and its style without a token, each with the strict CSP', async () => {
    const parts = [
      ['/fleet', /^text\/html; charset=utf-8$/],
      ['/fleet/app.js', /^text\/javascript; charset=utf-8$/],
      ['/fleet/app.css', /^text\/css; charset=utf-8$/],
    ] as const;
    for (const [url, type] of parts) {
      const res = await app.inject({ url });
      assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 300)}`);
      assert.match(String(res.headers['content-type']), type, url);
      assert.equal(res.headers['content-security-policy'], FLEET_PAGE_CSP, url);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', url);
      assert.equal(res.headers['cache-control'], 'no-store', url);
      assert.ok(res.body.length > 100, `${url} has content`);
    }
    const csp = FLEET_PAGE_CSP.split('; ');
    for (const directive of [
      "default-src 'none'",
      "script-src 'self'",
      "connect-src 'self'",
      "frame-ancestors 'none'",
    ]) {
      assert.ok(csp.includes(directive), directive);
    }
    assert.ok(!FLEET_PAGE_CSP.includes('unsafe'), 'no unsafe-inline or unsafe-eval');
  });

  it('the HTML holds no data, no inline script or style and nothing from another origin', async () => {
    const html = (await app.inject({ url: '/fleet' })).body;
    const scripts = [...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/gi)];
    assert.equal(scripts.length, 1);
    assert.match(scripts[0]![0], /src="\/fleet\/app\.js"/);
    assert.equal(scripts[0]![1], '', 'no inline script');
    assert.doesNotMatch(html, /<style|\sstyle=|\son[a-z]+=/i, 'no inline style or event handler');
    assert.doesNotMatch(html, /(https?:)?\/\/[a-z0-9]/i, 'no absolute or protocol-relative URL');
    assert.match(html, /data-refresh-ms="5000"/);
    const css = (await app.inject({ url: '/fleet/app.css' })).body;
    assert.doesNotMatch(css, /url\(|@import/, 'the style loads nothing');
  });

  it('the script puts values on the page as text only and calls only this origin', async () => {
    const js = (await app.inject({ url: '/fleet/app.js' })).body;
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function']) {
      assert.ok(!js.includes(sink), `the script uses ${sink}`);
    }
    assert.doesNotMatch(js, /https?:\/\//, 'no absolute URL');
    assert.match(js, /authorization: 'Bearer ' \+ token/);
    assert.match(js, /sessionStorage/);
  });

  it('the JSON routes the page calls still need a token (401 without, 200 with a read token)', async () => {
    for (const url of ['/v1/pools', '/v1/pools/e/p', '/v1/hosts', '/v1/proxies']) {
      const none = await app.inject({ url });
      assert.equal(none.statusCode, 401, url);
      assert.equal(none.json<{ error: { code: string } }>().error.code, 'UNAUTHENTICATED', url);
    }
    for (const url of ['/v1/pools', '/v1/hosts']) {
      const listed = await app.inject({ url, headers: { authorization: `Bearer ${READER}` } });
      assert.equal(listed.statusCode, 200, `${url}: ${listed.body}`);
    }
  });

  it('the page is left out of the OpenAPI document', async () => {
    const doc = (await app.inject({ url: '/openapi.json', headers: { authorization: `Bearer ${READER}` } })).json<{
      paths: Record<string, unknown>;
    }>();
    assert.ok(!Object.keys(doc.paths).some((p) => p.startsWith('/fleet')));
  });
});

describe('registerFleetPage options', () => {
  it('takes the refresh interval onto the page and refuses one out of range, naming it', async () => {
    const app = Fastify();
    registerFleetPage(app, { refreshMs: 2000 });
    assert.match((await app.inject({ url: '/fleet' })).body, /data-refresh-ms="2000"/);
    await app.close();
    for (const refreshMs of [0, 999, 600_001, 1.5]) {
      assert.throws(() => registerFleetPage(Fastify(), { refreshMs }), /refreshMs must be an integer from 1000/);
    }
  });
});

describe('the fleet page shows each pool and its door (the script over the real routes)', () => {
  const MARKUP = '<img src=x onerror="document.title=1">';
  let app: FastifyInstance;
  let page: RenderedPage;
  let poolRows: string[][];
  const poolRow = (name: string): string[] => {
    const r = poolRows.find((cells) => cells[0] === name);
    assert.ok(r, `a row for ${name}: ${JSON.stringify(poolRows)}`);
    return r;
  };
  const doorOf = (name: string): El => {
    const found = page.main.findAll((e) => e.className === 'door' && e.getAttribute('data-pool') === name);
    assert.equal(found.length, 1, `one door section for ${name}`);
    return found[0]!;
  };

  before(async () => {
    const pools = new FakePools();
    const at = '2026-12-06T10:00:00.000Z';
    pools.add(
      { entry: 'lab', name: 'front', size: 2, template: { imageKey: 'deb' } },
      {
        healthy: 2,
        available: 2,
        updated: 2,
        revision: 3,
        members: [fakeMember({ name: 'front-a' }), fakeMember({ name: 'front-c' })],
        door: {
          listen: '10.0.0.5:3128',
          exits: [
            { name: 'front-a', role: 'serving', up: true },
            { name: 'front-b', role: 'draining', up: false },
            { name: 'front-c', role: 'serving', up: true },
          ],
          at,
        },
      },
    );
    pools.add({ entry: 'lab', name: 'plain', size: 1, template: { imageKey: 'deb' } });
    pools.add(
      { entry: 'lab', name: 'empty', size: 0, template: { imageKey: 'deb' } },
      { door: { listen: '127.0.0.1:8000', exits: [], at } },
    );
    // The stand-in store takes any value: markup in the door's address and an exit's name (the
    // API's routes refuse it in a pool's name, so a pool named so is never read).
    pools.add(
      { entry: 'lab', name: 'markup', size: 1, template: { imageKey: 'deb' } },
      { door: { listen: `${MARKUP}:3128`, exits: [{ name: `e${MARKUP}`, role: 'serving', up: false }], at } },
    );
    // A pool whose status query finds nothing: the API answers statusError.
    const lost = pools.add({ entry: 'lab', name: 'lost', size: 1, template: { imageKey: 'deb' } });
    const poolStatus = pools.poolStatus.bind(pools);
    pools.poolStatus = (entry, name) => (name === 'lost' ? Promise.resolve(undefined) : poolStatus(entry, name));
    assert.ok(lost);
    app = await buildApi({ store: new FakeStore(), pools, hosts: new FakeHosts(), log, auth, taskQueue: 'tq' });
    page = await renderFleetPage(app, READER);
    assert.equal(page.body.dataset['state'], 'ok', textOf(page.main));
    const section = page.main.querySelector('#pools');
    assert.ok(section, 'a pools section');
    poolRows = rowsOf(section);
  });
  after(async () => {
    await app.close();
  });

  it('lists each pool with its counts, revision and door in the pools table', () => {
    assert.deepEqual(poolRows[0], [
      'Pool',
      'Phase',
      'Desired',
      'Healthy',
      'Available',
      'Updated',
      'Spares',
      'Rollout step',
      'Revision',
      'Members',
      'Door',
      'Notes',
    ]);
    const front = poolRow('lab/front');
    assert.deepEqual([front[2], front[3], front[4], front[8], front[9]], ['2', '2', '2', '3', '2'], front.join(' | '));
    assert.equal(front[10], '10.0.0.5:3128 2 of 3 exits up', 'the address and the exits up');
    assert.equal(poolRow('lab/plain')[10], 'no door');
    assert.equal(poolRow('lab/empty')[10], '127.0.0.1:8000 no exits');
  });

  it("a door's exits with their role and up or down, as the door reported them", () => {
    const door = doorOf('lab/front');
    assert.match(textOf(door), /^Door of lab\/front at 10\.0\.0\.5:3128; reported .+ \(on each change\)\./);
    const time = door.findAll((e) => e.tag === 'time')[0];
    assert.equal(time?.getAttribute('datetime'), '2026-12-06T10:00:00.000Z', 'the time of the report');
    assert.deepEqual(rowsOf(door), [
      ['Exit', 'Role', 'In rotation'],
      ['front-a', 'serving', 'up'],
      ['front-b', 'draining', 'down'],
      ['front-c', 'serving', 'up'],
    ]);
    const down = door.findAll((e) => e.tag === 'span' && e.textContent === 'down')[0];
    assert.equal(down?.className, 'badge bad', 'a down exit in red (the word says it too)');
    const empty = doorOf('lab/empty');
    assert.match(textOf(empty), /^Door of lab\/empty at 127\.0\.0\.1:8000; reported /);
    assert.deepEqual(rowsOf(empty), [], 'no exits table');
    assert.deepEqual(
      empty.findAll((e) => e.className === 'empty').map((e) => textOf(e)),
      ['No exits.'],
    );
  });

  it('a pool without a door says so; a pool whose status could not be read claims nothing', () => {
    assert.equal(textOf(doorOf('lab/plain')), 'No door: none has reported for lab/plain.');
    const lost = poolRow('lab/lost');
    assert.equal(lost[10], '', 'no door claimed: the status was not read');
    assert.match(lost[11]!, /the status query found no workflow/);
    assert.equal(
      page.main.findAll((e) => e.className === 'door' && e.getAttribute('data-pool') === 'lab/lost').length,
      0,
    );
  });

  it('names and addresses holding markup are shown as text, never made into elements', () => {
    const name = 'lab/markup';
    const row = poolRow(name);
    assert.equal(row[10], `${MARKUP}:3128 0 of 1 exits up`);
    assert.deepEqual(rowsOf(doorOf(name)).slice(1), [[`e${MARKUP}`, 'serving', 'down']]);
    assert.equal(page.main.findAll((e) => e.tag === 'img').length, 0, 'no element made from a value');
  });

  it('the door costs no request: the list, one status per pool and the hosts', () => {
    assert.deepEqual(
      page.requests.map((r) => r.replace(/\?.*$/, '')).sort(),
      [
        '/v1/hosts',
        '/v1/pools',
        '/v1/pools/lab/empty',
        '/v1/pools/lab/front',
        '/v1/pools/lab/lost',
        '/v1/pools/lab/plain',
        '/v1/pools/lab/markup',
      ].sort(),
    );
  });
});
