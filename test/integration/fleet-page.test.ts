/**
 * The fleet page seen by a real browser (Debian's chromium, headless) over the real API, the dev
 * server and a real worker: three pools on one namespaced test host, `web` of size 1 (its member's
 * VM boots an empty qcow2 from a loopback mirror: placed and Running, never Healthy), `idle` of
 * size 0 and `front` of size 0 whose door has reported (client/door.ts reportDoor, the door
 * service's own call: the pool keeps it in its status) an exit up and a draining one down. The
 * page, given a read token in its address's fragment, shows the pools with the counts the API
 * answers and each one's door (`front`'s address and exits, "no door" for the others), the member
 * with its host and state, and the test host as /v1/hosts shows it (the run's own
 * provider-health survey); the token is not left in the page.
 * A token the API refuses brings the token form back with the API's reason. A screenshot is kept
 * at .data/artifacts/fleet-page-<entry>.png for a person to look at.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { reportDoor } from '../../client/door.ts';
import { TemporalUnavailableError } from '../../client/errors.ts';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import type { HostView } from '../../contracts/host.ts';
import type { PoolStatus } from '../../contracts/pool.ts';
import { createLogger } from '../../lib/log/logger.ts';
import type { providerHealthWorkflow } from '../../workflows/index.ts';
import { http } from '../support/api.ts';
import { startApiWorld } from '../support/api-world.ts';
import type { ApiWorld } from '../support/api-world.ts';
import { FakeHosts } from '../support/fake-hosts.ts';
import { FakePools, FakeStore, fakeMember } from '../support/fake-store.ts';
import { ImageMirror } from '../support/mirror.ts';
import { pollUntil, PROJECT_ROOT, uniqueId } from '../support/temporal.ts';
import { domainsOf, virsh, volumesOf } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const ARTIFACTS = join(PROJECT_ROOT, '.data/artifacts');
// The page refreshes every 5 s: 12 s of virtual time is two refreshes after the first load.
const CHROMIUM = ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--virtual-time-budget=12000'];

/** The text of an HTML fragment: tags dropped, the five entities chromium writes decoded. */
function text(html: string): string {
  return html
    .replace(/<[^>]*>/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The cells (as text) of the table row whose row header is `name`, or undefined. */
function row(html: string, name: string): string[] | undefined {
  for (const tr of html.matchAll(/<tr>([\s\S]*?)<\/tr>/g)) {
    const cells = [...tr[1]!.matchAll(/<t([hd])\b[^>]*>([\s\S]*?)<\/t\1>/g)].map((c) => text(c[2]!));
    if (cells[0] === name) return cells;
  }
  return undefined;
}

/**
 * The part of the page inside `<section id="...">` (its nested sections included), or inside the
 * first section whose opening tag holds `attrs` (e.g. `class="door" aria-label="..."`).
 */
function section(html: string, id: string, attrs = `id="${id}"`): string {
  const start = html.indexOf(`<section ${attrs}`);
  assert.ok(start >= 0, `the page has a section ${attrs}: ${html.slice(0, 2000)}`);
  const tags = /<(\/?)section\b/g;
  tags.lastIndex = start + 1;
  let depth = 1;
  for (let m = tags.exec(html); m !== null; m = tags.exec(html)) {
    depth += m[1] === '/' ? -1 : 1;
    if (depth === 0) return html.slice(start, m.index);
  }
  assert.fail(`section #${id} is not closed`);
}

/** Runs headless chromium with a profile of its own (a shared one hands off to a running instance). */
async function chromium(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const profile = await mkdtemp(join(tmpdir(), 'ep-fleet-chromium-'));
  try {
    return await pexec('chromium', [...CHROMIUM, `--user-data-dir=${profile}`, ...args], {
      timeout: 90_000,
      maxBuffer: 32 * 1024 * 1024,
    });
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

/** The page's address with the token in its fragment (never sent to the server). */
function fleetUrl(base: string, token: string): string {
  return `${base}/fleet#token=${encodeURIComponent(token)}`;
}

describe('the fleet page in headless chromium (real API, dev server, a real worker)', { timeout: 360_000 }, () => {
  let w: ApiWorld | undefined;
  let mirror: ImageMirror | undefined;
  let entry: string;
  let host: string;
  /** The survey /v1/hosts knows hosts from: this run's own, taken once the worker runs. */
  let survey: ProviderHealthResult | undefined;
  const call = (method: string, p: string, body?: unknown) =>
    http(w!.api.url, method, p, { token: w!.tokens.admin, ...(body === undefined ? {} : { body }) });
  const page = (token: string): string => fleetUrl(w!.api.url, token);

  before(async () => {
    mirror = await ImageMirror.start();
    const scratch = await mkdtemp(join(tmpdir(), 'ep-fleet-page-'));
    const file = join(scratch, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve('/fleet-page/empty.qcow2', await readFile(file));
    await rm(scratch, { recursive: true, force: true });
    w = await startApiWorld({
      prefix: 'fp',
      images: { empty: { url } },
      catalog: true,
      survey: () => Promise.resolve(survey && { result: survey, running: false }),
    });
    entry = w.entry;
    host = w.hosts[0]!.name;
    // The survey of this run's own host, which /v1/hosts knows hosts from (the namespace's
    // schedule lists other runs' hosts).
    survey = await w.client.workflow.execute<typeof providerHealthWorkflow>('providerHealthWorkflow', {
      taskQueue: w.taskQueue,
      workflowId: uniqueId('provider-health'),
      workflowExecutionTimeout: '2 minutes',
    });
  });

  after(async () => {
    // The pools through their own delete (their members' VMs deleted), bounded; then the rest.
    for (const name of w ? ['web', 'idle', 'front'] : []) {
      await call('DELETE', `/v1/pools/${entry}/${name}?wait=true&waitMs=120000`).catch(() => undefined);
    }
    const testHost = w?.hosts[0];
    if (testHost) {
      // The member's VM gone (its workflow deletes it), bounded, before the worker stops.
      await pollUntil(async () => ((await domainsOf(testHost, entry)).length === 0 ? true : undefined), {
        timeoutMs: 60_000,
        intervalMs: 1000,
        what: `the domains of ${entry} deleted`,
      }).catch(() => undefined);
    }
    await w?.close();
    await mirror?.close();
    if (testHost) {
      // What a failed run left, and the entry's base volume (each run has an entry of its own).
      for (const dom of await domainsOf(testHost, entry).catch(() => [])) {
        await virsh(testHost, 'destroy', dom).catch(() => undefined);
        await virsh(testHost, 'undefine', dom).catch(() => undefined);
      }
      for (const vol of await volumesOf(testHost, entry).catch(() => [])) {
        await virsh(testHost, 'vol-delete', '--pool', testHost.pool, vol).catch(() => undefined);
      }
    }
  });

  it('shows the pools with their counts and doors, the member on its host and the hosts; a screenshot is kept', async () => {
    for (const [name, size] of [
      ['web', 1],
      ['idle', 0],
      ['front', 0],
    ] as const) {
      const created = await call('POST', '/v1/pools', { entry, name, size, template: { imageKey: 'empty' } });
      assert.equal(created.status, 201, created.text);
    }
    // The member placed on the test host (its VM boots an empty disk: Running, never Healthy).
    const st = await pollUntil(
      async () => {
        const r = await call('GET', `/v1/pools/${entry}/web`);
        const s = r.body['status'] as PoolStatus | undefined;
        const m = s?.members[0];
        return m?.host !== undefined && m.state !== 'Starting' ? s : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1000, what: `a member of ${entry}/web placed on a host` },
    );
    const member = st.members[0]!;
    assert.equal(member.host, host);
    // The door of `front` reports as the door service does; the pool shows it in its status.
    const door = {
      listen: '127.0.0.1:3128',
      exits: [
        { name: 'front-up1', role: 'serving' as const, up: true },
        { name: 'front-gone', role: 'draining' as const, up: false },
      ],
    };
    await reportDoor(w!.client, entry, 'front', door);
    await pollUntil(
      async () => {
        const r = await call('GET', `/v1/pools/${entry}/front`);
        return (r.body['status'] as PoolStatus | undefined)?.door !== undefined ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: `the door of ${entry}/front in its status` },
    );
    // The three pools listed (visibility is eventually consistent).
    await pollUntil(
      async () => {
        const r = await call('GET', `/v1/pools?entry=${entry}`);
        return (r.body['pools'] as unknown[] | undefined)?.length === 3 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'the three pools in the list' },
    );

    const dom = (await chromium('--dump-dom', page(w!.tokens.reader))).stdout;
    assert.match(dom, /<body[^>]*data-state="ok"/, `the page loaded the fleet: ${text(dom).slice(0, 2000)}`);
    assert.ok(!dom.includes(w!.tokens.reader), 'the token is not in the page');
    // Every open pool of the namespace is listed (other runs' too): ours are two of them.
    const listed = Number(/Pools: (\d+)/.exec(text(section(dom, 'pools')))?.[1]);
    assert.ok(listed >= 3, `the page counts the pools: ${text(section(dom, 'pools'))}`);
    const pools = section(dom, 'pools');
    // Pool, Phase, Desired, Healthy, Available, Updated, Spares, Rollout step, Revision, Members, Door, Notes.
    const web = row(pools, `${entry}/web`);
    assert.ok(web, `a row for ${entry}/web: ${text(pools)}`);
    assert.deepEqual(
      [web[2], web[3], web[4], web[6], web[8], web[9], web[10]],
      ['1', '0', '0', '0', '1', '1', 'no door'],
      web.join(' | '),
    );
    const idle = row(pools, `${entry}/idle`);
    assert.ok(idle, `a row for ${entry}/idle: ${text(pools)}`);
    assert.deepEqual([idle[2], idle[3], idle[9], idle[10]], ['0', '0', '0', 'no door'], idle.join(' | '));
    const front = row(pools, `${entry}/front`);
    assert.ok(front, `a row for ${entry}/front: ${text(pools)}`);
    assert.deepEqual([front[2], front[8], front[10]], ['0', '1', '127.0.0.1:3128 1 of 2 exits up'], front.join(' | '));
    // The door's exits as it reported them: role, and up or down.
    const exits = section(dom, '', `class="door" aria-label="Door of ${entry}/front"`);
    assert.match(text(exits), new RegExp(`^Door of ${entry}/front at 127\\.0\\.0\\.1:3128; reported `));
    assert.deepEqual(row(exits, 'front-up1'), ['front-up1', 'serving', 'up']);
    assert.deepEqual(row(exits, 'front-gone'), ['front-gone', 'draining', 'down']);
    assert.match(
      text(section(dom, '', `class="door" aria-label="Door of ${entry}/idle"`)),
      new RegExp(`^No door: none has reported for ${entry}/idle\\.$`),
    );

    // Member, Host, Role, State, Health, In discovery, Age, Exit address, Image, Last error.
    const m = row(section(dom, 'members'), member.name);
    assert.ok(m, `a row for member ${member.name}: ${text(section(dom, 'members'))}`);
    assert.equal(m[1], host);
    assert.notEqual(m[3], '');
    assert.equal(m[5], 'no', 'never Healthy: not in discovery');
    assert.match(m[6]!, /^\d+(s|m \d+s)$/, 'an age');
    assert.equal(m[8], 'empty (rev 1)');

    // The test host as GET /v1/hosts shows it (read after the page: its proxy count is visibility's).
    const hostsReply = await call('GET', `/v1/hosts?entry=${entry}`);
    assert.equal(hostsReply.status, 200, hostsReply.text);
    const view = (hostsReply.body['hosts'] as HostView[]).find((v) => v.host === host);
    assert.ok(view?.reachable === true && view.memoryFreeMiB !== undefined, hostsReply.text);
    const h = row(section(dom, 'hosts'), `${entry}/${host}`);
    assert.ok(h, `a row for host ${entry}/${host}: ${text(section(dom, 'hosts'))}`);
    // Host, Reachable, Cordoned, Free memory, CPUs, Proxies, Surveyed, Error.
    assert.deepEqual(h.slice(1, 3), ['yes', 'no'], h.join(' | '));
    assert.match(h[3]!, /^\d+(\.\d)? (MiB|GiB) of \d+(\.\d)? (MiB|GiB)$/, h.join(' | '));
    assert.equal(h[4], String(view.cpus));
    assert.match(h[5]!, /^\d+$/, h.join(' | '));
    assert.match(h[6]!, /\d/, 'when it was surveyed');

    await mkdir(ARTIFACTS, { recursive: true });
    const shot = join(ARTIFACTS, `fleet-page-${entry}.png`);
    const out = await chromium('--window-size=1440,1000', `--screenshot=${shot}`, page(w!.tokens.reader));
    const written = await stat(shot).catch(() => undefined);
    const said = out.stderr
      .split('\n')
      .filter((l) => !l.includes('dbus'))
      .join('\n');
    assert.ok(written && written.size > 10_000, `no screenshot at ${shot}: ${out.stdout}${said.slice(-3000)}`);
  });

  it('a token the API refuses brings back the token form with the reason, and no data', async () => {
    const dom = (await chromium('--dump-dom', page('not-a-token-of-this-api'))).stdout;
    assert.match(dom, /<body[^>]*data-state="token"/, text(dom).slice(0, 2000));
    assert.match(dom, /<form id="token-form"/);
    assert.match(text(dom), /The token was not accepted \(401 UNAUTHENTICATED: the bearer token is not one of/);
    assert.ok(!dom.includes(`${entry}/web`), 'no pool shown');
  });
});

/**
 * The page's own behaviour where the real API cannot be made to answer it on demand: the API's
 * routes over stand-in stores (test/support/fake-store.ts, fake-hosts.ts). A value holding HTML
 * (a member's last error, a door's address) is shown as text, a cordoned and an unreachable host as such, a later refresh shows changed
 * counts, while the API answers 503 the page says so and retries, then recovers, and an API
 * without /v1/hosts (404) leaves the hosts out and shows the rest.
 */
describe('the fleet page in headless chromium (the API over stand-in stores)', { timeout: 180_000 }, () => {
  const READ = 'fleet-page-read-token-0123456789';
  let app: FastifyInstance;
  let base: string;
  const standInApi = (o: { pools: FakePools; hosts?: FakeHosts }): Promise<FastifyInstance> =>
    buildApi({
      store: new FakeStore(),
      ...o,
      log: createLogger({ name: 'fleet-page-test', level: 'silent' }),
      auth: new TokenAuth([{ token: READ, role: 'read' }]),
      taskQueue: 'tq',
    });
  const pools = new FakePools();
  let lists = 0;
  /** listPools answers 503 for calls number < failUntil (1-based), then as the store says. */
  let failUntil = 0;
  const hosts = new FakeHosts();
  hosts.add('lab', 'hv1', {
    survey: { memoryFreeMiB: 12_000, memoryTotalMiB: 16_000, cpus: 8, maxProxies: 20 },
    proxies: 1,
  });
  hosts.add('lab', 'hv2', {
    survey: { reachable: false, error: 'ssh: timeout' },
    status: { phase: 'Draining', cordoned: true, reason: 'kernel' },
    proxies: 1,
  });
  hosts.add('lab', 'hv3', {
    survey: { memoryFreeMiB: 8_000, memoryTotalMiB: 16_000, cpus: 8 },
    status: {
      phase: 'Draining',
      cordoned: true,
      reason: 'disk',
      drain: {
        startedAt: '2026-12-01T10:00:00.000Z',
        proxies: [],
        remaining: 1,
        deadlineAt: '2026-12-01T10:30:00.000Z',
        overdue: true,
      },
    },
    proxies: 1,
  });
  const xss = '<img src=x onerror="document.title=1"> boom';

  before(async () => {
    const listPools = pools.listPools.bind(pools);
    pools.listPools = (query, pageSize) => {
      lists++;
      const crawl = pools.pools.get('pool/lab/crawl');
      if (crawl && lists > 1) crawl.status.healthy = 2;
      if (lists < failUntil) return Promise.reject(new TemporalUnavailableError('stand-in: Temporal is down'));
      return listPools(query, pageSize);
    };
    pools.add(
      { entry: 'lab', name: 'crawl', size: 2, template: { imageKey: 'deb' } },
      {
        phase: 'Progressing',
        healthy: 1,
        available: 1,
        updated: 1,
        rollout: { revision: 2, startedAt: 'x', lastProgressAt: 'x', step: 'surging 1 of 2' },
        door: {
          listen: `${xss}:3128`,
          exits: [
            { name: 'crawl-a1', role: 'serving', up: true },
            { name: 'crawl-b2', role: 'serving', up: false },
          ],
          at: '2026-12-06T10:00:00.000Z',
        },
        members: [
          fakeMember({ name: 'crawl-a1' }),
          fakeMember({ name: 'crawl-b2', healthy: 'False', available: false, host: 'hv2', lastError: xss }),
        ],
      },
    );
    app = await standInApi({ pools, hosts });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    await app?.close();
  });

  it('shows HTML in a value as text, the hosts as the API says, and a refresh picks up new counts', async () => {
    lists = 0;
    failUntil = 0;
    const dom = (await chromium('--dump-dom', fleetUrl(base, READ))).stdout;
    assert.match(dom, /<body[^>]*data-state="ok"/, text(dom).slice(0, 2000));
    assert.ok(lists >= 2, `the page refreshed (${lists} lists)`);
    const crawl = row(section(dom, 'pools'), 'lab/crawl');
    assert.deepEqual(
      crawl?.slice(1, 8),
      ['Progressing', '2', '2', '1', '1', '0', 'surging 1 of 2'],
      crawl?.join(' | '),
    );
    assert.equal(crawl[10], `${xss}:3128 1 of 2 exits up`, "the door's address as text");
    const exits = section(dom, '', 'class="door" aria-label="Door of lab/crawl"');
    assert.deepEqual(row(exits, 'crawl-b2'), ['crawl-b2', 'serving', 'down']);
    const b2 = row(section(dom, 'members'), 'crawl-b2');
    assert.deepEqual(b2?.slice(1, 6), ['hv2', 'serving', 'Running', 'Unhealthy', 'no'], b2?.join(' | '));
    assert.equal(b2?.[9], xss, 'the error as text');
    assert.ok(!/<img/i.test(dom), 'no element made from a value');
    const hosts = section(dom, 'hosts');
    const hv1 = row(hosts, 'lab/hv1');
    assert.deepEqual(
      hv1?.slice(0, 6),
      ['lab/hv1', 'yes', 'no', '11.7 GiB of 15.6 GiB', '8', '1 of 20'],
      hv1?.join(' | '),
    );
    assert.match(hv1[6]!, /\d/, 'when it was surveyed');
    const hv2 = row(hosts, 'lab/hv2');
    assert.deepEqual(hv2?.slice(0, 3), ['lab/hv2', 'no', 'Draining: kernel'], hv2?.join(' | '));
    assert.equal(hv2[7], 'ssh: timeout', 'the survey error');
    const hv3 = row(hosts, 'lab/hv3');
    assert.deepEqual(hv3?.slice(0, 3), ['lab/hv3', 'yes', 'Draining (overdue): disk'], hv3?.join(' | '));
  });

  it('while the API answers 503 the page says so and retries with backoff; then it recovers', async () => {
    lists = 0;
    failUntil = 1000;
    const failing = (await chromium('--dump-dom', fleetUrl(base, READ))).stdout;
    assert.match(failing, /<body[^>]*data-state="error"/, text(failing).slice(0, 2000));
    assert.match(text(failing), /Refresh failed \(503 TEMPORAL_UNAVAILABLE: .*nothing loaded yet; retrying in \d+ s/);
    // 12 s of virtual time: the first load, then retries 10 s apart (doubling) at most.
    assert.ok(lists >= 1 && lists <= 3, `retries backed off (${lists} lists)`);

    lists = 0;
    failUntil = 2;
    const recovered = (await chromium('--dump-dom', fleetUrl(base, READ))).stdout;
    assert.match(recovered, /<body[^>]*data-state="ok"/, text(recovered).slice(0, 2000));
    assert.ok(row(section(recovered, 'pools'), 'lab/crawl'), 'the pool shown after the retry');
  });

  it('an API that does not serve /v1/hosts: "Hosts unavailable", the pools still shown', async () => {
    const bare = await standInApi({ pools });
    try {
      const url = await bare.listen({ host: '127.0.0.1', port: 0 });
      const dom = (await chromium('--dump-dom', fleetUrl(url, READ))).stdout;
      assert.match(dom, /<body[^>]*data-state="ok"/, text(dom).slice(0, 2000));
      assert.match(text(section(dom, 'hosts')), /Hosts unavailable: this API does not serve \/v1\/hosts\./);
      assert.ok(row(section(dom, 'pools'), 'lab/crawl'), 'the pool shown');
    } finally {
      await bare.close();
    }
  });
});
