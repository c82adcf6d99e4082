// The main job's local services (scripts/main starts and stops this process with a pid file):
//
//   - an image mirror on loopback serving the test image file at /images/proxy.qcow2, the URL
//     dev/providers.ts writes into the embedded default providers file (the worker fetches
//     it and streams it into each host's pool);
//   - the health target on a test host's root-side address: an HTTP server that answers every
//     request with one line, so the health probe's CONNECT through a guest's Squid really connects
//     out, and an operator's `curl -p -x http://<proxy>:3128 http://<target>/` shows it working.
//
//   node dev/services.ts --image FILE [--mirror 127.0.0.1:8480] [--target 10.231.1.1:8481]
//
// Logs are JSON lines on stdout. SIGINT/SIGTERM close both servers and every open socket.
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import type { Socket } from 'node:net';
import { createLogger, logLevelFromEnv } from '../lib/log/logger.ts';
import { parseArgsOrExit } from '../runtime/options.ts';

const IMAGE_PATH = '/images/proxy.qcow2';

const HELP = 'Usage: node dev/services.ts --image FILE [--mirror 127.0.0.1:8480] [--target 10.231.1.1:8481]';
const { values } = parseArgsOrExit(
  {
    options: {
      image: { type: 'string' },
      mirror: { type: 'string', default: '127.0.0.1:8480' },
      target: { type: 'string', default: '10.231.1.1:8481' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  },
  HELP,
);
if (values.help || values.image === undefined) {
  process.stdout.write(`${HELP}\n`);
  process.exit(values.help ? 0 : 2);
}
const imageFile = values.image;
const log = createLogger({ name: 'dev-services', level: logLevelFromEnv() });

function hostPort(what: string, text: string): { host: string; port: number } {
  const m = /^([0-9.]+):(\d{1,5})$/.exec(text);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65_535) {
    process.stderr.write(`--${what} must be IPv4:port, got ${JSON.stringify(text)}\n`);
    process.exit(2);
  }
  return { host: m[1]!, port };
}

const sockets = new Set<Socket>();
function track(server: http.Server): http.Server {
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  return server;
}

/** The mirror: the image file with Content-Length, read from disk on each request. */
const mirror = track(
  http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://mirror').pathname;
    if (path !== IMAGE_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    let size: number;
    try {
      size = statSync(imageFile).size;
    } catch (err) {
      log.error({ err, file: imageFile }, 'image file unreadable');
      res.writeHead(503, { 'content-type': 'text/plain' }).end('image file unreadable\n');
      return;
    }
    res.writeHead(200, { 'content-length': String(size), 'content-type': 'application/octet-stream' });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    const started = performance.now();
    log.info({ path, bytes: size, peer: req.socket.remoteAddress }, 'image download started');
    const stream = createReadStream(imageFile);
    stream.on('error', (err) => {
      log.error({ err }, 'image read failed');
      res.destroy(err);
    });
    res.on('close', () => {
      stream.destroy();
      const ms = Math.round(performance.now() - started);
      if (res.writableFinished) log.info({ path, bytes: size, ms }, 'image download finished');
      else log.warn({ path, ms }, 'image download ended early (client went away)');
    });
    stream.pipe(res);
  }),
);

/**
 * The health target: one line to every request (the probe only needs Squid to connect); at
 * `/headers`, the request's headers as JSON, so a check through a proxy can see what Squid
 * forwarded (never `Proxy-Authorization`); at `/ip`, only the caller's address (the embedded
 * default's `health.egressIpUrl`: a proxy's exit IP).
 */
const target = track(
  http.createServer((req, res) => {
    const from = req.socket.remoteAddress ?? '?';
    const body =
      req.url === '/headers'
        ? `${JSON.stringify(req.headers)}\n`
        : req.url === '/ip'
          ? `${from}\n`
          : `hello from the egress-proxies dev target; you came from ${from}\n`;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(body)) }).end(body);
  }),
);

async function listen(server: http.Server, what: string, text: string): Promise<void> {
  const { host, port } = hostPort(what, text);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  }).catch((err: unknown) => {
    log.fatal({ err, address: text }, `cannot listen for the ${what}`);
    process.exit(1);
  });
}

await listen(mirror, 'mirror', values.mirror);
await listen(target, 'target', values.target);
log.info(
  { mirror: `http://${values.mirror}${IMAGE_PATH}`, image: imageFile, target: values.target },
  'dev services running',
);

const stop = (signal: string): void => {
  log.info({ signal }, 'dev services stopping');
  for (const s of sockets) s.destroy();
  mirror.close();
  target.close();
  setTimeout(() => process.exit(0), 1000).unref();
};
process.once('SIGTERM', () => stop('SIGTERM'));
process.once('SIGINT', () => stop('SIGINT'));
