// Worker process: runs the project's workflows and activities on the main task queue, and pools on theirs.
//
//   node workers/worker.ts [--providers FILE] [--task-queue NAME] [--max-activities N]
//                          [--max-workflow-tasks N] [--max-cached-workflows N] [--shutdown-grace-ms MS] [--no-schedules]
//                          [--workflow-bundle-cache DIR|off] [--metrics-listen HOST:PORT]
//                          [--allow-removed-hosts]
//
// Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE (defaults in
// client/connection.ts: 127.0.0.1:7233, `default`, `egress-proxies`), EP_PROVIDERS_FILE (default .data/providers.yaml),
// LOG_LEVEL (default info). Logs, including the Temporal SDK's and Core's, are pino JSON lines on
// stdout. SIGINT/SIGTERM shut down gracefully: no new tasks, activities in flight get
// --shutdown-grace-ms to finish and are then cancelled, and every SSH link is killed.
import type { Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE } from '../client/connection.ts';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
import { orExit, parseArgsOrExit, wholeNumber } from '../runtime/options.ts';
import { defaultBundleCacheDir } from '../runtime/workflow-bundle.ts';
import { workflowCacheOptions } from '../runtime/workflow-cache.ts';
import { VERSIONING_HELP, VERSIONING_OPTIONS, workerVersioning } from '../runtime/versioning.ts';
import {
  TEMPORAL_CONNECTION_HELP,
  TEMPORAL_CONNECTION_OPTIONS,
  temporalSettingsFromOptions,
} from '../runtime/temporal-options.ts';

const HELP = `egress-proxies worker: runs the proxy, image, GC and health workflows and their activities.

Usage: node workers/worker.ts [options]

Options:
  --providers FILE          the providers file (docs/operator-guide.md); default $EP_PROVIDERS_FILE
                            or .data/providers.yaml
  --task-queue NAME         default $TEMPORAL_TASK_QUEUE or ${TASK_QUEUE}; pools run on NAME-pools,
                            polled by the same worker
  --max-activities N        activities run at once (default 100)
  --max-workflow-tasks N    workflow tasks run at once (default 40)
  --max-cached-workflows N  workflows kept in memory between their tasks (default 250; at least
                            --max-workflow-tasks): a Healthy proxy has no task between transitions
  --shutdown-grace-ms MS    on SIGTERM, how long activities in flight may finish (default 10000)
  --no-schedules            do not create or update the orphan-GC and provider-health schedules
  --allow-removed-hosts     start even when open proxies of this task queue live on a host (or
                            entry) the providers file no longer has; without it the worker refuses
                            and names them (drain the host first: docs/operator-guide.md)
  --workflow-bundle-cache DIR|off  where the workflow bundle is kept between starts, keyed by a
                            hash of the workflow code (default $EP_WORKFLOW_BUNDLE_CACHE or
                            ~/.cache/egress-proxies/workflow-bundles; off: webpack at every start)
  --metrics-listen HOST:PORT  serve Prometheus metrics at http://HOST:PORT/metrics (libvirt RPC
                            latency by procedure, link deaths, probe latency, upload bytes); off
                            unless given (e.g. 127.0.0.1:9464; port 0 picks one, logged)
${VERSIONING_HELP}
${TEMPORAL_CONNECTION_HELP}
  -h, --help                this text

Environment: TEMPORAL_ADDRESS (${DEFAULT_TEMPORAL_ADDRESS}), TEMPORAL_NAMESPACE (${DEFAULT_TEMPORAL_NAMESPACE}), LOG_LEVEL (info).
Exit codes: 0 stopped by a signal, 1 Temporal unreachable or the worker failed, 2 bad options or
providers file (a host removed while proxies live on it included).`;

const settings = orExit(() => temporalSettingsFromOptions({}));
const { values } = parseArgsOrExit(
  {
    options: {
      providers: { type: 'string', default: process.env['EP_PROVIDERS_FILE'] || '.data/providers.yaml' },
      'task-queue': { type: 'string', default: settings.taskQueue },
      'max-activities': { type: 'string', default: '100' },
      'max-workflow-tasks': { type: 'string', default: '40' },
      'max-cached-workflows': { type: 'string' },
      'shutdown-grace-ms': { type: 'string', default: '10000' },
      'no-schedules': { type: 'boolean', default: false },
      'allow-removed-hosts': { type: 'boolean', default: false },
      'metrics-listen': { type: 'string', default: process.env['EP_WORKER_METRICS_LISTEN'] },
      'workflow-bundle-cache': {
        type: 'string',
        default: process.env['EP_WORKFLOW_BUNDLE_CACHE'] || defaultBundleCacheDir(),
      },
      ...VERSIONING_OPTIONS,
      ...TEMPORAL_CONNECTION_OPTIONS,
      help: { type: 'boolean', short: 'h', default: false },
    },
  },
  HELP,
);
if (values.help) {
  process.stdout.write(HELP + '\n');
  process.exit(0);
}
const temporal = orExit(() => temporalSettingsFromOptions(values));
const maxActivities = orExit(() => wholeNumber('max-activities', values['max-activities']));
const maxWorkflowTasks = orExit(() => wholeNumber('max-workflow-tasks', values['max-workflow-tasks']));
const workflowCache = orExit(() => workflowCacheOptions(values['max-cached-workflows'], maxWorkflowTasks));
const shutdownGraceMs = orExit(() => wholeNumber('shutdown-grace-ms', values['shutdown-grace-ms']));
// Worker Versioning (docs/temporal.md, "Upgrading workers"): checked now, the build ID defaulting
// to the workflow bundle's hash once it is known. A versioned worker bundles the entry that sets
// each workflow's versioning behavior; an unversioned one must not (the server refuses it).
const versioned = orExit(() => workerVersioning(values, process.env, 'unset')) !== undefined;
const listen = values['metrics-listen'];
const listenMatch = listen === undefined ? undefined : /^(.+):(\d{1,5})$/.exec(listen);
if (listen !== undefined && (!listenMatch || Number(listenMatch[2]) > 65535)) {
  process.stderr.write(`--metrics-listen must be HOST:PORT (e.g. 127.0.0.1:9464), got ${JSON.stringify(listen)}\n`);
  process.exit(2);
}

// The SDK, its native runtime and our activities load only once the options are known to be good,
// so that --help and a mistyped option answer at once (docs/benchmarks.md, "Start-up").
const [
  { connectClient, sdkConnectionOptions, withDeadline },
  { explainConnectFailure },
  { ensureSearchAttributes, SearchAttributeKindError },
  { isTemporalUnavailable },
  { NativeConnection: WorkerConnection, Runtime },
  { createActivities },
  { HostRegistry },
  { ConfigError, loadProvidersFile },
  { createLogger, logLevelFromEnv },
  { sdkLoggerFromPino, sdkLogLevelFor },
  { ensureSchedules },
  { serveMetrics },
  { createWorkerMetrics },
  { setupTracing },
  { loadWorkflowBundle },
  { catalogOf, startCatalogPublisher },
  { findStrandedProxies, HostRemovedError },
  { createWorkerSet },
  { watchTemporal },
] = await Promise.all([
  import('../client/connection.ts'),
  import('../client/connect-diagnosis.ts'),
  import('../client/search-attributes.ts'),
  import('../client/errors.ts'),
  import('@temporalio/worker'),
  import('../activities/index.ts'),
  import('../activities/hosts.ts'),
  import('../lib/config/index.ts'),
  import('../lib/log/logger.ts'),
  import('../lib/log/temporal-adapter.ts'),
  import('../client/schedules.ts'),
  import('../runtime/metrics-server.ts'),
  import('../activities/metrics.ts'),
  import('../runtime/telemetry.ts'),
  import('../runtime/workflow-bundle.ts'),
  import('../runtime/catalog.ts'),
  import('../client/host-removal.ts'),
  import('../runtime/worker-set.ts'),
  import('../runtime/temporal-watch.ts'),
]);

/** The workflow bundle's entry; runtime/workflow-bundle.ts bundles it (or finds it bundled). */
const WORKFLOWS_PATH = fileURLToPath(new URL(`../workflows/${versioned ? 'versioned' : 'index'}.ts`, import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const level = logLevelFromEnv();
const log = createLogger({ name: 'worker', level });

// Before anything touches the Runtime: route the SDK's logger and Core's native logs to pino.
Runtime.install({
  logger: sdkLoggerFromPino(log.child({ component: 'temporal' })),
  telemetryOptions: {
    logging: { filter: { core: sdkLogLevelFor(level), other: 'ERROR' }, forward: {} },
  },
  shutdownSignals: ['SIGINT', 'SIGTERM'],
});

let config;
try {
  config = await loadProvidersFile(values.providers);
} catch (err) {
  if (err instanceof ConfigError) {
    log.fatal({ file: values.providers }, err.message);
    process.exit(2);
  }
  log.fatal({ err, file: values.providers }, 'cannot read the providers file (set --providers or EP_PROVIDERS_FILE)');
  process.exit(2);
}

const { address, namespace } = temporal;
const taskQueue = values['task-queue'];

// Bad OTEL_* values are refused (exit 2, naming the variable) before anything connects.
const tracing = orExit(() => setupTracing(log.child({ component: 'otel' })));
log.info({ address, namespace, taskQueue, providers: values.providers }, 'worker connecting');
let connection: NativeConnection;
let client: Client;
try {
  connection = await WorkerConnection.connect(sdkConnectionOptions(temporal));
  client = await connectClient(temporal, { connectTimeoutMs: 10_000 });
} catch (err) {
  log.fatal(
    { err, address },
    `cannot connect to Temporal: ${await explainConnectFailure(err, temporal)} (is it running? scripts/temporal up, or set TEMPORAL_ADDRESS)`,
  );
  process.exit(1);
}
let metricsServer: Server | undefined;
const metrics = listenMatch ? createWorkerMetrics() : undefined;
const registry = new HostRegistry(config, log.child({ component: 'ssh' }), metrics);
let catalogPublisher: { stop(): Promise<void> } | undefined;
// One line when Temporal stops answering and one when it is back (runtime/temporal-watch.ts): the
// polls hang silently while the server's database is down. describeNamespace reads persistence.
const temporalWatch = watchTemporal({
  log: log.child({ component: 'temporal-watch' }),
  intervalMs: 5_000,
  check: () =>
    withDeadline(client, 'the namespace check', 4_000, () =>
      client.workflowService.describeNamespace({ namespace }),
    ).catch((err: unknown) => {
      if (isTemporalUnavailable(err)) throw err; // any other answer (say, permission denied) is an answer
    }),
});

try {
  // Before the worker polls: the workflows set these attributes, and the API lists by them. A
  // server that refuses operator calls (a hosted namespace) is told apart from a wrong type.
  try {
    const added = await ensureSearchAttributes(client.connection, namespace);
    if (added.length > 0) log.info({ namespace, added }, 'search attributes registered');
  } catch (err) {
    if (err instanceof SearchAttributeKindError || isTemporalUnavailable(err)) throw err;
    log.warn(
      { err, namespace },
      'search attributes not checked (operator calls refused); register them as docs/temporal.md says',
    );
  }
  // Before anything runs a proxy: none of this task queue's open proxies may sit on a host the
  // file lost (their calls to it would fail for ever); the operator drains first.
  const configured = config.providers.map((p) => ({ entry: p.name, hosts: p.hosts.map((h) => h.name) }));
  const check = await findStrandedProxies(client, taskQueue, configured);
  if (check.partial)
    log.warn({ read: check.read }, 'host-removal check: more open proxies than it reads; the rest not compared');
  if (check.stranded.length > 0) {
    const err = new HostRemovedError(check.stranded, values.providers);
    if (!values['allow-removed-hosts']) throw err;
    log.warn({ stranded: check.stranded }, `${err.message} (started anyway: --allow-removed-hosts)`);
  }
  if (!values['no-schedules']) await ensureSchedules(client, config, taskQueue);
  // What the API validates requests against (docs/api.md, "Catalog"): published before polling.
  catalogPublisher = await startCatalogPublisher(
    client,
    taskQueue,
    catalogOf(config),
    log.child({ component: 'catalog' }),
  );
  if (metrics && listenMatch) {
    const served = await serveMetrics(
      metrics.registry,
      listenMatch[1]!.replace(/^\[(.*)\]$/, '$1'),
      Number(listenMatch[2]),
    );
    metricsServer = served.server;
    log.info({ url: served.url }, 'metrics served');
  }
  const bundleCache = values['workflow-bundle-cache'];
  const bundle = await loadWorkflowBundle({
    root: ROOT,
    workflowsPath: WORKFLOWS_PATH,
    plugins: [tracing.plugin],
    cacheDir: bundleCache === 'off' ? undefined : bundleCache,
    log: log.child({ component: 'bundle' }),
  });
  const versioning = workerVersioning(values, process.env, bundle.key);
  const workers = await createWorkerSet({
    connection,
    namespace,
    taskQueue,
    workflowBundle: { code: bundle.code },
    activities: createActivities({ registry, client, taskQueue, metrics }),
    plugins: [tracing.plugin],
    maxConcurrentActivityTaskExecutions: maxActivities,
    ...workflowCache,
    ...(versioning ? { workerDeploymentOptions: versioning } : {}),
    shutdownGraceTime: shutdownGraceMs,
    shutdownForceTime: shutdownGraceMs + 5_000,
  });
  log.info(
    {
      address,
      namespace,
      taskQueue,
      poolTaskQueue: workers.pools.options.taskQueue,
      ...(versioning ? { version: versioning.version } : {}),
      hosts: config.providers.flatMap((p) => p.hosts.map((h) => `${p.name}/${h.name}`)),
    },
    'worker running',
  );
  await workers.run(); // resolves after a shutdown signal, once in-flight tasks are done
  log.info('worker stopped');
} catch (err) {
  if (err instanceof HostRemovedError) {
    log.fatal({ code: err.code, file: values.providers, stranded: err.stranded }, err.message);
    process.exitCode = 2;
  } else {
    log.fatal({ err }, 'worker failed');
    process.exitCode = 1;
  }
} finally {
  await temporalWatch.stop();
  await catalogPublisher?.stop();
  metricsServer?.close();
  registry.close();
  await tracing.shutdown();
  await connection.close();
  await client.connection.close();
}
