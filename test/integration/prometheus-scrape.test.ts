/**
 * A real Prometheus (Debian's binary, unpacked by scripts/test into .local/prometheus:
 * EP_PROMETHEUS) with deploy/prometheus's configuration and rules scrapes a worker process
 * (`bin/worker --metrics-listen`) and the API (its Fastify server over the dev server, with a read
 * token from the file the config names), while a proxy on a test host, made from an empty qcow2
 * served by a loopback mirror, goes to Running (it never becomes Healthy: no Squid boots from an
 * empty disk; the alerts' tests in deploy/prometheus/tests cover Healthy). PromQL then shows the
 * proxy on its host (egress_host_proxies, the API counting it by its ProxyHost), its image upload and domain start from the worker
 * (egress_image_upload_bytes_total, egress_libvirt_rpc_duration_seconds_count), and every rule
 * evaluates without error. Without the binary it skips locally and fails under CI.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import { PROXY_DELETE_UPDATE, proxyWorkflowId } from '../../contracts/proxy.ts';
import { http, startTestApi, writeTokens } from '../support/api.ts';
import type { TestApi, TestTokens } from '../support/api.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import type { WorkerProcess } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import { freePort } from '../support/sshd.ts';
import { connectClient, PROJECT_ROOT, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const local = join(PROJECT_ROOT, '.local/prometheus/root/usr/bin/prometheus');
const prometheusBin = process.env['EP_PROMETHEUS'] ?? (existsSync(local) ? local : undefined);
const NO_PROMETHEUS =
  'no prometheus: scripts/test unpacks Debian prometheus into .local/prometheus and sets EP_PROMETHEUS';

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

describe(
  'a real Prometheus scrapes a worker process and the API with deploy/prometheus',
  { timeout: 300_000, skip: !prometheusBin && !process.env.CI ? NO_PROMETHEUS : false },
  () => {
    let client: Client;
    let mirror: ImageMirror;
    let hosts: TestHost[];
    let tmp: string;
    let tokens: TestTokens;
    let worker: WorkerProcess | undefined;
    let api: TestApi | undefined;
    let prometheus: ChildProcess | undefined;
    const promLines: string[] = [];
    let prom: string;
    const entry = `prom${run}`;
    const taskQueue = uniqueId('prom');
    const name = 'scraped';

    /** One instant PromQL query; its samples. */
    const query = async (q: string): Promise<Sample[]> => {
      const res = await fetch(`${prom}/api/v1/query?query=${encodeURIComponent(q)}`, {
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await res.json()) as { status: string; data?: { result: Sample[] }; error?: string };
      assert.equal(body.status, 'success', `${q}: ${body.error}`);
      return body.data!.result;
    };
    /** Polls PromQL `q` until `ok` holds for its first value; on a timeout says what it saw and the targets. */
    const pollValue = async (q: string, ok: (v: number) => boolean, timeoutMs = 60_000): Promise<number> => {
      let last: number | undefined;
      return pollUntil(
        async () => {
          last = await value(q);
          return last !== undefined && ok(last) ? last : undefined;
        },
        { timeoutMs, intervalMs: 1000, what: q },
      ).catch(async (err: unknown) => {
        const up = (await query('up')).map((x) => `${x.metric['job']}=${x.value[1]}`).join(' ');
        throw new Error(`${String(err)} (last value ${last}; up: ${up})`);
      });
    };
    const value = async (q: string): Promise<number | undefined> => {
      const [first] = await query(q);
      return first === undefined ? undefined : Number(first.value[1]);
    };

    before(async () => {
      assert.ok(prometheusBin && existsSync(prometheusBin), NO_PROMETHEUS);
      hosts = loadTestHosts();
      client = await connectClient();
      mirror = await ImageMirror.start();
      tmp = await mkdtemp(join(tmpdir(), 'ep-prom-'));
      const image = join(tmp, 'empty.qcow2');
      await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', image, '64M'], { timeout: 20_000 });
      const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(image));
      const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { empty: { url } } });
      worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 90_000, {
        EP_WORKER_METRICS_LISTEN: '127.0.0.1:0',
      });
      const served = worker.lines
        .map((l) => JSON.parse(l) as { msg?: string; url?: string })
        .find((l) => l.msg === 'metrics served')?.url;
      assert.ok(served, `the worker logged its metrics address:\n${worker.lines.slice(-10).join('\n')}`);
      tokens = await writeTokens(tmp);
      // The survey the API reads hosts from: this run's host, reached (the worker runs without the
      // provider-health schedule, --no-schedules).
      const survey: ProviderHealthResult = {
        at: new Date().toISOString(),
        entries: [{ entry, ready: 1, total: 1, hosts: [{ entry, host: hosts[0]!.name, weight: 1, reachable: true }] }],
      };
      api = await startTestApi(client, taskQueue, tokens, 5_000, undefined, {
        survey: () => Promise.resolve({ result: survey, running: false }),
      });

      // deploy/prometheus as shipped, with this run's targets, the read token, and short intervals.
      const dir = join(tmp, 'prometheus');
      await cp(join(PROJECT_ROOT, 'deploy/prometheus'), dir, { recursive: true });
      await writeFile(join(dir, 'api-token'), `${tokens.reader}\n`);
      await writeFile(join(dir, 'targets/worker.yml'), `- targets: ['${new URL(served).host}']\n`);
      await writeFile(join(dir, 'targets/api.yml'), `- targets: ['${new URL(api.url).host}']\n`);
      const cfgPath = join(dir, 'prometheus.yml');
      const cfg = (await readFile(cfgPath, 'utf8'))
        .replace(/scrape_interval: \d+s/g, 'scrape_interval: 5s')
        .replace(/scrape_timeout: \d+s/g, 'scrape_timeout: 5s')
        .replace(/evaluation_interval: \d+s/g, 'evaluation_interval: 1s')
        .replace(/^global:\n/m, 'global:\n  scrape_timeout: 5s\n'); // the default (10 s) may not exceed the interval
      await writeFile(cfgPath, cfg);
      const port = await freePort();
      prom = `http://127.0.0.1:${port}`;
      prometheus = spawn(
        prometheusBin,
        [
          `--config.file=${cfgPath}`,
          `--storage.tsdb.path=${join(tmp, 'tsdb')}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      prometheus.stderr!.on('data', (c: Buffer) => promLines.push(...c.toString().split('\n').filter(Boolean)));
      prometheus.stdout!.on('data', (c: Buffer) => promLines.push(...c.toString().split('\n').filter(Boolean)));
    });

    after(async () => {
      const h = client?.workflow.getHandle(proxyWorkflowId(entry, name));
      if (h && worker) {
        const open = await h
          .describe()
          .then((d) => d.status.name === 'RUNNING')
          .catch(() => false);
        if (open) {
          await h.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined);
          await client.withDeadline(Date.now() + 90_000, () => h.result()).catch(() => undefined);
        }
      }
      if (prometheus && prometheus.exitCode === null) {
        const exited = new Promise<void>((r) => prometheus!.once('exit', () => r()));
        prometheus.kill('SIGTERM');
        await withTimeout(exited, 20_000, 'prometheus to stop').catch(() => prometheus!.kill('SIGKILL'));
      }
      await api?.close();
      await worker?.stop();
      await mirror?.close();
      if (tmp) await rm(tmp, { recursive: true, force: true });
    });

    it('both targets are up (the API with the read token from the file the config names)', async () => {
      let seen = 'no answer from Prometheus';
      const targets = await pollUntil(
        async () => {
          const res = await fetch(`${prom}/api/v1/targets`, { signal: AbortSignal.timeout(10_000) }).catch(
            () => undefined,
          );
          if (!res?.ok) return undefined;
          const body = (await res.json()) as {
            data: { activeTargets: { labels: { job: string }; health: string; lastError: string }[] };
          };
          const t = body.data.activeTargets;
          seen = t.map((x) => `${x.labels.job}: ${x.health} ${x.lastError}`).join('; ');
          return t.length === 2 && t.every((x) => x.health === 'up') ? t : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 1000, what: 'both targets up' },
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}; targets: ${seen}; prometheus: ${promLines.slice(-3).join(' | ')}`);
      });
      assert.deepEqual(targets.map((t) => t.labels.job).sort(), ['egress-api', 'egress-worker']);
      assert.equal(await value('egress_api_temporal_up'), 1);
    });

    it('a proxy going Running shows in PromQL: on its host, its image uploaded, its domain started', async () => {
      const created = await http(api!.url, 'POST', '/v1/proxies', {
        token: tokens.admin,
        body: { name, entry, imageKey: 'empty' },
      });
      assert.equal(created.status, 201, created.text);
      await pollUntil(
        async () => {
          const r = await http(api!.url, 'GET', `/v1/proxies/${entry}/${name}`, { token: tokens.admin });
          return (r.body['status'] as { state?: string } | undefined)?.state === 'Running' ? true : undefined;
        },
        { timeoutMs: 150_000, intervalMs: 1000, what: `${name} Running` },
      );
      const host = `${entry}/${hosts[0]!.name}`;
      assert.equal(await pollValue(`egress_host_proxies{entry="${entry}"}`, (v) => v === 1), 1);
      // Counted over the namespace at scrape time: at least this one, once visibility has it.
      assert.ok((await pollValue('job:egress_proxies:max{state="Running"}', (v) => v >= 1)) >= 1);
      assert.ok((await pollValue(`sum(egress_image_upload_bytes_total{host="${host}"})`, (v) => v > 0)) > 0);
      const started = `sum(egress_libvirt_rpc_duration_seconds_count{host="${host}",procedure="DOMAIN_CREATE",outcome="ok"})`;
      assert.ok((await pollValue(started, (v) => v >= 1)) >= 1);
      // The recording rule over the API's host gauge, and the host alerts quiet for this host.
      assert.equal(await value(`entry_host:egress_host_reachable:max{entry="${entry}"}`), 1);
      assert.deepEqual(await query(`ALERTS{alertname="EgressHostUnreachable",entry="${entry}"}`), []);
      assert.deepEqual(await query(`ALERTS{alertname="EgressHostDialsFailing",host="${host}"}`), []);
    });

    it('every recording and alerting rule evaluates without error', async () => {
      const res = await fetch(`${prom}/api/v1/rules`, { signal: AbortSignal.timeout(10_000) });
      const body = (await res.json()) as {
        data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
      };
      const rules = body.data.groups.flatMap((g) => g.rules);
      assert.ok(rules.length >= 30, `rules loaded: ${rules.length}`);
      const bad = rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.health} ${r.lastError ?? ''}`);
      assert.deepEqual(bad, []);
    });
  },
);
