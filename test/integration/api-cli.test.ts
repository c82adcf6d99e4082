/**
 * egressctl as scripts run it, against `node workers/api.ts` as a process of its own (every line
 * it writes must be JSON with an RFC 3339 time), the dev server, a real worker and the test
 * hosts: exit codes (0 ok, 1 failure, 2 usage, 3 not found, 4 conflict, 5 unavailable), JSON
 * output, watch following a proxy to Running, delete --wait to Deleted, and hosts check; and the
 * commands that go to Temporal directly (smoke; exit 5 when Temporal is not there).
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { PROXY_DELETE_UPDATE, proxyWorkflowId } from '../../contracts/proxy.ts';
import { writeTokens } from '../support/api.ts';
import type { TestTokens } from '../support/api.ts';
import { catalogOf, startCatalogPublisher } from '../../runtime/catalog.ts';
import { fleetConfig, startFleetWorker, writeProvidersFile } from '../support/fleet.ts';
import type { ProvidersConfig } from '../../lib/config/index.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import {
  connectClient,
  connectWorker,
  installTestRuntime,
  pollUntil,
  PROJECT_ROOT,
  uniqueId,
  withTimeout,
} from '../support/temporal.ts';
import net from 'node:net';

/** A TCP port free on 127.0.0.1 right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
import { runCommand } from '../support/run.ts';
import type { CommandResult } from '../support/run.ts';
import { loadTestHosts, TESTHOST_STATE } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const EGRESSCTL = join(PROJECT_ROOT, 'bin/egressctl');

const ctl = (args: string[], timeoutMs = 60_000): Promise<CommandResult> =>
  runCommand(EGRESSCTL, args, { cwd: PROJECT_ROOT, timeoutMs });

describe('egressctl against the API process', { timeout: 300_000 }, () => {
  let catalog: { stop(): Promise<void> } | undefined;
  let client: Client;
  let connection: NativeConnection;
  let mirror: ImageMirror;
  let tmp: string;
  let tokens: TestTokens;
  let worker: RunningWorker | undefined;
  let apiProc: ChildProcess | undefined;
  const apiLines: string[] = [];
  let apiUrl = '';
  const entry = `cl${run}`;
  const taskQueue = uniqueId('api-cli');
  let g: string[] = [];
  let devConfig: ProvidersConfig;

  before(async () => {
    installTestRuntime();
    const hosts = loadTestHosts();
    client = await connectClient();
    connection = await connectWorker();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-cli-'));
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(file));
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts: [hosts[1] ?? hosts[0]!],
      images: { empty: { url } },
    });
    devConfig = config;
    worker = await startFleetWorker(connection, client, config, taskQueue);
    // What workers/worker.ts does at start-up: the API validates writes against it.
    catalog = await startCatalogPublisher(client, taskQueue, catalogOf(config), { info() {}, warn() {} });
    tokens = await writeTokens(tmp);
    const child = spawn(
      process.execPath,
      [join(PROJECT_ROOT, 'bin/api'), '--token-file', tokens.file, '--port', '0', '--task-queue', taskQueue],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } },
    );
    apiProc = child;
    const listening = new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        apiLines.push(line);
        const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(line);
        if (m && line.includes('"api listening"')) resolve(m[1]!);
      });
      createInterface({ input: child.stderr }).on('line', (line) => apiLines.push(`stderr: ${line}`));
      child.once('exit', (code) => reject(new Error(`the API exited (${code}):\n${apiLines.join('\n')}`)));
    });
    apiUrl = await withTimeout(listening, 30_000, 'the API process to listen');
    g = ['--api', apiUrl, '--token-file', tokens.file];
  });

  after(async () => {
    const h = client?.workflow.getHandle(proxyWorkflowId(entry, 'c1'));
    if (
      h &&
      (await h
        .describe()
        .then((d) => d.status.name === 'RUNNING')
        .catch(() => false))
    ) {
      await h.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined);
      await client.withDeadline(Date.now() + 60_000, () => h.result()).catch(() => undefined);
    }
    await catalog?.stop();
    if (apiProc && apiProc.exitCode === null) {
      const exited = new Promise((resolve) => apiProc!.once('exit', resolve));
      apiProc.kill('SIGTERM');
      await withTimeout(exited, 15_000, 'the API process to stop').catch(() => apiProc!.kill('SIGKILL'));
    }
    await worker?.stop();
    await mirror?.close();
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('--help on every command exits 0; unknown commands and options exit 2', async () => {
    const top = await ctl(['--help']);
    assert.equal(top.code, 0);
    for (const w of ['proxy create', 'proxy watch', 'hosts check', 'discovery', 'Exit codes', '--output json|table']) {
      assert.ok(top.stdout.includes(w), w);
    }
    for (const cmd of [
      ['proxy', 'create'],
      ['proxy', 'get'],
      ['proxy', 'list'],
      ['proxy', 'delete'],
      ['proxy', 'watch'],
      ['hosts', 'check'],
      ['image', 'warm'],
      ['discovery'],
    ]) {
      const r = await ctl([...cmd, '--help']);
      assert.equal(r.code, 0, cmd.join(' '));
      assert.ok(r.stdout.startsWith(`egressctl ${cmd.join(' ')}`), r.stdout);
    }
    assert.equal((await ctl(['proxy', 'explode'])).code, 2);
    assert.equal((await ctl(['proxy', 'list', '--bogus', ...g])).code, 2);
    assert.equal((await ctl(['proxy', 'get', 'no-slash', ...g])).code, 2);
    assert.equal((await ctl(['proxy', 'list', '--output', 'yaml', ...g])).code, 2);
  });

  it('exit codes: 3 not found, 2 bad input, 1 bad token, 5 unreachable API', async () => {
    const nf = await ctl(['proxy', 'get', `${entry}/nothing`, ...g]);
    assert.equal(nf.code, 3, nf.stderr);
    assert.match(nf.stderr, /404 NOT_FOUND/);
    const open = await ctl(['proxy', 'create', `${entry}/o1`, '--image', 'empty', '--allow-cidr', '0.0.0.0/0', ...g]);
    assert.equal(open.code, 2);
    assert.match(open.stderr, /OPEN_PROXY_REFUSED/);
    const badTokenFile = join(tmp, 'bad-token');
    await (await import('node:fs/promises')).writeFile(badTokenFile, 'x'.repeat(32) + '\n');
    const unauth = await ctl(['proxy', 'list', '--api', apiUrl, '--token-file', badTokenFile]);
    assert.equal(unauth.code, 1);
    assert.match(unauth.stderr, /401/);
    const down = await ctl(['discovery', '--api', 'http://127.0.0.1:1', '--token-file', tokens.file]);
    assert.equal(down.code, 5);
  });

  it('create (0), again with the same spec (0), another spec (4); watch follows it to Running; list and discovery as JSON', async () => {
    const made = await ctl(['proxy', 'create', `${entry}/c1`, '--image', 'empty', '--output', 'json', ...g]);
    assert.equal(made.code, 0, made.stderr);
    assert.equal((JSON.parse(made.stdout) as { created: boolean }).created, true);
    const again = await ctl(['proxy', 'create', `${entry}/c1`, '--image', 'empty', '--output', 'json', ...g]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as { created: boolean }).created, false);
    const other = await ctl(['proxy', 'create', `${entry}/c1`, '--image', 'empty', '--vcpus', '2', ...g]);
    assert.equal(other.code, 4, other.stderr);

    const watched = await ctl(
      ['proxy', 'watch', `${entry}/c1`, '--output', 'json', '--interval-ms', '300', '--watch-ms', '120000', ...g],
      150_000,
    );
    assert.equal(watched.code, 0, watched.stderr);
    const lines = watched.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { state: string; at: string });
    assert.equal(lines.at(-1)!.state, 'Running');
    for (const l of lines) assert.ok(!Number.isNaN(Date.parse(l.at)));

    const listed = await ctl(['proxy', 'list', '--entry', entry, '--output', 'json', ...g]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok((JSON.parse(listed.stdout) as { proxies: { name: string }[] }).proxies.some((p) => p.name === 'c1'));
    const table = await ctl(['proxy', 'list', '--entry', entry, ...g]);
    assert.match(table.stdout, /^ENTRY\s+NAME\s+STATE/);
    const disc = await ctl(['discovery', '--entry', entry, '--output', 'json', ...g]);
    assert.equal(disc.code, 0, disc.stderr);
    assert.deepEqual((JSON.parse(disc.stdout) as { proxies: unknown[] }).proxies, []);
  });

  it('delete --wait ends Deleted (0); watch of a deleted proxy ends 0; a short watch of a missing one is 3', async () => {
    const del = await ctl(
      ['proxy', 'delete', `${entry}/c1`, '--wait', '--wait-ms', '90000', '--output', 'json', ...g],
      120_000,
    );
    assert.equal(del.code, 0, del.stderr);
    assert.equal((JSON.parse(del.stdout) as { state: string }).state, 'Deleted');
    assert.equal((await ctl(['proxy', 'watch', `${entry}/c1`, '--watch-ms', '5000', ...g])).code, 0);
    assert.equal((await ctl(['proxy', 'watch', `${entry}/none`, '--watch-ms', '5000', ...g])).code, 3);
  });

  it('image warm --wait puts the base on the host (0, JSON per host); an unknown key exits 2', async () => {
    const warm = await ctl(
      ['image', 'warm', `${entry}/empty`, '--wait', '--wait-ms', '120000', '--output', 'json', ...g],
      180_000,
    );
    assert.equal(warm.code, 0, warm.stderr + warm.stdout);
    const body = JSON.parse(warm.stdout) as { state: string; result: { hosts: { ok: boolean; sizeBytes: number }[] } };
    assert.equal(body.state, 'Done');
    assert.ok(body.result.hosts.length === 1 && body.result.hosts[0]!.ok && body.result.hosts[0]!.sizeBytes > 0);
    const bad = await ctl(['image', 'warm', `${entry}/nosuch`, '--wait', '--wait-ms', '60000', ...g], 120_000);
    assert.equal(bad.code, 2, bad.stderr + bad.stdout);
    // Refused by the API against the catalog before anything starts (422, exit 2).
    assert.match(bad.stderr, /422 UNKNOWN_IMAGE.*nosuch.*known: empty/);
  });

  it('hosts check prints one JSON line per host of the providers file', async () => {
    const providers = join(tmp, 'providers.yaml');
    const made = await pexec(process.execPath, ['dev/providers.ts', '--state', TESTHOST_STATE, '--out', providers], {
      cwd: PROJECT_ROOT,
      timeout: 60_000,
    });
    assert.equal(made.stderr.includes('"level":"error"'), false);
    const r = await ctl(['hosts', 'check', '--providers', providers, '--output', 'json']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { reachable: boolean });
    assert.equal(lines.length, loadTestHosts().length);
    assert.ok(lines.every((l) => l.reachable));
  });

  it('dev runs a worker and the API on loopback until SIGINT, then stops both (the dev server it found stays)', async () => {
    const data = await mkdtemp(join(tmp, 'dev-'));
    const providers = await writeProvidersFile(data, devConfig);
    const port = await freePort();
    const child = spawn(EGRESSCTL, ['dev', '--providers', providers, '--api-port', String(port), '--data', data], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await pollUntil(() => Promise.resolve(out.includes('ready.') ? true : undefined), {
        timeoutMs: 120_000,
        what: 'egressctl dev to be ready',
      });
      assert.match(out, new RegExp(`API: +http://127\\.0\\.0\\.1:${port}`));
      assert.match(out, /Web UI: +http:\/\/127\.0\.0\.1:\d+/);
      const ready = await pollUntil(
        async () => {
          const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
          return r?.status === 200 ? r : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500, what: 'the dev API to be ready (a worker polling)' },
      );
      assert.equal(ready.status, 200);
      const token = (await readFile(join(data, 'api-tokens'), 'utf8'))
        .split('\n')
        .find((l) => /^[0-9a-f]{48} admin$/.test(l))!;
      const list = await fetch(`http://127.0.0.1:${port}/v1/proxies`, {
        headers: { authorization: `Bearer ${token.split(' ')[0]}` },
      });
      assert.equal(list.status, 200);
    } finally {
      child.kill('SIGINT');
    }
    assert.equal(await withTimeout(exited, 60_000, 'egressctl dev to stop'), 0, out);
    assert.match(out, /stopped\./);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'the API is gone');
    assert.ok(
      (await client.workflow.count('WorkflowType = "proxyLifecycle"')).count >= 0,
      'the shared dev server still answers',
    );
  });

  it('smoke runs the smoke workflow through Temporal, not the API (0, JSON result); no Temporal is exit 5', async () => {
    const env = { ...process.env, TEMPORAL_TASK_QUEUE: taskQueue };
    const r = await runCommand(EGRESSCTL, ['smoke', '--name', 'egressctl', '--output', 'json'], {
      cwd: PROJECT_ROOT,
      env,
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 0, r.stderr);
    const body = JSON.parse(r.stdout) as { workflowId: string; result: { greeting: string } };
    assert.match(body.workflowId, /^smoke\/cli-/);
    assert.match(body.result.greeting, /egressctl/);
    for (const args of [['smoke'], ['proxy', 'up', 'p1', '--entry', entry]]) {
      const down = await runCommand(EGRESSCTL, [...args, '--timeout-ms', '2000'], {
        cwd: PROJECT_ROOT,
        env: { ...env, TEMPORAL_ADDRESS: '127.0.0.1:1' },
        timeoutMs: 30_000,
      });
      assert.equal(down.code, 5, `${args.join(' ')}: ${down.stderr}`);
      assert.match(down.stderr, /Temporal at 127\.0\.0\.1:1/);
    }
  });

  it('every line the API process wrote is JSON with an RFC 3339 time', () => {
    assert.ok(apiLines.length > 5, 'the API logged its requests');
    for (const line of apiLines) {
      const o = JSON.parse(line) as { time: string; level: string };
      assert.match(o.time, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, line);
      assert.equal(typeof o.level, 'string');
    }
  });
});
