// API server process: the HTTP API (api/) over a Temporal client.
//
//   node workers/api.ts --token-file FILE [--listen HOST] [--port N] [--task-queue NAME]
//                       [--body-limit-bytes N] [--delete-wait-ms MS] [--allow-open-proxy]
//                       [--writes-per-minute N]
//
// Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE (defaults in
// client/connection.ts: 127.0.0.1:7233, `default`, `egress-proxies`), EP_API_TOKEN_FILE, EP_API_PAGE_TOKEN_SECRET (the
// key of list page tokens; set the same on every replica), LOG_LEVEL (default info).
// Logs are pino JSON lines on stdout (Fastify's request logs included). SIGHUP re-reads the
// token file; SIGINT/SIGTERM stop accepting connections and finish the requests in flight.
import { orExit, parseArgsOrExit, wholeNumber } from '../runtime/options.ts';
import type { TokenAuth } from '../api/auth.ts';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
import { DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE } from '../client/connection.ts';
import {
  TEMPORAL_CONNECTION_HELP,
  TEMPORAL_CONNECTION_OPTIONS,
  temporalSettingsFromOptions,
} from '../runtime/temporal-options.ts';

const settings = orExit(() => temporalSettingsFromOptions({}));

const HELP = `egress-proxies API server (docs/api.md)

Usage: node workers/api.ts --token-file FILE [options]

Options:
  --token-file FILE       bearer tokens, one per line: "TOKEN" or "TOKEN admin" (every route) or
                          "TOKEN read" (GET only); default $EP_API_TOKEN_FILE. SIGHUP re-reads it
  --listen HOST           address to listen on (default 127.0.0.1; use 0.0.0.0 only behind TLS)
  --port N                TCP port (default 8080; 0 picks a free one, printed in the log)
  --task-queue NAME       task queue of the proxy workflows (default $TEMPORAL_TASK_QUEUE or ${TASK_QUEUE})
  --body-limit-bytes N    largest request body (default 65536)
  --delete-wait-ms MS     bound of DELETE ?wait=true without waitMs (default 60000)
  --writes-per-minute N   POST/DELETE requests one token may make per minute (default 120; 0: no
                          limit); over it, 429 RATE_LIMITED with Retry-After
  --allow-open-proxy      accept squid.allowedClientCidrs overrides that admit every address (/0, or blocks
                          that together cover IPv4: an open proxy; refused by default)
${TEMPORAL_CONNECTION_HELP}
  -h, --help              this text

Environment: TEMPORAL_ADDRESS (${DEFAULT_TEMPORAL_ADDRESS}), TEMPORAL_NAMESPACE (${DEFAULT_TEMPORAL_NAMESPACE}), LOG_LEVEL (info),
EP_API_PAGE_TOKEN_SECRET (key of list page tokens; default random per process: set one secret on
every replica behind one address).
Exit codes: 0 stopped by a signal, 1 failed while running, 2 bad options or token file.`;

const { values } = parseArgsOrExit(
  {
    options: {
      'token-file': { type: 'string', default: process.env['EP_API_TOKEN_FILE'] },
      listen: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8080' },
      'task-queue': { type: 'string', default: settings.taskQueue },
      'body-limit-bytes': { type: 'string', default: '65536' },
      'delete-wait-ms': { type: 'string', default: '60000' },
      'allow-open-proxy': { type: 'boolean', default: false },
      'writes-per-minute': { type: 'string', default: '120' },
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
const port = orExit(() => wholeNumber('port', values.port, { min: 0, max: 65535 }));
const bodyLimitBytes = orExit(() => wholeNumber('body-limit-bytes', values['body-limit-bytes'], { min: 1024 }));
const writesPerMinute = orExit(() => wholeNumber('writes-per-minute', values['writes-per-minute'], { min: 0 }));
const deleteWaitMs = orExit(() => wholeNumber('delete-wait-ms', values['delete-wait-ms']));
const tokenFile = values['token-file'];
if (tokenFile === undefined || tokenFile === '') {
  process.stderr.write('--token-file FILE is required (or set EP_API_TOKEN_FILE); see --help\n');
  process.exit(2);
}

// The Temporal client, Fastify and the routes load only once the options are known to be good, so
// that --help and a mistyped option answer at once (docs/benchmarks.md, "Start-up").
const [
  { connectClient },
  { loadTokenFile, TokenFileError },
  { buildApi },
  { temporalWarmer },
  { temporalStore },
  { temporalPoolStore },
  { temporalHostStore },
  { createLogger, logLevelFromEnv },
] = await Promise.all([
  import('../client/connection.ts'),
  import('../api/auth.ts'),
  import('../api/server.ts'),
  import('../client/warm.ts'),
  import('../client/store.ts'),
  import('../client/pools.ts'),
  import('../client/host-store.ts'),
  import('../lib/log/logger.ts'),
]);
const log = createLogger({ name: 'api', level: logLevelFromEnv() });
let auth: TokenAuth;
try {
  auth = await loadTokenFile(tokenFile);
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
process.on('SIGHUP', () => {
  loadTokenFile(tokenFile).then(
    (next) => {
      auth = next;
      log.info({ tokens: next.size }, 'token file re-read');
    },
    (err: unknown) =>
      log.error({ err: err instanceof TokenFileError ? err.message : err }, 'token file kept: re-read failed'),
  );
});

const { address, namespace } = temporal;
// Lazy: the API starts (and /readyz says why it is not ready) while Temporal is down.
const client = await connectClient(temporal, { connectTimeoutMs: 5_000, lazy: true });
const { connection } = client;
const store = temporalStore(client);
const app = await buildApi({
  store,
  pools: temporalPoolStore(client),
  // The hosts the API knows come from the provider-health schedule's last survey (docs/api.md, "Hosts").
  hosts: temporalHostStore(client, {
    survey: () => store.providerHealth(),
    taskQueue: values['task-queue'],
  }),
  warmer: temporalWarmer(client),
  log,
  auth: () => auth,
  taskQueue: values['task-queue'],
  bodyLimitBytes,
  deleteWaitMs,
  allowOpenProxy: values['allow-open-proxy'],
  writesPerMinute,
  pageTokenSecret: process.env['EP_API_PAGE_TOKEN_SECRET'],
});

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'api stopping');
  app
    .close()
    .then(() => connection.close())
    .then(
      () => log.info('api stopped'),
      (err: unknown) => {
        log.error({ err }, 'api stop failed');
        process.exitCode = 1;
      },
    );
};
process.once('SIGINT', () => stop('SIGINT'));
process.once('SIGTERM', () => stop('SIGTERM'));

try {
  const url = await app.listen({ host: values.listen, port });
  log.info({ url, address, namespace, taskQueue: values['task-queue'], tokens: auth.size }, 'api listening');
} catch (err) {
  log.fatal({ err }, 'api cannot listen');
  await connection.close();
  process.exit(1);
}
