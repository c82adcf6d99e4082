// Door service process: one HAProxy front door per pool named in the doors file, each kept current
// from its pool's discovery list (lib/door/service.ts; docs/door.md).
//
//   node workers/door.ts --config FILE [--state-dir DIR] [--http HOST:PORT] [--sync-interval-ms MS]
//
// Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE (client/connection.ts), EP_DOOR_CONFIG,
// EP_DOOR_STATE_DIR, LOG_LEVEL (default info). Logs are pino JSON lines on stdout, and so are the
// doors' decision lines (HAProxy's log, one JSON object per request). SIGINT/SIGTERM stop the
// sync and let each HAProxy finish its open connections (SIGKILL after 5 s).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { orExit, OptionError, parseArgsOrExit, wholeNumber } from '../runtime/options.ts';
import {
  TEMPORAL_CONNECTION_HELP,
  TEMPORAL_CONNECTION_OPTIONS,
  temporalSettingsFromOptions,
} from '../runtime/temporal-options.ts';

const HELP = `egress-proxies door service (docs/door.md)

Usage: node workers/door.ts --config FILE [options]

Runs one HAProxy front door per pool in the doors file and keeps each door's exits equal to its
pool's discovery list (read every --sync-interval-ms; changed through HAProxy's runtime API with no
reload, so open tunnels stay open).

Options:
  --config FILE           the doors file (JSON; docs/door.md); default $EP_DOOR_CONFIG
  --state-dir DIR         rendered configurations and runtime sockets (default $EP_DOOR_STATE_DIR,
                          else .data/doors under the working directory)
  --http HOST:PORT        status (GET /v1/doors) and metrics (GET /metrics) (default 127.0.0.1:9110;
                          port 0 picks a free one, printed in the log)
  --sync-interval-ms MS   between two reads of each pool's discovery list (default 500)
  --haproxy PATH          HAProxy's binary (default haproxy on PATH)
${TEMPORAL_CONNECTION_HELP}
  -h, --help              this text

Exit codes: 0 stopped by a signal, 1 failed while running, 2 bad options or doors file.`;

const { values } = parseArgsOrExit(
  {
    options: {
      config: { type: 'string', default: process.env['EP_DOOR_CONFIG'] },
      'state-dir': { type: 'string', default: process.env['EP_DOOR_STATE_DIR'] ?? '.data/doors' },
      http: { type: 'string', default: '127.0.0.1:9110' },
      'sync-interval-ms': { type: 'string', default: '500' },
      haproxy: { type: 'string', default: 'haproxy' },
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
const syncIntervalMs = orExit(() =>
  wholeNumber('sync-interval-ms', values['sync-interval-ms'], { min: 50, max: 60_000 }),
);
const http = orExit(() => {
  const m = /^(.+):(\d{1,5})$/.exec(values.http);
  if (!m || Number(m[2]) > 65535)
    throw new OptionError(`--http must be HOST:PORT, e.g. 127.0.0.1:9110, got ${values.http}`);
  return { host: m[1]!, port: Number(m[2]) };
});
const configPath = values.config;
if (configPath === undefined || configPath === '') {
  process.stderr.write('--config FILE is required (or set EP_DOOR_CONFIG); see --help\n');
  process.exit(2);
}
const stateDir = resolve(values['state-dir']);

const [
  { loadDoorsConfig, doorSpecOf },
  { DoorService },
  { connectClient },
  { poolExits, reportDoor },
  { createLogger, logLevelFromEnv },
] = await Promise.all([
  import('../lib/door/config.ts'),
  import('../lib/door/service.ts'),
  import('../client/connection.ts'),
  import('../client/door.ts'),
  import('../lib/log/logger.ts'),
]);
const doors = await loadDoorsConfig(configPath).catch((err: unknown) => {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
});
const log = createLogger({ name: 'door', level: logLevelFromEnv() });
const client = await connectClient(temporal, { connectTimeoutMs: 5_000, lazy: true });

const services = doors.map((door) => ({
  door,
  service: new DoorService({
    spec: doorSpecOf(door, stateDir),
    configPath: resolve(stateDir, `${door.entry}.${door.pool}.cfg`),
    members: () => poolExits(client, door.entry, door.pool),
    onChange: (report) => reportDoor(client, door.entry, door.pool, report),
    log: log.child({ entry: door.entry, pool: door.pool }),
    syncIntervalMs,
    haproxyBin: values.haproxy,
  }),
}));

/**
 * Prometheus text: per door, whether HAProxy runs, its exits by state, restarts, the age of the
 * last sync; per credential, requests, bytes and tunnels (HAProxy's counters: reset on its restart).
 */
async function metrics(): Promise<string> {
  const head = (name: string, type: string, help: string): string[] => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} ${type}`,
  ];
  const out = new Map<string, string[]>([
    ['egress_door_running', head('egress_door_running', 'gauge', "1 while the door's HAProxy runs.")],
    [
      'egress_door_exits',
      head('egress_door_exits', 'gauge', "Exits in the door by role (serving, draining) and HAProxy's view (up)."),
    ],
    [
      'egress_door_restarts_total',
      head('egress_door_restarts_total', 'counter', "Times the door's HAProxy was started again after it exited."),
    ],
    [
      'egress_door_sync_age_seconds',
      head('egress_door_sync_age_seconds', 'gauge', "Seconds since the door last matched its pool's discovery list."),
    ],
    [
      'egress_door_requests_total',
      head(
        'egress_door_requests_total',
        'counter',
        'Requests a credential made through the door (refused ones included).',
      ),
    ],
    [
      'egress_door_bytes_in_total',
      head('egress_door_bytes_in_total', 'counter', 'Bytes a credential sent to the door (requests, uploads).'),
    ],
    [
      'egress_door_bytes_out_total',
      head('egress_door_bytes_out_total', 'counter', 'Bytes the door sent to a credential (responses, downloads).'),
    ],
    [
      'egress_door_tunnels_open',
      head('egress_door_tunnels_open', 'gauge', 'CONNECT tunnels a credential has open now.'),
    ],
  ]);
  const add = (name: string, labels: string, value: number | string): void =>
    void out.get(name)!.push(`${name}{${labels}} ${value}`);
  const esc = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  for (const { door, service } of services) {
    const s = service.status();
    const l = `entry="${door.entry}",pool="${door.pool}"`;
    add('egress_door_running', l, s.running ? 1 : 0);
    for (const role of ['serving', 'draining'] as const) {
      for (const up of [true, false]) {
        add(
          'egress_door_exits',
          `${l},role="${role}",up="${up}"`,
          s.exits.filter((e) => e.role === role && e.up === up).length,
        );
      }
    }
    add('egress_door_restarts_total', l, s.restarts);
    if (s.syncedAt !== undefined) {
      add('egress_door_sync_age_seconds', l, ((Date.now() - Date.parse(s.syncedAt)) / 1000).toFixed(3));
    }
    if (!s.running) continue;
    const counters = await service.credentialCounters().catch(() => new Map<string, never>());
    for (const [credential, c] of counters) {
      const cl = `${l},credential="${esc(credential)}"`;
      add('egress_door_requests_total', cl, c.requests);
      add('egress_door_bytes_in_total', cl, c.bytesIn);
      add('egress_door_bytes_out_total', cl, c.bytesOut);
      add('egress_door_tunnels_open', cl, c.tunnelsOpen);
    }
  }
  return [...out.values()].flat().join('\n') + '\n';
}

const server = createServer((req, res) => {
  const send = (code: number, type: string, body: string): void => {
    res.writeHead(code, { 'content-type': type });
    res.end(body);
  };
  if (req.method !== 'GET') return send(405, 'application/json', '{"error":"GET only"}\n');
  if (req.url === '/metrics') {
    metrics().then(
      (text) => send(200, 'text/plain; version=0.0.4', text),
      (err: unknown) => send(500, 'application/json', JSON.stringify({ error: (err as Error).message }) + '\n'),
    );
    return;
  }
  if (req.url === '/v1/doors') {
    const body = services.map(({ door, service }) => ({ entry: door.entry, pool: door.pool, ...service.status() }));
    return send(200, 'application/json', JSON.stringify({ doors: body }) + '\n');
  }
  if (req.url === '/healthz') {
    const down = services
      .filter(({ service }) => !service.status().running)
      .map(({ door }) => `${door.entry}/${door.pool}`);
    return send(down.length ? 503 : 200, 'application/json', JSON.stringify({ ok: down.length === 0, down }) + '\n');
  }
  send(404, 'application/json', '{"error":"GET /v1/doors, /metrics or /healthz"}\n');
});

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'door service stopping');
  server.close();
  Promise.all(services.map(({ service }) => service.stop()))
    .then(() => client.connection.close())
    .then(
      () => log.info('door service stopped'),
      (err: unknown) => {
        log.error({ err }, 'door service stop failed');
        process.exitCode = 1;
      },
    );
};
process.once('SIGINT', () => stop('SIGINT'));
process.once('SIGTERM', () => stop('SIGTERM'));

try {
  for (const { service } of services) await service.start();
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(http.port, http.host, () => ok());
  });
  const a = server.address() as AddressInfo;
  log.info(
    {
      http: `http://${a.address}:${a.port}`,
      doors: doors.map((d) => ({ pool: `${d.entry}/${d.pool}`, listen: `${d.listen.host}:${d.listen.port}` })),
      stateDir,
    },
    'door service running',
  );
} catch (err) {
  log.fatal({ err }, 'door service cannot start');
  await Promise.all(services.map(({ service }) => service.stop().catch(() => undefined)));
  await client.connection.close();
  process.exit(1);
}
