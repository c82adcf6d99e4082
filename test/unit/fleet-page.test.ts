/**
 * The fleet page's routes inside the real API (app.inject, a fake store): /fleet, its script and
 * its style answer without a token, with a strict Content-Security-Policy and nothing inline or
 * from another origin; the JSON routes the page calls still answer 401 without a token and 200
 * with a read token; the script never parses data as HTML; a bad refresh interval is refused.
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
import { FakePools, FakeStore } from '../support/fake-store.ts';

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
