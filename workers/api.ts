// API server process: the HTTP API (api/) over a Temporal client.
//
//   node workers/api.ts --token-file FILE [--listen HOST] [--port N] [--task-queue NAME]
//                       [--body-limit-bytes N] [--delete-wait-ms MS] [--allow-open-proxy]
//                       [--writes-per-minute N] [--tls-cert FILE --tls-key FILE] [--insecure-listen]
//
// Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE (defaults in
// client/connection.ts: 127.0.0.1:7233, `default`, `egress-proxies`), EP_API_TOKEN_FILE, EP_API_PAGE_TOKEN_SECRET (the
// key of list page tokens; set the same on every replica), LOG_LEVEL (default info).
// EP_API_TLS_CERT, EP_API_TLS_KEY, EP_API_INSECURE_LISTEN (the flags of the same names win).
// Traces: with an OTLP endpoint in the OpenTelemetry SDK's variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_TRACES_EXPORTER=otlp; OTEL_SERVICE_NAME, default
// egress-proxies-api), a span per request, carried into the workflows it starts (docs/monitoring.md).
// Logs are pino JSON lines on stdout (Fastify's request logs included). SIGHUP re-reads the
// token file and the TLS certificate and key (each kept as it was if its re-read fails);
// SIGINT/SIGTERM stop accepting connections and finish the requests in flight.
import { orExit, parseArgsOrExit, wholeNumber } from '../runtime/options.ts';
import { otlpSettingsFromEnv } from '../runtime/otel-settings.ts';
import type { TokenAuth } from '../api/auth.ts';
import type { Tracing } from '../runtime/telemetry.ts';
import type { Server as TlsServer } from 'node:tls';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
import { DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE } from '../client/connection.ts';
import {
  TEMPORAL_CONNECTION_HELP,
  TEMPORAL_CONNECTION_OPTIONS,
  temporalSettingsFromOptions,
} from '../runtime/temporal-options.ts';

/** The API's service.name when OTEL_SERVICE_NAME is not set. */
const API_SERVICE_NAME = 'egress-proxies-api';
const settings = orExit(() => temporalSettingsFromOptions({}));
// Only the settings now: the OpenTelemetry SDK loads only when spans are exported (start-up).
const otlp = orExit(() => otlpSettingsFromEnv(process.env, { serviceName: API_SERVICE_NAME }));

const HELP = `egress-proxies API server (docs/api.md)

Usage: node workers/api.ts --token-file FILE [options]

Options:
  --token-file FILE       bearer tokens, one per line: "TOKEN" or "TOKEN admin" (every route) or
                          "TOKEN read" (GET only); default $EP_API_TOKEN_FILE. SIGHUP re-reads it
  --listen HOST           address to listen on (default 127.0.0.1). Plain HTTP is refused on any
                          address but loopback (127.0.0.0/8, ::1, localhost): give --tls-cert and
                          --tls-key, or --insecure-listen
  --tls-cert FILE         serve HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with this PEM certificate (leaf
                          first, then intermediates); needs --tls-key (env EP_API_TLS_CERT).
                          SIGHUP re-reads it and the key
  --tls-key FILE          the certificate's PEM private key, unencrypted (env EP_API_TLS_KEY)
  --insecure-listen       allow plain HTTP on a non-loopback --listen (TLS terminated in front of
                          the API; bearer tokens cross that network in clear text)
                          (env EP_API_INSECURE_LISTEN=true)
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
every replica behind one address), OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables
(a span per request over OTLP, service egress-proxies-api; docs/monitoring.md, "Traces").
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
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'insecure-listen': { type: 'boolean' },
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
const { ApiTlsError, apiTlsSettings, checkListen, isLoopbackHost, loadTlsFiles, tlsLogFields } =
  await import('../api/tls.ts');
const tlsFiles = (() => {
  try {
    const s = apiTlsSettings(values);
    checkListen(values.listen, s);
    return s.files;
  } catch (err) {
    if (!(err instanceof ApiTlsError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
})();

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
// Before the client and the server exist: the global tracer provider their spans go to.
// (The settings were checked above: setupTracing reads the same variables and cannot refuse them.)
let tracing: Tracing | undefined;
if (otlp.url !== undefined) {
  const { setupTracing } = await import('../runtime/telemetry.ts');
  tracing = setupTracing(log.child({ component: 'otel' }), { serviceName: API_SERVICE_NAME });
}
let auth: TokenAuth;
let tls: Awaited<ReturnType<typeof loadTlsFiles>> | undefined;
try {
  auth = await loadTokenFile(tokenFile);
  tls = tlsFiles === undefined ? undefined : await loadTlsFiles(tlsFiles);
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
if (tls === undefined && !isLoopbackHost(values.listen)) {
  log.warn(
    { listen: values.listen },
    'plain HTTP on a non-loopback address (--insecure-listen): bearer tokens cross it in clear text',
  );
}
if (tls?.expired === true) log.warn(tlsLogFields(tls), 'TLS certificate has expired: clients will refuse it');
// Set once the server exists.
let tlsServer: TlsServer | undefined;

// SIGHUP: the token file and the certificate and key, each re-read on its own; a bad file keeps
// what is served (the log says why). New TLS connections get the new certificate; open ones keep theirs.
process.on('SIGHUP', () => {
  loadTokenFile(tokenFile).then(
    (next) => {
      auth = next;
      log.info({ tokens: next.size }, 'token file re-read');
    },
    (err: unknown) =>
      log.error({ err: err instanceof TokenFileError ? err.message : err }, 'token file kept: re-read failed'),
  );
  if (tlsFiles === undefined) return;
  loadTlsFiles(tlsFiles).then(
    (next) => {
      tls = next; // buildApi takes it if it has not yet run
      tlsServer?.setSecureContext({ cert: next.cert, key: next.key });
      const level = next.expired ? 'warn' : 'info';
      log[level](
        tlsLogFields(next),
        next.expired ? 'TLS certificate re-read: it has expired' : 'TLS certificate re-read',
      );
    },
    (err: unknown) =>
      log.error({ err: err instanceof ApiTlsError ? err.message : err }, 'TLS certificate kept: re-read failed'),
  );
});

const { address, namespace } = temporal;
// Lazy: the API starts (and /readyz says why it is not ready) while Temporal is down.
const client = await connectClient(temporal, {
  connectTimeoutMs: 5_000,
  lazy: true,
  // The workflows a request starts, signals or updates carry the request's span in their headers.
  ...(tracing === undefined ? {} : { plugins: [tracing.plugin] }),
});
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
  ...(tls === undefined ? {} : { tls }),
});
if (tls !== undefined) {
  tlsServer = app.server as unknown as TlsServer;
  tlsServer.setSecureContext({ cert: tls.cert, key: tls.key }); // a re-read while buildApi ran
}

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'api stopping');
  app
    .close()
    .then(() => connection.close())
    .then(() => tracing?.shutdown())
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
  const served = tls === undefined ? { tls: false } : { tls: true, cert: tlsLogFields(tls) };
  log.info({ url, address, namespace, taskQueue: values['task-queue'], tokens: auth.size, ...served }, 'api listening');
} catch (err) {
  log.fatal({ err }, 'api cannot listen');
  await connection.close();
  await tracing?.shutdown();
  process.exit(1);
}
