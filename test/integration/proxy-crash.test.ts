/**
 * Crashes under the proxy lifecycle, with real processes: worker processes (`workers/worker.ts`)
 * that are SIGKILLed, a Temporal dev server of the test's own that is SIGKILLed and restarted on
 * the same SQLite file, the namespaced test hosts over SSH, and a loopback mirror that paces the
 * image so that the upload lasts long enough to be interrupted. Proves:
 *  - a worker SIGKILLed mid-upload: after the upload's heartbeat timeout another worker process
 *    fetches the image again, replaces the half-written base, and the proxy reaches Running with
 *    exactly one domain, one base, one marker and no leaked volume; delete then leaves the base only;
 *  - the dev server SIGKILLed and restarted (same SQLite file, same port) mid-upload and again
 *    while the proxy runs: the same worker process carries on, the proxy reaches Running, answers
 *    the delete update and ends Deleted with nothing left on the host.
 *  - scale-out: two workers serve one task queue; the one running the upload is SIGKILLed and the
 *    other, already running, takes the work over on its own;
 * The shared dev server (scripts/temporal) is never touched: the last test starts its own.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Connection } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { CUSTOM_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import {
  PROXY_DELETE_UPDATE,
  PROXY_STATUS_QUERY,
  PROXY_WORKFLOW_TYPE,
  proxyWorkflowId,
} from '../../contracts/proxy.ts';
import type { DeleteAccepted, ProxyOutcome, ProxyStatus } from '../../contracts/proxy.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import type { WorkerProcess } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import { PROJECT_ROOT, connectClient, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import { domainsOf, loadTestHosts, virsh, volumesOf } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const MiB = 1024 * 1024;

/** A Temporal dev server of this test's own: its own ports and SQLite file, killable at will. */
class PrivateDevServer {
  readonly address: string;
  readonly cli: string;
  readonly dbFile: string;
  readonly port: number;
  readonly uiPort: number;
  #child: ChildProcess | undefined;
  #log: string[] = [];
  private constructor(cli: string, dbFile: string, port: number, uiPort: number) {
    this.cli = cli;
    this.dbFile = dbFile;
    this.port = port;
    this.uiPort = uiPort;
    this.address = `127.0.0.1:${port}`;
  }

  static async create(dir: string): Promise<PrivateDevServer> {
    const { stdout } = await pexec(join(PROJECT_ROOT, 'scripts/temporal'), ['path'], { timeout: 30_000 });
    const [port, uiPort] = [await freePort(), await freePort()];
    return new PrivateDevServer(stdout.trim(), join(dir, 'temporal.db'), port, uiPort);
  }

  /** Starts the server (on the same file and port every time) and waits until it serves, bounded. */
  async start(timeoutMs = 60_000): Promise<void> {
    const sa = Object.entries(CUSTOM_SEARCH_ATTRIBUTES).flatMap(([k, v]) => ['--search-attribute', `${k}=${v}`]);
    const args = [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(this.port),
      '--ui-port',
      String(this.uiPort),
      '--db-filename',
      this.dbFile,
      '--headless',
      ...sa,
      '--log-format',
      'json',
      '--log-level',
      'warn',
      '--disable-config-file',
      '--disable-config-env',
    ];
    const child = spawn(this.cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    const keep = (b: Buffer): void => {
      this.#log.push(...b.toString('utf8').split('\n').filter(Boolean));
      if (this.#log.length > 200) this.#log.splice(0, this.#log.length - 200);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    await pollUntil(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`the private dev server exited while starting:\n${this.#log.slice(-20).join('\n')}`);
        }
        let connection: Connection | undefined;
        try {
          connection = await Connection.connect({ address: this.address, connectTimeout: 2_000 });
          const sa = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
          return Object.hasOwn(sa.customAttributes ?? {}, 'ProxyState') ? true : undefined;
        } catch {
          return undefined;
        } finally {
          await connection?.close().catch(() => undefined);
        }
      },
      { timeoutMs, intervalMs: 250, what: `the private dev server on ${this.address}` },
    );
  }

  /** SIGKILL: no shutdown, whatever the server had not written to SQLite is lost. */
  async kill9(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await withTimeout(exited, 15_000, 'the killed dev server to exit');
  }
}

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

describe('proxy lifecycle across worker and Temporal server crashes', { timeout: 900_000 }, () => {
  let mirror: ImageMirror;
  let hosts: TestHost[];
  let image: Buffer;
  let tmp: string;
  const clients: Client[] = [];
  const processes: WorkerProcess[] = [];
  const servers: PrivateDevServer[] = [];
  /** [host, volume] pairs to remove at the end (bases and markers the tests published). */
  const leftovers: [TestHost, string][] = [];

  before(async () => {
    hosts = loadTestHosts();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-crash-'));
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    image = await readFile(file);
  });

  after(async () => {
    await Promise.all(processes.map((p) => p.kill()));
    for (const s of servers) await s.kill9();
    for (const c of clients) await c.connection.close().catch(() => undefined);
    for (const [host, vol] of leftovers) {
      await virsh(host, 'vol-delete', '--pool', host.pool, vol).catch(() => undefined);
    }
    await mirror?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const waitState = (
    client: Client,
    entry: string,
    name: string,
    state: string,
    timeoutMs: number,
  ): Promise<ProxyStatus> =>
    pollUntil(
      async () => {
        const st = await client.workflow
          .getHandle(proxyWorkflowId(entry, name))
          .query<ProxyStatus>(PROXY_STATUS_QUERY)
          .catch(() => undefined);
        return st?.state === state ? st : undefined;
      },
      { timeoutMs, intervalMs: 500, what: `proxy ${name} ${state}` },
    );

  /** A large-ish image (an empty qcow2 padded to `padMiB`) served slowly, so that its upload lasts. */
  const serveSlow = (path: string, padMiB: number, bytesPerSecond: number): string =>
    mirror.serve(path, Buffer.concat([image, Buffer.alloc(padMiB * MiB, 0x5a)]), { kind: 'slow', bytesPerSecond });

  const waitUploading = (host: TestHost, entry: string, path: string, minBytes: number): Promise<true> =>
    pollUntil(
      async () =>
        mirror.sentBytes(path) >= minBytes && (await volumesOf(host, entry)).includes(`base-${entry}-big.qcow2`)
          ? true
          : undefined,
      { timeoutMs: 90_000, intervalMs: 250, what: `the upload of ${path} to be under way` },
    );

  it('a worker SIGKILLed mid-upload: another worker finishes; one domain, one base, one marker, no leaked volume', async () => {
    const t0 = performance.now();
    const host = hosts[0]!;
    const entry = `ka${run}`;
    const path = `/${entry}/big.qcow2`;
    // 48 MiB at 4 MiB/s: about 12 s per transfer, killed after 8 MiB.
    const url = serveSlow(path, 48, 4 * MiB);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { big: { url } } });
    const providers = await writeProvidersFile(tmp, config);
    const taskQueue = uniqueId('crash-a');
    const client = await connectClient();
    clients.push(client);
    const base = `base-${entry}-big.qcow2`;
    leftovers.push([host, `${base}.marker`], [host, base]);

    const first = await spawnWorker(providers, taskQueue);
    processes.push(first);
    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: proxyWorkflowId(entry, 'k1'),
      taskQueue,
      args: [{ name: 'k1', entry, imageKey: 'big' }],
    });
    await waitUploading(host, entry, path, 8 * MiB);
    await first.kill();
    const killedAt = performance.now();
    assert.equal(mirror.requests(path), 1);
    // The killed worker's half-written base is left behind, unpublished (no marker): debris.
    assert.deepEqual(await volumesOf(host, entry), [base]);

    const second = await spawnWorker(providers, taskQueue);
    processes.push(second);
    const running = await waitState(client, entry, 'k1', 'Running', 300_000);
    const recoveredMs = performance.now() - killedAt;
    assert.equal(running.host, host.name);
    assert.equal(running.conditions.VmRunning.status, 'True');
    assert.equal(mirror.requests(path), 2, 'the retry fetched the image once more');
    assert.ok(
      second.lines.some((l) => l.includes('replacing the debris of an interrupted image fetch')),
      'the second worker replaced the half-written base',
    );
    assert.equal((await domainsOf(host, entry)).length, 1, 'exactly one domain');
    assert.deepEqual(
      await volumesOf(host, entry),
      [base, `${base}.marker`, `ep_${entry}_k1.owner`, `ep_${entry}_k1.qcow2`, `ep_${entry}_k1.seed.iso`].sort(),
      'one base, one marker, one overlay, one seed: no leaked volume',
    );

    const accepted = await handle.executeUpdate<DeleteAccepted, []>(PROXY_DELETE_UPDATE);
    assert.equal(accepted.fromState, 'Running');
    const outcome = (await withTimeout(handle.result(), 120_000, 'the delete to finish')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    assert.deepEqual(await domainsOf(host, entry), []);
    assert.deepEqual(await volumesOf(host, entry), [base, `${base}.marker`].sort());
    await second.stop();
    process.stderr.write(
      `# worker crash: Running ${Math.round(recoveredMs / 1000)} s after the kill, test ${Math.round((performance.now() - t0) / 1000)} s\n`,
    );
  });

  it('scale-out: two workers on one task queue; the one uploading is SIGKILLed; the other finishes alone', async () => {
    const host = hosts[1]!;
    const entry = `kc${run}`;
    const path = `/${entry}/big.qcow2`;
    const url = serveSlow(path, 48, 4 * MiB);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { big: { url } } });
    const providers = await writeProvidersFile(tmp, config);
    const taskQueue = uniqueId('scale');
    const client = await connectClient();
    clients.push(client);
    const base = `base-${entry}-big.qcow2`;
    leftovers.push([host, `${base}.marker`], [host, base]);
    const workers = [await spawnWorker(providers, taskQueue), await spawnWorker(providers, taskQueue)];
    processes.push(...workers);
    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: proxyWorkflowId(entry, 'm1'),
      taskQueue,
      args: [{ name: 'm1', entry, imageKey: 'big' }],
    });
    await waitUploading(host, entry, path, 8 * MiB);
    const uploading = workers.findIndex((w) => w.lines.some((l) => l.includes('"activityType":"ensureBaseImage"')));
    assert.ok(uploading >= 0, 'one of the workers logged the upload activity');
    const survivor = workers[1 - uploading]!;
    await workers[uploading]!.kill();
    const running = await waitState(client, entry, 'm1', 'Running', 300_000);
    assert.equal(running.host, host.name);
    assert.equal(survivor.child.exitCode, null, 'the other worker ran on');
    assert.ok(
      survivor.lines.some((l) => l.includes('replacing the debris of an interrupted image fetch')),
      'the surviving worker took over the upload',
    );
    assert.equal((await domainsOf(host, entry)).length, 1, 'exactly one domain');
    await handle.executeUpdate(PROXY_DELETE_UPDATE);
    assert.equal(((await withTimeout(handle.result(), 120_000, 'the delete')) as ProxyOutcome).state, 'Deleted');
    assert.deepEqual(await domainsOf(host, entry), []);
    await survivor.stop();
  });

  it('the dev server SIGKILLed and restarted on its SQLite file mid-upload and while Running: the run resumes', async () => {
    const t0 = performance.now();
    const host = hosts[1] ?? hosts[0]!;
    const entry = `kb${run}`;
    const path = `/${entry}/big.qcow2`;
    // 24 MiB at 2 MiB/s: about 12 s, so the server is down while bytes still flow.
    const url = serveSlow(path, 24, 2 * MiB);
    const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [host], images: { big: { url } } });
    const providers = await writeProvidersFile(tmp, config);
    const taskQueue = uniqueId('crash-b');
    const base = `base-${entry}-big.qcow2`;
    leftovers.push([host, `${base}.marker`], [host, base]);

    const server = await PrivateDevServer.create(tmp);
    servers.push(server);
    await server.start();
    const client = await connectClient(server.address);
    clients.push(client);
    const worker = await spawnWorker(providers, taskQueue, 60_000, { TEMPORAL_ADDRESS: server.address });
    processes.push(worker);

    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: proxyWorkflowId(entry, 's1'),
      taskQueue,
      args: [{ name: 's1', entry, imageKey: 'big' }],
    });
    await waitUploading(host, entry, path, 4 * MiB);
    assert.equal((await handle.query<ProxyStatus>(PROXY_STATUS_QUERY)).state, 'Provisioning');

    // Crash 1: mid-upload. Down for 3 s, then back on the same file and port.
    await server.kill9();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await server.start();
    const running = await waitState(client, entry, 's1', 'Running', 240_000);
    assert.equal(running.host, host.name);
    assert.equal((await domainsOf(host, entry)).length, 1);
    const fetches = mirror.requests(path);
    assert.ok(fetches >= 1 && fetches <= 2, `fetches: ${fetches}`);

    // Crash 2: while Running (the health loop's timers and polls live in the server).
    await server.kill9();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await server.start();
    await waitState(client, entry, 's1', 'Running', 60_000);
    const accepted = await withTimeout(
      handle.executeUpdate<DeleteAccepted, []>(PROXY_DELETE_UPDATE),
      60_000,
      'the delete update to be accepted after the restart',
    );
    assert.equal(accepted.fromState, 'Running');
    const outcome = (await withTimeout(handle.result(), 120_000, 'the delete to finish')) as ProxyOutcome;
    assert.equal(outcome.state, 'Deleted');
    assert.deepEqual(
      { ...outcome.deleted, logs: undefined },
      { domain: 'deleted', overlay: 'deleted', seed: 'deleted', ownerRecord: 'deleted', logs: undefined },
    );
    assert.notEqual(outcome.deleted?.logs, 'failed', 'the log files were removed');
    assert.deepEqual(await domainsOf(host, entry), []);
    assert.deepEqual(await volumesOf(host, entry), [base, `${base}.marker`].sort());
    assert.equal(worker.child.exitCode, null, 'the same worker process carried the run through both restarts');
    await worker.stop();
    process.stderr.write(
      `# server crash: ${fetches} fetch(es), test ${Math.round((performance.now() - t0) / 1000)} s\n`,
    );
  });
});
