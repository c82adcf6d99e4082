/**
 * A fleet for workflow integration tests: a providers file over the local test hosts (an entry
 * of its own per test run, so runs never share base images or proxies), and in-process workers
 * that run the real workflows and activities on the dev server.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { PROXY_DELETE_UPDATE } from '../../contracts/proxy.ts';
import type { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { stringify } from 'yaml';
import { createActivities } from '../../activities/index.ts';
import type { Activities } from '../../activities/index.ts';
import { HostRegistry } from '../../activities/hosts.ts';
import { parseProvidersYaml } from '../../lib/config/index.ts';
import { providerHosts } from '../../dev/testhost-providers.ts';
import type { LineLogger } from '../../lib/log/line-logger.ts';
import type { ProvidersConfig } from '../../lib/config/index.ts';
import { createWorkerSet } from '../../runtime/worker-set.ts';
import type { TestHost } from './testhosts.ts';
import { PROJECT_ROOT, WORKFLOWS_PATH, withTimeout } from './temporal.ts';

export interface FleetEntryOptions {
  entry: string;
  ownerUid: string;
  hosts: TestHost[];
  images: Record<string, { url: string; sha256?: string }>;
  health?: Record<string, unknown>;
  timeouts?: Record<string, number>;
}

/** A providers config (validated by the real loader) with one entry over `hosts`. */
export function fleetConfig(o: FleetEntryOptions): ProvidersConfig {
  const first = o.hosts[0]!;
  const doc = {
    ownerUid: o.ownerUid,
    providers: [
      {
        name: o.entry,
        type: 'kvm2',
        hosts: providerHosts(o.hosts),
        storagePool: first.pool,
        network: first.network,
        domainType: first.domainType,
        vm: { vcpus: 1, memoryMiB: 128, diskGiB: 1 },
        images: Object.fromEntries(
          Object.entries(o.images).map(([k, v]) => [
            k,
            { url: v.url, format: 'qcow2', ...(v.sha256 ? { sha256: v.sha256 } : {}) },
          ]),
        ),
        squid: { port: 3128, allowedClientCidrs: [String(first['networkCidr'])] },
        timeouts: { rpcMs: 20_000, downloadBodyIdleMs: 10_000, downloadTotalMs: 120_000, ...o.timeouts },
        health: { intervalMs: 1000, ...o.health },
      },
    ],
  };
  return parseProvidersYaml(stringify(doc), `${o.entry}.yaml`);
}

const QUIET_BUNDLER = new DefaultLogger('WARN');

export interface RunningWorker {
  /** The main worker (proxies, images, hosts). */
  worker: Worker;
  registry: HostRegistry;
  /** Resolves when the worker stopped. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the workers a worker process runs, with the real activities: the main one on `taskQueue`
 * and the pools' one beside it (runtime/worker-set.ts); `stop()` shuts both down and closes the links.
 */
export async function startFleetWorker(
  connection: NativeConnection,
  client: Client,
  config: ProvidersConfig,
  taskQueue: string,
  options: {
    plugins?: WorkerOptions['plugins'];
    logger?: LineLogger;
    /** Changes the real activities before the worker gets them (a recording that forces one outcome). */
    activities?: (real: Activities) => Activities;
  } = {},
): Promise<RunningWorker> {
  const registry = new HostRegistry(config, options.logger);
  const code = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    plugins: options.plugins,
    logger: QUIET_BUNDLER,
  });
  const set = await createWorkerSet({
    connection,
    taskQueue,
    workflowBundle: code,
    activities: (options.activities ?? ((a) => a))(createActivities({ registry, client, taskQueue })),
    shutdownGraceTime: '5 seconds',
    plugins: options.plugins,
  });
  const done = set.run().finally(() => registry.close());
  return {
    worker: set.main,
    registry,
    done,
    stop: async () => {
      set.shutdown();
      await done;
    },
  };
}

export interface WorkerProcess {
  child: ChildProcess;
  /** Every line the worker printed (JSON logs). */
  lines: string[];
  /** SIGKILL: no shutdown, activities in flight are lost (their heartbeats stop). */
  kill(): Promise<void>;
  /** SIGTERM and wait for exit (bounded). */
  stop(): Promise<void>;
}

/**
 * Runs the worker (`bin/worker`, as operators start it) as a process of its own on `taskQueue` with the providers file at
 * `providersFile`, and resolves once it logs "worker running" (bounded by `readyTimeoutMs`).
 * `env` is added to this process's environment (e.g. `TEMPORAL_ADDRESS` of a private server).
 */
export async function spawnWorker(
  providersFile: string,
  taskQueue: string,
  readyTimeoutMs = 60_000,
  env: Record<string, string> = {},
): Promise<WorkerProcess> {
  return spawnService(
    'bin/worker',
    ['--providers', providersFile, '--task-queue', taskQueue, '--no-schedules'],
    'worker running',
    readyTimeoutMs,
    env,
  );
}

/**
 * Runs one of the project's launchers (`bin/worker`, `bin/door`) as a process of its own with
 * `args`, and resolves once it logs `readyMsg` (bounded by `readyTimeoutMs`); its lines are kept.
 */
export async function spawnService(
  bin: string,
  args: string[],
  readyMsg: string,
  readyTimeoutMs: number,
  env: Record<string, string> = {},
): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [join(PROJECT_ROOT, bin), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
  });
  const lines: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    const onLine = (line: string): void => {
      lines.push(line);
      if (line.includes(`"${readyMsg}"`)) resolve();
    };
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
    void exited.then(() => reject(new Error(`${bin} exited before it ran:\n${lines.slice(-20).join('\n')}`)));
  });
  const waitExit = async (what: string): Promise<void> => {
    await withTimeout(exited, 30_000, what);
  };
  const proc: WorkerProcess = {
    child,
    lines,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await waitExit(`the killed ${bin} to exit`);
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await waitExit(`${bin} to stop`);
    },
  };
  try {
    await withTimeout(ready, readyTimeoutMs, `${bin} to start`);
  } catch (err) {
    await proc.kill();
    throw err;
  }
  return proc;
}

/** Writes `config` as a providers file in `dir` (YAML is a superset of JSON). */
export async function writeProvidersFile(dir: string, config: ProvidersConfig): Promise<string> {
  const file = join(dir, `providers-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}.yaml`);
  await writeFile(file, JSON.stringify(config, null, 2));
  return file;
}

/**
 * Deletes every proxy in `handles` whose workflow still runs (the delete update, then its result),
 * each bounded by `timeoutMs`; failures are reported on stderr, not thrown, so an `after` hook
 * still stops its workers. Call it while the workers that serve the proxies still run.
 */
export async function deleteAll(client: Client, handles: readonly WorkflowHandle[], timeoutMs = 60_000): Promise<void> {
  await Promise.all(
    handles.map(async (h) => {
      try {
        const d = await h.describe();
        if (d.status.name !== 'RUNNING') return;
        await withTimeout(
          h.executeUpdate(PROXY_DELETE_UPDATE).then(() => h.result()),
          timeoutMs,
          `delete ${h.workflowId}`,
        );
      } catch (err) {
        process.stderr.write(
          `cleanup of ${h.workflowId} failed: ${err instanceof Error ? err.message : String(err)}\n`,
        );
      }
    }),
  );
}
