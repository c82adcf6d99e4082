/**
 * /v1/hosts over the fake host store: the list (every known host, ?entry= filters; a host never
 * surveyed has no survey fields), one host, cordon/drain/uncordon with an optional {reason};
 * writes need the admin role (403 before any store call), bad input is a 400 naming the field, a
 * host the API does not know is a 404 naming those it does (and starts nothing), what the host
 * workflow refuses is a 409 HOST_UPDATE_REFUSED with its reason, a Temporal that does not answer
 * the 503; the egress_host_* gauges on /metrics; the routes in the OpenAPI document.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { TemporalUnavailableError } from '../../client/errors.ts';
import type { HostView } from '../../contracts/host.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeHosts, hostsOf, SURVEYED_AT } from '../support/fake-hosts.ts';
import { FakeStore } from '../support/fake-store.ts';

const ADMIN = 'a'.repeat(32);
const READER = 'r'.repeat(32);

describe('host routes', () => {
  let app: FastifyInstance;
  let hosts: FakeHosts;

  before(async () => {
    hosts = new FakeHosts();
    app = await buildApi({
      store: new FakeStore(),
      hosts: hostsOf(() => hosts),
      log: createLogger({ name: 'api-hosts-test', level: 'silent' }),
      auth: new TokenAuth([
        { token: ADMIN, role: 'admin' },
        { token: READER, role: 'read' },
      ]),
      taskQueue: 'tq',
      writesPerMinute: 0,
    });
  });
  after(() => app.close());
  beforeEach(() => {
    hosts = new FakeHosts();
    hosts.add('lab', 'h1', { proxies: 3 });
    hosts.add('lab', 'h2', { survey: { reachable: false, error: 'SSH_TIMEOUT: no answer' }, proxies: 0 });
    hosts.add('edge', 'e1', { proxies: 1 });
  });

  const call = (method: string, url: string, payload?: unknown, token: string | null = ADMIN) =>
    app.inject({
      method: method as 'GET',
      url,
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
  const error = (res: { body: string }) =>
    (JSON.parse(res.body) as { error: { code: string; message: string; field?: string } }).error;
  const json = <T = Record<string, unknown>>(res: { body: string }) => JSON.parse(res.body) as T;

  it('lists every known host with its survey figures and proxies; ?entry= filters; a read token may', async () => {
    const res = await call('GET', '/v1/hosts', undefined, READER);
    assert.equal(res.statusCode, 200, res.body);
    const list = json<{ hosts: HostView[] }>(res).hosts;
    assert.deepEqual(
      list.map((h) => `${h.entry}/${h.host}`),
      ['edge/e1', 'lab/h1', 'lab/h2'],
    );
    assert.deepEqual(list[1], {
      entry: 'lab',
      host: 'h1',
      phase: 'Schedulable',
      cordoned: false,
      reachable: true,
      surveyedAt: SURVEYED_AT,
      memoryTotalMiB: 4096,
      memoryFreeMiB: 2048,
      cpus: 4,
      proxies: 3,
    });
    assert.deepEqual([list[2]!.reachable, list[2]!.error], [false, 'SSH_TIMEOUT: no answer']);
    const lab = json<{ hosts: HostView[] }>(await call('GET', '/v1/hosts?entry=lab')).hosts;
    assert.deepEqual(
      lab.map((h) => h.host),
      ['h1', 'h2'],
    );
    assert.deepEqual(json(await call('GET', '/v1/hosts?entry=none')), { hosts: [] });
  });

  it('a host known only from its open maintenance workflow has no survey fields', async () => {
    hosts.add('lab', 'h9', { survey: false, status: { phase: 'Cordoned', cordoned: true, reason: 'disk' } });
    const res = await call('GET', '/v1/hosts/lab/h9');
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(json(res), {
      host: { entry: 'lab', host: 'h9', phase: 'Cordoned', cordoned: true, reason: 'disk', proxies: 0 },
    });
  });

  it('GET one host; an unknown one is a 404 naming the known hosts of its entry, or the known entries', async () => {
    const got = await call('GET', '/v1/hosts/lab/h1', undefined, READER);
    assert.equal(got.statusCode, 200, got.body);
    assert.equal(json<{ host: HostView }>(got).host.proxies, 3);
    const typo = await call('GET', '/v1/hosts/lab/h3');
    assert.deepEqual([typo.statusCode, error(typo).code], [404, 'NOT_FOUND']);
    assert.match(error(typo).message, /no host lab\/h3: the known hosts of lab are h1, h2 \(.*survey of 2026-12-01/);
    const entry = await call('GET', '/v1/hosts/nope/h1');
    assert.equal(entry.statusCode, 404);
    assert.match(error(entry).message, /entry nope has no known host; the known entries are edge, lab/);
    hosts.noSurvey = true;
    const none = await call('GET', '/v1/hosts/lab/h1');
    assert.equal(none.statusCode, 404);
    assert.match(error(none).message, /no provider-health survey has answered yet/);
  });

  it('cordon, drain and uncordon: 200 with the status after it; the reason is passed; no body is no reason', async () => {
    const cordon = await call('POST', '/v1/hosts/lab/h1/cordon', { reason: 'kernel update' });
    assert.equal(cordon.statusCode, 200, cordon.body);
    assert.deepEqual(json(cordon)['status'], {
      entry: 'lab',
      host: 'h1',
      phase: 'Cordoned',
      cordoned: true,
      since: '2026-12-01T11:00:00.000Z',
      reason: 'kernel update',
    });
    const drain = await call('POST', '/v1/hosts/lab/h1/drain');
    assert.equal(drain.statusCode, 200, drain.body);
    // Every field of the drain's progress is answered (the serializer drops what the schema lacks).
    const h1 = hosts.hosts.get('lab/h1')!;
    h1.status.drain = {
      startedAt: '2026-12-01T11:00:00.000Z',
      finishedAt: '2026-12-01T11:05:00.000Z',
      proxies: [{ name: 'p1', pool: 'lab/crawl', state: 'asked', error: 'E: x' }],
      remaining: 1,
      lastError: 'KVM2_TIMEOUT: no answer',
      deadlineAt: '2026-12-01T11:30:00.000Z',
      overdue: true,
    };
    const read = json<{ host: HostView }>(await call('GET', '/v1/hosts/lab/h1')).host;
    assert.deepEqual(read.drain, h1.status.drain);
    assert.equal((json(drain)['status'] as HostView).phase, 'Draining');
    assert.equal((json(drain)['status'] as HostView).drain?.remaining, 3);
    const un = await call('POST', '/v1/hosts/lab/h1/uncordon', {});
    assert.deepEqual(json(un)['status'], { entry: 'lab', host: 'h1', phase: 'Schedulable', cordoned: false });
    assert.deepEqual(
      hosts.actions.map((a) => [a.action, a.req, a.taskQueue]),
      [
        ['cordon', { reason: 'kernel update' }, 'tq'],
        ['drain', {}, 'tq'],
        ['uncordon', {}, 'tq'],
      ],
    );
  });

  it('writes need the admin role: a read token is 403, no token 401, before any store call', async () => {
    for (const action of ['cordon', 'drain', 'uncordon']) {
      const res = await call('POST', `/v1/hosts/lab/h1/${action}`, {}, READER);
      assert.deepEqual([res.statusCode, error(res).code], [403, 'FORBIDDEN'], res.body);
      assert.match(error(res).message, new RegExp(`${action}ing a host needs a token with the admin role`));
      assert.equal((await call('POST', `/v1/hosts/lab/h1/${action}`, {}, null)).statusCode, 401);
    }
    assert.equal((await call('GET', '/v1/hosts', undefined, null)).statusCode, 401);
    assert.equal(hosts.calls['act'] ?? 0, 0);
    assert.equal(hosts.calls['knownHosts'] ?? 0, 0);
  });

  it("drain's deadlineMs is passed to the host workflow; cordon and uncordon do not take one", async () => {
    const drain = await call('POST', '/v1/hosts/lab/h2/drain', { reason: 'disk swap', deadlineMs: 1_800_000 });
    assert.equal(drain.statusCode, 200, drain.body);
    assert.deepEqual(hosts.actions.at(-1)?.req, { reason: 'disk swap', deadlineMs: 1_800_000 });
    const n = hosts.actions.length;
    for (const action of ['cordon', 'uncordon']) {
      const res = await call('POST', `/v1/hosts/lab/h2/${action}`, { deadlineMs: 1_800_000 });
      assert.deepEqual(
        [res.statusCode, error(res).code, error(res).field],
        [400, 'UNKNOWN_FIELD', 'deadlineMs'],
        res.body,
      );
    }
    assert.equal(hosts.actions.length, n, 'nothing is asked of the store for a refused body');
  });

  it('bad input is a 400 naming the field, before any store call', async () => {
    const cases: [string, string, unknown, string, string][] = [
      ['POST', '/v1/hosts/lab/h1/cordon', { reason: 7 }, 'INVALID_FIELD', 'reason'],
      ['POST', '/v1/hosts/lab/h1/drain', { reason: '' }, 'INVALID_FIELD', 'reason'],
      ['POST', '/v1/hosts/lab/h1/drain', { reason: 'x'.repeat(501) }, 'INVALID_FIELD', 'reason'],
      ['POST', '/v1/hosts/lab/h1/cordon', { why: 'x' }, 'UNKNOWN_FIELD', 'why'],
      ['POST', '/v1/hosts/lab/h1/drain', { deadlineMs: 999 }, 'INVALID_FIELD', 'deadlineMs'],
      ['POST', '/v1/hosts/lab/h1/drain', { deadlineMs: 1500.5 }, 'INVALID_FIELD', 'deadlineMs'],
      ['POST', '/v1/hosts/lab/h1/drain', { deadlineMs: 30 * 86_400_000 + 1 }, 'INVALID_FIELD', 'deadlineMs'],
      ['POST', '/v1/hosts/lab/h1/drain', { deadlineMs: '30m' }, 'INVALID_FIELD', 'deadlineMs'],
      ['POST', '/v1/hosts/lab/H1/cordon', {}, 'INVALID_FIELD', 'host'],
      ['GET', '/v1/hosts/Lab/h1', undefined, 'INVALID_FIELD', 'entry'],
      ['GET', '/v1/hosts?host=h1', undefined, 'UNKNOWN_FIELD', 'host'],
      ['GET', '/v1/hosts?entry=A_B', undefined, 'INVALID_FIELD', 'entry'],
    ];
    for (const [method, url, body, code, field] of cases) {
      const res = await call(method, url, body);
      assert.deepEqual([res.statusCode, error(res).code, error(res).field], [400, code, field], `${url} ${res.body}`);
    }
    assert.equal(Object.keys(hosts.calls).length, 0);
  });

  it('an unknown host is a 404 naming the known ones, and nothing is asked of it', async () => {
    const res = await call('POST', '/v1/hosts/lab/h7/drain', { reason: 'typo' });
    assert.deepEqual([res.statusCode, error(res).code], [404, 'NOT_FOUND']);
    assert.match(error(res).message, /known hosts of lab are h1, h2/);
    assert.equal(hosts.actions.length, 0);
  });

  it('what the host workflow refuses is a 409 HOST_UPDATE_REFUSED with its reason', async () => {
    hosts.refuseWith = 'the host is being uncordoned';
    const res = await call('POST', '/v1/hosts/lab/h1/drain', {});
    assert.deepEqual([res.statusCode, error(res).code], [409, 'HOST_UPDATE_REFUSED']);
    assert.equal(error(res).message, 'host lab/h1 refused the drain: the host is being uncordoned');
  });

  it('Temporal that does not answer is the 503 TEMPORAL_UNAVAILABLE', async () => {
    hosts.failWith = new TemporalUnavailableError('deadline');
    for (const [method, url] of [
      ['GET', '/v1/hosts'],
      ['GET', '/v1/hosts/lab/h1'],
      ['POST', '/v1/hosts/lab/h1/cordon'],
    ] as const) {
      const res = await call(method, url, method === 'POST' ? {} : undefined);
      assert.deepEqual([res.statusCode, error(res).code], [503, 'TEMPORAL_UNAVAILABLE'], url);
    }
  });

  it('/metrics has egress_host_proxies, _memory_free_bytes, _cordoned, _reachable and _drain_overdue per host', async () => {
    hosts.add('lab', 'h9', { survey: false, status: { phase: 'Cordoned', cordoned: true }, proxies: 2 });
    const drain = (overdue: boolean) => ({
      startedAt: '2026-12-01T11:00:00.000Z',
      proxies: [],
      remaining: 1,
      deadlineAt: '2026-12-01T11:30:00.000Z',
      ...(overdue ? { overdue } : {}),
    });
    hosts.add('lab', 'h7', {
      survey: false,
      status: { phase: 'Draining', cordoned: true, drain: drain(true) },
      proxies: 1,
    });
    hosts.add('lab', 'h8', {
      survey: false,
      status: { phase: 'Draining', cordoned: true, drain: drain(false) },
      proxies: 1,
    });
    // Drained after its deadline: no longer overdue for the alert (its status keeps overdue: true).
    hosts.add('lab', 'h6', {
      survey: false,
      status: { phase: 'Drained', cordoned: true, drain: drain(true) },
      proxies: 0,
    });
    const text = (await call('GET', '/metrics', undefined, READER)).body;
    const lines = text.split('\n').filter((l) => l.startsWith('egress_host_'));
    for (const want of [
      'egress_host_proxies{entry="lab",host="h1"} 3',
      'egress_host_proxies{entry="lab",host="h9"} 2',
      'egress_host_memory_free_bytes{entry="lab",host="h1"} 2147483648',
      'egress_host_cordoned{entry="lab",host="h9"} 1',
      'egress_host_cordoned{entry="lab",host="h1"} 0',
      'egress_host_reachable{entry="lab",host="h2"} 0',
      'egress_host_reachable{entry="edge",host="e1"} 1',
      'egress_host_drain_overdue{entry="lab",host="h7"} 1',
      'egress_host_drain_overdue{entry="lab",host="h8"} 0',
      'egress_host_drain_overdue{entry="lab",host="h6"} 0',
    ]) {
      assert.ok(lines.includes(want), `${want} in\n${lines.join('\n')}`);
    }
    // A host without a drain deadline has no drain_overdue line (absent, not 0).
    assert.ok(!lines.some((l) => /^egress_host_drain_overdue\{entry="lab",host="h[19]"\}/.test(l)), lines.join('\n'));
    // A host never surveyed has no survey figures (absent, not 0).
    assert.ok(!lines.some((l) => /_(reachable|memory_free_bytes)\{entry="lab",host="h9"\}/.test(l)), lines.join('\n'));
    assert.equal(hosts.calls['listHosts'], 1, 'one listing feeds the five gauges');
  });

  it('/metrics without an answer from the host store: no egress_host_* line, the failure counted', async () => {
    await new Promise((r) => setTimeout(r, 1_100)); // past the previous scrape's second
    hosts.failWith = new TemporalUnavailableError('deadline');
    const text = (await call('GET', '/metrics', undefined, READER)).body;
    assert.ok(!/^egress_host_\w+\{/m.test(text), text);
    // The counter is written before the gauges collect: the next scrape (the same failed listing) shows it.
    const next = (await call('GET', '/metrics', undefined, READER)).body;
    assert.match(next, /^egress_api_temporal_errors_total\{operation="hosts"\} 1$/m);
  });

  it('the API serves the fleet page without a token (its data calls need one)', async () => {
    const res = await call('GET', '/fleet', undefined, null);
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assert.equal((await call('GET', '/v1/hosts', undefined, null)).statusCode, 401);
  });

  it("the OpenAPI document has the five operations; the actions' body is optional", async () => {
    const doc = json<{
      paths: Record<string, Record<string, { operationId?: string; requestBody?: { required: boolean } }>>;
    }>(await call('GET', '/openapi.json'));
    assert.equal(doc.paths['/v1/hosts/{entry}/{host}/drain']?.['post']?.requestBody?.required, false);
    assert.equal(doc.paths['/v1/proxies/{entry}/{name}/resize']?.['post']?.requestBody?.required, true);
    const ids = Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/v1/hosts'))
      .flatMap(([, ops]) => Object.values(ops).map((o) => o.operationId));
    assert.deepEqual(ids.sort(), ['cordonHost', 'drainHost', 'getHost', 'listHosts', 'uncordonHost']);
  });
});
