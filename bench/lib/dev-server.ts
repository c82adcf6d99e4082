/**
 * What the control-plane benchmark (steady-state.ts) uses: a Temporal dev server of its own on
 * a port of its choosing (so its CPU and RSS are the benchmark's alone), a quiet
 * worker of the project's workflows on it, and the CPU-seconds and RSS of a process from /proc.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  makeTelemetryFilterString,
  NativeConnection,
  Runtime,
  Worker,
} from '@temporalio/worker';
import { sdkConnectionOptions } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { ensureSearchAttributes } from '../../client/search-attributes.ts';
import { createWorkerSet, HEARTBEAT_THROTTLE_MS } from '../../runtime/worker-set.ts';
import { sleep } from './run.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
/** The SDK's own `maxHeartbeatThrottleInterval` (the worker's before runtime/worker-set.ts capped it). */
const SDK_HEARTBEAT_THROTTLE_MS = 60_000;
const TICK = 100; // USER_HZ

/** User + system CPU-seconds of process `pid` so far. */
export function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / TICK;
}

/** Resident set size of `pid` (or this process) in MiB. */
export function rssMiB(pid: number | 'self'): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

export interface DevServer {
  pid: number;
  dir: string;
  /** Stops the server and removes its database. */
  stop: () => Promise<void>;
}

/** Resolves when 127.0.0.1:`port` can be bound, or throws naming the port: a server left there would answer for ours. */
async function portFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err) =>
      reject(
        new Error(
          `--port ${port}: 127.0.0.1:${port} is taken (${err.message}); stop what holds it or pass another port`,
        ),
      ),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

/** Starts `temporal server start-dev` on 127.0.0.1:`port` with a database of its own; waits (60 s at most) until it answers. */
export async function startDevServer(port: number, prefix: string): Promise<DevServer> {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const cli = join(ROOT, '.local/venv/bin/temporal');
  if (!existsSync(cli)) throw new Error(`${cli}: no Temporal CLI; install it with scripts/temporal setup`);
  await portFree(port);
  const args = ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port)];
  const child = spawn(cli, [...args, '--db-filename', join(dir, 'db'), '--log-level', 'error'], { stdio: 'ignore' });
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = `exited (${signal ?? `code ${code}`})`));
  child.once('error', (err) => (exited = `failed to start: ${err.message}`));
  const stop = async (): Promise<void> => {
    child.kill('SIGTERM');
    await sleep(1_000);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const c = await Connection.connect({ address: `127.0.0.1:${port}`, connectTimeout: 1_000 });
      await c.close();
      break;
    } catch (err) {
      if (exited !== undefined) {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`the bench's dev server on ${port} ${exited} before it answered (port in use?)`, {
          cause: err,
        });
      }
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`the bench's dev server did not answer on ${port} within 60 s`, { cause: err });
      }
      await sleep(500);
    }
  }
  return { pid: child.pid!, dir, stop };
}

/** The benchmarks log errors only (the SDK's runtime and the bundler). */
export const QUIET = new DefaultLogger('ERROR');

/** Installs the SDK's runtime with errors only in its logs; call once, before any worker. */
export function installQuietRuntime(): void {
  Runtime.install({
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }) } },
    logger: QUIET,
  });
}

export interface BenchWorker {
  connection: Connection;
  client: Client;
  worker: Worker;
  /** With `caps.pools`: the pools' worker beside it (runtime/worker-set.ts), one bundle for both. */
  pools?: Worker;
}

/**
 * A client of the dev server on `port` (or of the server `settings` name, TLS included, e.g.
 * `scripts/temporal cluster`'s; the project's search attributes registered) and a worker of every
 * project workflow on `taskQueue` with the activities `activities(client)` builds (its workflow
 * cache as given: steady-state.ts sizes it as runtime/workflow-cache.ts sizes the worker's).
 */
export async function benchWorker(
  target: number | TemporalSettings,
  taskQueue: string,
  activities: (client: Client) => object,
  caps: {
    activities: number;
    /** The cache size alone, or runtime/workflow-cache.ts's `workflowCacheOptions`. */
    workflows: number | { maxCachedWorkflows: number; maxConcurrentWorkflowTaskExecutions: number };
    /** Also poll the pools' task queue, as a worker process does. */
    pools?: boolean;
    /** The SDK's heartbeat throttle cap in ms; default the worker's (runtime/worker-set.ts), `sdk` the SDK's own (60 s). */
    heartbeatThrottle?: number | 'sdk';
  },
): Promise<BenchWorker> {
  const settings = typeof target === 'number' ? { address: `127.0.0.1:${target}`, namespace: 'default' } : target;
  const sdk = sdkConnectionOptions(settings);
  const connection = await Connection.connect(sdk);
  await ensureSearchAttributes(connection, settings.namespace);
  const client = new Client({ connection, namespace: settings.namespace });
  const bundle = await bundleWorkflowCode({ workflowsPath: join(ROOT, 'workflows/index.ts'), logger: QUIET });
  const options = {
    connection: await NativeConnection.connect(sdk),
    namespace: settings.namespace,
    taskQueue,
    workflowBundle: bundle,
    activities: activities(client),
    maxConcurrentActivityTaskExecutions: caps.activities,
    maxHeartbeatThrottleInterval:
      caps.heartbeatThrottle === 'sdk' ? SDK_HEARTBEAT_THROTTLE_MS : (caps.heartbeatThrottle ?? HEARTBEAT_THROTTLE_MS),
    ...(typeof caps.workflows === 'number' ? { maxCachedWorkflows: caps.workflows } : caps.workflows),
  };
  if (caps.pools === true) {
    const set = await createWorkerSet(options);
    return { connection, client, worker: set.main, pools: set.pools };
  }
  return { connection, client, worker: await Worker.create(options) };
}
