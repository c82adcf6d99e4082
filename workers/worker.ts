// Worker process: runs the project's workflows and activities on the main task queue.
//
//   node workers/worker.ts
//
// Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE (default `default`),
// TEMPORAL_TASK_QUEUE (default `egress-proxies`), LOG_LEVEL (default info). Logs, including the
// Temporal SDK's and Core's, are pino JSON lines on stdout. SIGINT/SIGTERM shut down gracefully.
import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import * as activities from '../activities/index.ts';
import { createLogger, logLevelFromEnv } from '../lib/log/logger.ts';
import { sdkLoggerFromPino, sdkLogLevelFor } from '../lib/log/temporal-adapter.ts';
import { TASK_QUEUE } from '../shared/task-queues.ts';

const DEFAULT_ADDRESS = '127.0.0.1:7233';
const DEFAULT_NAMESPACE = 'default';
/** The workflow bundle's entry; webpack (inside @temporalio/worker) bundles it at start-up. */
const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

const level = logLevelFromEnv();
const log = createLogger({ name: 'worker', level });

// Before anything touches the Runtime: route the SDK's logger and Core's native logs to pino.
Runtime.install({
  logger: sdkLoggerFromPino(log.child({ component: 'temporal' })),
  telemetryOptions: {
    logging: { filter: { core: sdkLogLevelFor(level), other: 'ERROR' }, forward: {} },
  },
});

const address = process.env['TEMPORAL_ADDRESS'] || DEFAULT_ADDRESS;
const namespace = process.env['TEMPORAL_NAMESPACE'] || DEFAULT_NAMESPACE;
const taskQueue = process.env['TEMPORAL_TASK_QUEUE'] || TASK_QUEUE;

log.info({ address, namespace, taskQueue }, 'worker connecting');
let connection: NativeConnection;
try {
  connection = await NativeConnection.connect({ address });
} catch (err) {
  log.fatal(
    { err, address },
    'cannot connect to Temporal; is it running? (scripts/temporal up, or set TEMPORAL_ADDRESS)',
  );
  process.exit(1);
}

try {
  const worker = await Worker.create({ connection, namespace, taskQueue, workflowsPath: WORKFLOWS_PATH, activities });
  log.info({ address, namespace, taskQueue }, 'worker running');
  await worker.run(); // resolves after a shutdown signal, once in-flight tasks are done
  log.info('worker stopped');
} catch (err) {
  log.fatal({ err }, 'worker failed');
  process.exitCode = 1;
} finally {
  await connection.close();
}
