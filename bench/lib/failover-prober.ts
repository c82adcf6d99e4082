/**
 * The outside prober of bench/failover.ts, a process of its own (apart from the worker and the
 * bench): every interval it asks the pool for its discovery list (the pool's status query and
 * contracts/pool.ts poolAddresses, what the API's discovery answers from) and CONNECTs through each
 * listed member to the target, one GET inside the tunnel. One JSON line per sample on stdout:
 *
 *   {"at":<ms since the epoch, the sample's start>,"listedAt":<when the list answered>,
 *    "listed":[{"name","address"}],"failed":[{"name","error"}],"doneAt":<when every CONNECT ended>}
 *
 * or `"error"` when the query did not answer. Samples start on a fixed cadence and may overlap
 * (a CONNECT to a silent member waits its whole --timeout-ms); at most 8 are in flight.
 *
 *   node bench/lib/failover-prober.ts --pool <workflow id> --target host:port --dev <veth> [--dev ...]
 *     [--interval-ms 1000] [--timeout-ms 3000] [--max-secs 7200]
 *
 * The network rule: before its first CONNECT to an address, `ip -o route get` must name one of
 * the --dev interfaces (the test hosts' veths); an address routed elsewhere gets no packet (the
 * sample says `route: ...`). Ends on SIGTERM, when stdin closes, or after --max-secs.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { parseArgs, promisify } from 'node:util';
import { poolStatusQuery } from '../../contracts/messages.ts';
import { poolAddresses } from '../../contracts/pool.ts';
import { connectClient } from '../../test/support/temporal.ts';
import { sleep } from './run.ts';

const { values } = parseArgs({
  options: {
    pool: { type: 'string' },
    target: { type: 'string' },
    dev: { type: 'string', multiple: true, default: [] },
    'interval-ms': { type: 'string', default: '1000' },
    'timeout-ms': { type: 'string', default: '3000' },
    'max-secs': { type: 'string', default: '7200' },
  },
});
if (!values.pool || !values.target || values.dev.length === 0) {
  console.error('usage: node bench/lib/failover-prober.ts --pool ID --target host:port --dev VETH [--dev VETH]');
  process.exit(2);
}
const INTERVAL = Number(values['interval-ms']);
const TIMEOUT = Number(values['timeout-ms']);
const [targetHost, targetPort] = values.target.split(':') as [string, string];
const pexec = promisify(execFile);

/** Addresses whose route was checked: the answer (undefined: allowed), kept for the run. */
const routes = new Map<string, string | undefined>();
async function routeProblem(ip: string): Promise<string | undefined> {
  if (routes.has(ip)) return routes.get(ip);
  let problem: string | undefined;
  try {
    const { stdout } = await pexec('ip', ['-o', 'route', 'get', ip], { timeout: 5_000 });
    problem = values.dev.some((d) => stdout.includes(` dev ${d} `)) ? undefined : stdout.trim();
  } catch (err) {
    problem = String(err);
  }
  // Only a positive answer is kept: an address refused now (a black hole) is asked again later.
  if (problem === undefined) routes.set(ip, undefined);
  return problem;
}

/** CONNECT through `proxy` (`ip:port`) to the target and one GET inside: undefined, or why it failed. */
function connectOnce(proxy: string): Promise<string | undefined> {
  const [host, port] = proxy.split(':') as [string, string];
  const dest = `${targetHost}:${targetPort}`;
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), host);
    let buf = '';
    let stage: 'connect' | 'get' = 'connect';
    const done = (why: string | undefined): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(why);
    };
    const timer = setTimeout(() => done(`timeout ${TIMEOUT} ms (${stage})`), TIMEOUT);
    sock.on('connect', () => sock.write(`CONNECT ${dest} HTTP/1.1\r\nHost: ${dest}\r\n\r\n`));
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = buf.slice(9, 12);
      if (stage === 'connect') {
        if (status !== '200') return done(`CONNECT ${status}`);
        stage = 'get';
        buf = buf.slice(end + 4);
        sock.write(`GET / HTTP/1.1\r\nHost: ${dest}\r\nConnection: close\r\n\r\n`);
        if (buf.indexOf('\r\n\r\n') < 0) return;
      }
      done(buf.slice(9, 12) === '200' ? undefined : `GET ${buf.slice(9, 12)}`);
    });
    sock.on('error', (err) => done(`${stage}: ${err.message}`));
    sock.on('close', () => done(`${stage}: closed`));
  });
}

const client = await connectClient();
const pool = client.workflow.getHandle(values.pool);
let running = true;
const stop = (): void => {
  running = false;
};
process.once('SIGTERM', stop);
process.stdin.on('end', stop).resume();
const write = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);

async function sample(at: number): Promise<void> {
  let listed: { name: string; address: string }[];
  try {
    const st = await Promise.race([
      pool.query(poolStatusQuery),
      sleep(5_000).then(() => Promise.reject(new Error('the status query did not answer within 5 s'))),
    ]);
    listed = poolAddresses(st).map((a) => ({ name: a.name, address: a.address }));
  } catch (err) {
    write({ at, error: String(err) });
    return;
  }
  const listedAt = Date.now();
  const failed: { name: string; error: string }[] = [];
  await Promise.all(
    listed.map(async (a) => {
      const problem = await routeProblem(a.address.split(':')[0]!);
      const why = problem === undefined ? await connectOnce(a.address) : `route: ${problem}`;
      if (why !== undefined) failed.push({ name: a.name, error: why });
    }),
  );
  write({ at, listedAt, listed, failed, doneAt: Date.now() });
}

const inFlight = new Set<Promise<void>>();
const t0 = Date.now();
for (let i = 0; running && Date.now() - t0 < Number(values['max-secs']) * 1000; i++) {
  const next = t0 + i * INTERVAL;
  if (next > Date.now()) await sleep(next - Date.now());
  else if (Date.now() - next > INTERVAL) continue; // fallen behind (a stalled loop): the ticks missed are skipped
  if (inFlight.size >= 8) continue; // a slow server: skip this tick
  const p = sample(Date.now()).finally(() => inFlight.delete(p));
  inFlight.add(p);
}
await Promise.all(inFlight);
await client.connection.close();
process.exit(0);
