/**
 * Conformance of the API to its own OpenAPI document: Schemathesis (PyPI, installed into
 * .local/venv by scripts/deps.sh ep_schemathesis) against the real API on the dev server with a
 * real worker (in-process, the real workflows and activities, one namespaced test host, an empty
 * qcow2 from a loopback mirror), `--checks all`, the positive, negative and stateful phases, with a
 * fixed seed and a random one (printed, for reproduction). Afterwards every proxy workflow of the
 * fuzzed entry is one a 2xx answer to a POST announced: the fuzzer started nothing it was not
 * entitled to.
 *
 *   EP_ST_SEED=N     the second run's seed (default random); EP_ST_MAX_EXAMPLES (default 12)
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { PROXY_DELETE_UPDATE } from '../../contracts/proxy.ts';
import type { providerHealthWorkflow } from '../../workflows/index.ts';
import { catalogOf, startCatalogPublisher } from '../../runtime/catalog.ts';
import { startTestApi, writeTokens } from '../support/api.ts';
import type { TestApi, TestTokens } from '../support/api.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import {
  connectClient,
  connectWorker,
  installTestRuntime,
  onTaskQueues,
  PROJECT_ROOT,
  uniqueId,
} from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const ST = join(PROJECT_ROOT, '.local/venv/bin/st');
const FIXED_SEED = 20261201;
const run = Date.now().toString(36);

/** Runs Schemathesis once; resolves with its exit code and output (bounded: 6 minutes). */
function schemathesis(url: string, token: string, seed: number): Promise<{ code: number | null; out: string }> {
  const args = [
    '--config-file',
    join(PROJECT_ROOT, 'test/integration/schemathesis.toml'),
    '--no-color',
    'run',
    `${url}/openapi.json`,
    '--url',
    url,
    '--checks',
    'all',
    // A deleted proxy stays readable as state Deleted by design (schemathesis.toml says why).
    '--exclude-checks',
    'use_after_free',
    '--phases',
    'examples,coverage,fuzzing,stateful',
    '--header',
    `Authorization: Bearer ${token}`,
    '--seed',
    String(seed),
    '--max-examples',
    process.env['EP_ST_MAX_EXAMPLES'] ?? '12',
    '--workers',
    '1',
    '--request-timeout',
    '30',
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(ST, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 360_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('Schemathesis conformance of the API (dev server, real worker)', { timeout: 900_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let mirror: ImageMirror;
  let tmp: string;
  let tokens: TestTokens;
  let worker: RunningWorker | undefined;
  let catalog: { stop(): Promise<void> } | undefined;
  let api: TestApi;
  /** 201 answers to POST /v1/proxies (a workflow started). */
  let answered201 = 0;
  const entry = `st${run}`;
  const taskQueue = uniqueId('api-st');

  before(async () => {
    assert.ok(existsSync(ST), `${ST} is missing: scripts/test installs it (scripts/deps.sh ep_schemathesis)`);
    installTestRuntime();
    const hosts = loadTestHosts();
    client = await connectClient();
    connection = await connectWorker();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-st-'));
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(file));
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [hosts[0]!], images: { empty: { url } } });
    worker = await startFleetWorker(connection, client, config, taskQueue);
    catalog = await startCatalogPublisher(client, taskQueue, catalogOf(config), { info() {}, warn() {} });
    tokens = await writeTokens(tmp);
    // The survey of this run's own host, so /v1/hosts answers 200s too (and the fuzzer cordons and
    // drains only that host: the namespace's schedule lists other runs' hosts).
    const survey = await client.workflow.execute<typeof providerHealthWorkflow>('providerHealthWorkflow', {
      taskQueue,
      workflowId: uniqueId('provider-health'),
      workflowExecutionTimeout: '2 minutes',
    });
    api = await startTestApi(
      client,
      taskQueue,
      tokens,
      5_000,
      (app) =>
        app.addHook('onResponse', async (request, reply) => {
          if (request.method === 'POST' && request.routeOptions.url === '/v1/proxies' && reply.statusCode === 201) {
            answered201++;
          }
        }),
      { survey: () => Promise.resolve({ result: survey, running: false }) },
    );
  });

  after(async () => {
    // End what the fuzzer started (through the workflow's delete), bounded.
    if (client) {
      for await (const wf of client.workflow.list({
        query: `${onTaskQueues(taskQueue)} AND ExecutionStatus = 'Running'`,
      })) {
        const h = client.workflow.getHandle(wf.workflowId);
        if (wf.type === 'proxyLifecycle') await h.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined);
        else await h.terminate('conformance run over').catch(() => undefined);
      }
    }
    await api?.close();
    await catalog?.stop();
    await worker?.stop();
    await mirror?.close();
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('passes with no failure, with a fixed seed and a random one; starts only what it was told it started', async () => {
    const random = Number(process.env['EP_ST_SEED'] ?? Math.floor(Math.random() * 2 ** 31));
    for (const seed of [FIXED_SEED, random]) {
      const started = Date.now();
      const res = await schemathesis(api.url, tokens.admin, seed);
      const cases = /(\d+) generated/.exec(res.out)?.[1] ?? '?';
      process.stderr.write(
        `schemathesis seed ${seed}: exit ${res.code}, ${cases} cases, ${((Date.now() - started) / 1000).toFixed(0)} s ` +
          `(reproduce: EP_ST_SEED=${seed})\n`,
      );
      assert.equal(res.code, 0, `schemathesis --seed ${seed} failed:\n${res.out.slice(-12_000)}`);
    }
    let workflows = 0;
    for await (const wf of client.workflow.list({
      query: `TaskQueue = '${taskQueue}' AND WorkflowType = 'proxyLifecycle'`,
    })) {
      assert.ok(wf.workflowId.startsWith(`proxy/${entry}/`), wf.workflowId);
      workflows++;
    }
    process.stderr.write(
      `proxy workflows started: ${workflows}; POST /v1/proxies answered 201: ${answered201}; store starts: ${api.created()}\n`,
    );
    assert.equal(workflows, answered201, 'every proxy workflow is one a 201 announced');
  });
});
