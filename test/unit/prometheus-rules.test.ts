/**
 * deploy/prometheus/ (the Prometheus config, alerting and recording rules) and the /metrics the
 * worker and the API serve, held to each other:
 *
 * - with promtool (Debian's, unpacked by scripts/test into .local/prometheus; EP_PROMTOOL names
 *   it): `check config`, `check rules`, `test rules` over deploy/prometheus/tests/*.yml, and
 *   `check metrics` over the real exposition of the worker's metrics server and the API's
 *   /metrics route, each started in-process. Without promtool these skip (CI fails instead).
 * - without it: every egress_* name a rule reads is one the code exports (a renamed metric
 *   fails here), every recorded name a rule reads is recorded, every alert has a firing and a
 *   quiet case in the rule tests and a runbook section in docs/monitoring.md.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { createWorkerMetrics, meteringLogger } from '../../activities/metrics.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { serveMetrics } from '../../runtime/metrics-server.ts';
import { FakeHosts } from '../support/fake-hosts.ts';
import { FakePools, FakeStore } from '../support/fake-store.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dir = join(root, 'deploy/prometheus');
const BOUND_MS = 60_000;
const TOKEN = 'p'.repeat(32);

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}
const rulesOf = (file: string): Rule[] =>
  (parse(readFileSync(join(dir, 'rules', file), 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
    (g) => g.rules,
  );
const alerts = rulesOf('alerts.yml');
const recording = rulesOf('recording.yml');
const testFiles = readdirSync(join(dir, 'tests'))
  .filter((f) => f.endsWith('.yml'))
  .sort();

/** The metric names an expression reads: identifiers outside string literals, minus keywords. */
function namesIn(expr: string): string[] {
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  // Drop label matchers and grouping lists: `{...}`, `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`.
  const noLabels = bare
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '');
  const names = new Set<string>();
  for (const m of noLabels.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const name = m[0];
    const next = noLabels.slice(m.index + name.length).trimStart();
    if (next.startsWith('(')) continue; // a function or aggregation
    if (/^(and|or|unless|bool|offset|inf|nan)$/i.test(name)) continue;
    names.add(name);
  }
  return [...names].sort();
}

/** Metric names of an exposition, with a histogram's _bucket/_count/_sum series. */
function exposed(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    out.add(m[1]!);
    if (m[2] === 'histogram' || m[2] === 'summary') for (const s of ['_bucket', '_count', '_sum']) out.add(m[1]! + s);
  }
  return out;
}

/** The worker's exposition, from its own metrics server on loopback, with a sample of each. */
async function workerExposition(): Promise<string> {
  const m = createWorkerMetrics();
  // The RPC histogram is fed as in production: the one line per libvirt call, through the logger.
  const lines = meteringLogger({ info: () => undefined, warn: () => undefined }, m);
  lines.info({ proc: 'CONNECT_GET_LIB_VERSION', duration_ms: 2, outcome: 'ok', host: 'lab/h1' }, 'libvirt call');
  lines.warn({ proc: 'STORAGE_VOL_UPLOAD', duration_ms: 900, outcome: 'error', host: 'lab/h1' }, 'libvirt call failed');
  m.probe.observe({ outcome: 'ok' }, 0.01);
  m.probe.observe({ outcome: 'PROBE_FAILED' }, 2);
  m.uploadBytes.inc({ host: 'lab/h1' }, 1 << 20);
  m.linkDeaths.inc({ host: 'lab/h1', link: 'rpc' });
  m.dialFailures.inc({ host: 'lab/h1', link: 'health' });
  let server: Server | undefined;
  try {
    const served = await serveMetrics(m.registry, '127.0.0.1', 0);
    server = served.server;
    const res = await fetch(served.url, { signal: AbortSignal.timeout(BOUND_MS) });
    assert.equal(res.status, 200);
    return await res.text();
  } finally {
    server?.close();
  }
}

/** The API's exposition, from its /metrics route over the fake stores, with a pool, hosts and a request. */
async function apiExposition(): Promise<string> {
  const pools = new FakePools();
  pools.add({ entry: 'lab', name: 'crawl', size: 2, template: { imageKey: 'deb' } });
  const hosts = new FakeHosts();
  hosts.add('lab', 'h1', { proxies: 2 });
  hosts.add('lab', 'h2', { survey: { reachable: false }, status: { phase: 'Cordoned', cordoned: true } });
  const app = await buildApi({
    store: new FakeStore(),
    pools,
    hosts,
    log: createLogger({ name: 'prometheus-rules-test', level: 'silent' }),
    auth: new TokenAuth([{ token: TOKEN, role: 'read' }]),
    taskQueue: 'tq',
  });
  try {
    const headers = { authorization: `Bearer ${TOKEN}` };
    await app.inject({ method: 'GET', url: '/v1/proxies', headers });
    const res = await app.inject({ method: 'GET', url: '/metrics', headers });
    assert.equal(res.statusCode, 200);
    return res.body;
  } finally {
    await app.close();
  }
}

describe('deploy/prometheus rules against the code', () => {
  let names: Set<string>;
  before(async () => {
    names = new Set([...exposed(await workerExposition()), ...exposed(await apiExposition())]);
  });

  it('namesIn finds the metrics an expression reads, not functions, labels or keywords', () => {
    assert.deepEqual(
      namesIn(
        'sum by (host) (increase(egress_a_total{outcome="error",x="egress_b"}[5m])) > 0 unless on (host) job:egress_c:max == bool 1',
      ),
      ['egress_a_total', 'job:egress_c:max'],
    );
  });

  it('every egress_* metric a rule reads is one the worker or the API exports', () => {
    for (const n of ['egress_pool_available', 'egress_host_reachable', 'egress_libvirt_rpc_duration_seconds_count'])
      assert.ok(names.has(n), `the exposition has ${n}`);
    const read = [...alerts, ...recording].flatMap((r) =>
      namesIn(r.expr).map((n) => ({ n, rule: r.alert ?? r.record })),
    );
    const egress = read.filter((x) => x.n.startsWith('egress_'));
    assert.ok(egress.length >= 20, `the rules read egress_* metrics (found ${egress.length})`);
    const unknown = egress.filter((x) => !names.has(x.n)).map((x) => `${x.rule}: ${x.n}`);
    assert.deepEqual(unknown, [], 'rules read metrics that api/metrics.ts and activities/metrics.ts do not export');
    const other = read.filter((x) => !x.n.startsWith('egress_') && !x.n.includes(':') && x.n !== 'up');
    assert.deepEqual(other, [], 'rules read only egress_* metrics, recorded names and up');
  });

  it('every recorded name a rule reads is recorded, and recorded names follow level:metric:operations', () => {
    const recorded = new Set(recording.map((r) => r.record!));
    for (const name of recorded) assert.match(name, /^[a-z_]+:egress_[a-z0-9_]+:[a-z0-9_]+$/, name);
    for (const r of [...alerts, ...recording]) {
      for (const n of namesIn(r.expr).filter((x) => x.includes(':'))) {
        assert.ok(recorded.has(n), `${r.alert ?? r.record} reads ${n}, which no recording rule records`);
      }
    }
  });
});

describe('deploy/prometheus: alerts, their tests and their runbooks', () => {
  const cases = new Map<string, { fires: number; quiet: number }>();
  for (const file of testFiles) {
    const doc = parse(readFileSync(join(dir, 'tests', file), 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
    };
    for (const t of doc.tests.flatMap((x) => x.alert_rule_test ?? [])) {
      const c = cases.get(t.alertname) ?? { fires: 0, quiet: 0 };
      if ((t.exp_alerts ?? []).length > 0) c.fires++;
      else c.quiet++;
      cases.set(t.alertname, c);
    }
  }
  const monitoring = readFileSync(join(root, 'docs/monitoring.md'), 'utf8');

  it('every alert has a case where it fires and one where it stays quiet', () => {
    assert.ok(alerts.length >= 15, `alerts found: ${alerts.length}`);
    for (const a of alerts) {
      const c = cases.get(a.alert!);
      assert.ok(c && c.fires > 0, `${a.alert}: no test case where it fires (deploy/prometheus/tests/)`);
      assert.ok(c.quiet > 0, `${a.alert}: no test case where it stays quiet`);
    }
    const unknown = [...cases.keys()].filter((n) => !alerts.some((a) => a.alert === n));
    assert.deepEqual(unknown, [], 'the tests name only alerts that exist');
  });

  it('each rule test evaluates the recording group first, then every alert group (else promtool picks at random)', () => {
    const groups = (file: string): string[] =>
      (parse(readFileSync(join(dir, 'rules', file), 'utf8')) as { groups: { name: string }[] }).groups.map(
        (g) => g.name,
      );
    const order = [...groups('recording.yml'), ...groups('alerts.yml')];
    for (const file of testFiles) {
      const doc = parse(readFileSync(join(dir, 'tests', file), 'utf8')) as {
        rule_files: string[];
        group_eval_order?: string[];
      };
      if (!doc.rule_files.some((f) => f.endsWith('alerts.yml'))) continue;
      assert.deepEqual(doc.group_eval_order, order, `${file}: group_eval_order`);
    }
  });

  it('every alert names its runbook section, which docs/monitoring.md has', () => {
    for (const a of alerts) {
      assert.equal(a.annotations?.['runbook'], `docs/monitoring.md#${a.alert!.toLowerCase()}`, a.alert);
      assert.match(monitoring, new RegExp(`^### ${a.alert}$`, 'm'), `docs/monitoring.md has a section ${a.alert}`);
      assert.ok(a.annotations?.['summary'], `${a.alert} has a summary`);
    }
  });

  it('docs/alerts.yaml is the deployed alerts file (one source)', () => {
    assert.equal(realpathSync(join(root, 'docs/alerts.yaml')), realpathSync(join(dir, 'rules/alerts.yml')));
  });
});

/** promtool: EP_PROMTOOL (scripts/test sets it), else .local/prometheus, else none. */
const local = join(root, '.local/prometheus/root/usr/bin/promtool');
const promtool = process.env['EP_PROMTOOL'] ?? (existsSync(local) ? local : undefined);
const NO_PROMTOOL = 'no promtool: scripts/test unpacks Debian prometheus into .local/prometheus and sets EP_PROMTOOL';

/** Runs promtool with `args` (and `input` on stdin), bounded; resolves with its code and output. */
function run(args: string[], input?: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(promtool!, args, { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), BOUND_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, out });
    });
    child.stdin.end(input ?? '');
  });
}

/**
 * prom-client's own default metrics that promtool's linter flags (gauges named *_total); the
 * project's metrics must lint clean.
 */
const PROM_CLIENT_LINT =
  /^egress_(api|worker)_nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/;

describe(
  'deploy/prometheus with promtool',
  { timeout: 5 * BOUND_MS, skip: !promtool && !process.env.CI ? NO_PROMTOOL : false },
  () => {
    let scratch: string;
    before(async () => {
      assert.ok(promtool && existsSync(promtool), NO_PROMTOOL);
      scratch = await mkdtemp(join(tmpdir(), 'ep-prometheus-'));
    });
    after(async () => {
      if (scratch) await rm(scratch, { recursive: true, force: true });
    });

    it('promtool check config: the config, its rule files and target files', async () => {
      // The config reads the API token from `api-token` beside it (the operator's file, not in git):
      // checked in a copy with a token file, since promtool refuses a missing credentials file.
      const copy = join(scratch, 'config');
      await cp(dir, copy, { recursive: true });
      await writeFile(join(copy, 'api-token'), `${TOKEN}\n`);
      const { code, out } = await run(['check', 'config', join(copy, 'prometheus.yml')]);
      assert.equal(code, 0, out);
      assert.match(out, /SUCCESS: 2 rule files found/);
      const missing = await run(['check', 'config', join(dir, 'prometheus.yml')]);
      if (!existsSync(join(dir, 'api-token')))
        assert.match(missing.out, /api-token/, 'without the token file it says so');
    });

    it('promtool check rules: the alerting and recording rules', async () => {
      const files = (await readdir(join(dir, 'rules'))).filter((f) => f.endsWith('.yml')).map((f) => join('rules', f));
      assert.deepEqual(files.sort(), ['rules/alerts.yml', 'rules/recording.yml']);
      const { code, out } = await run(['check', 'rules', ...files]);
      assert.equal(code, 0, out);
      assert.equal(out.match(/SUCCESS/g)?.length, 2, out);
    });

    it('promtool test rules: every case in deploy/prometheus/tests', async () => {
      assert.ok(testFiles.length >= 5, `rule test files: ${testFiles.join(', ')}`);
      const { code, out } = await run(['test', 'rules', ...testFiles.map((f) => join('tests', f))]);
      assert.equal(code, 0, out);
      assert.equal(out.match(/SUCCESS/g)?.length, testFiles.length, out);
    });

    for (const [what, exposition] of [
      ['the worker metrics server', workerExposition],
      ['the API /metrics', apiExposition],
    ] as const) {
      it(`promtool check metrics: ${what} lints clean (beyond prom-client's own defaults)`, async () => {
        const text = await exposition();
        const { code, out } = await run(['check', 'metrics'], text);
        assert.notEqual(code, 1, `promtool could not parse the exposition: ${out}`);
        const problems = out
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => l !== '' && !PROM_CLIENT_LINT.test(l));
        assert.deepEqual(problems, [], 'lint problems in the project metrics');
      });
    }

    it("docker-compose.yml's Prometheus is the version of the promtool that checks these files", async (t) => {
      const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8')) as {
        services: Record<string, { image?: string }>;
      };
      const image = compose.services['prometheus']?.image;
      if (image === undefined) return t.skip('docker-compose.yml has no prometheus service');
      const { out } = await run(['--version']);
      const version = /version (\d+\.\d+\.\d+)/.exec(out)?.[1];
      assert.ok(version, out);
      assert.equal(/:-v(\d+\.\d+\.\d+)\}$/.exec(image)?.[1], version, image);
    });
  },
);
