/**
 * The front door's proxy software, measured on loopback: requests per second and per-request
 * latency (p50, p99) through a door in front of two exits, against the same requests straight to
 * one exit, for plain HTTP (absolute-URI GET on a keep-alive connection) and CONNECT (a new tunnel
 * per request, then one GET inside it). Then, per door, a member added with one CONNECT tunnel
 * open and carrying a request every 20 ms (does the tunnel survive, how long until the new member
 * answers a request), and one exit killed (how long until the door marks it down, how many client
 * requests fail meanwhile).
 *
 * Beside each load figure, the CPU its proxy process spent per request (all threads, from the
 * scheduler's count: bench/lib/proxy-load.ts `cpuSecs`): the exit's when straight, the door
 * process's alone (not the exits behind it) through a door.
 *
 * Everything runs on 127.0.0.1 and is started and stopped here: a target HTTP server (a child
 * Node process; it answers `via=<Via header>` so a plain request shows which exit carried it),
 * exits that are Debian's Squid 5.7 with a minimal squid.conf, and the doors:
 *  - squid: Squid as the door, `cache_peer 127.0.0.1 parent PORT 0 no-query no-digest userhash
 *    login=PASSTHRU connect-fail-limit=2`, `never_direct allow all`, Basic auth with a helper that
 *    accepts every user (userhash needs the user name; the exits check the password);
 *  - haproxy: HAProxy 2.6 in mode http, `balance hdr(Proxy-Authorization)` with `hash-type
 *    consistent` (stickiness by user and session), health checks every 1 s (fall 2) and passive
 *    `observe layer4` ejection, `option redispatch 1`; an empty slot (`disabled`) for a member
 *    added through the runtime API (`set server ... addr`, `set server ... state ready`);
 *  - door (load only): the door as bin/door runs it (bench/lib/door-service.ts: lib/door/service.ts
 *    rendering lib/door/haproxy.ts, one credential `user`, sessions, the decision log on, the exits
 *    added through the runtime API), its decision lines written to a file; beside HAProxy's CPU,
 *    the door service's own (Node, reading those lines) is printed per request. Set against the
 *    minimal `haproxy` it gives the rendered configuration's cost as a ratio;
 *  - haproxy-tcp (load only): HAProxy in mode tcp, `balance source`: the whole client connection
 *    passed through to one exit, no per-user selection.
 * Member added: squid by `squid -k reconfigure` on a rewritten squid.conf; haproxy through the
 * runtime API and, apart, by a new process with the new config and `-sf <old pid>`.
 *
 *   node bench/door.ts [--rounds 5] [--requests 2000] [--connects 500] [--concurrency 1 --concurrency 8] [--event-runs 3]
 *
 * Needs root (Squid drops to nobody), `haproxy` on PATH (apt-get install haproxy; its service
 * stopped) and Debian's squid unpacked into .local/squid (scripts/test does it) or EP_SQUID_ROOT.
 * Every wait is bounded; every process is stopped on every path, SIGINT and SIGTERM included.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fmtLoad, HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, median, ratio, spread } from './lib/stats.ts';
import { Conn, connectReq, cpuSecs, innerReq, load as loadAt, plainOnce as plainOnceAt } from './lib/proxy-load.ts';
import type { Kind, Load } from './lib/proxy-load.ts';
import { freePort } from '../test/support/sshd.ts';

const USAGE =
  'node bench/door.ts [--rounds 5] [--requests 2000] [--connects 500] [--concurrency 1 --concurrency 8] [--event-runs 3] [--skip-load] [--skip-events]';
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '2000' },
    connects: { type: 'string', default: '500' },
    concurrency: { type: 'string', multiple: true, default: [] },
    'skip-load': { type: 'boolean', default: false },
    'skip-events': { type: 'boolean', default: false },
    'event-runs': { type: 'string', default: '3' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const CONNECTS = Number(values.connects);
const EVENT_RUNS = Number(values['event-runs']);
const CONCURRENCY = (values.concurrency.length > 0 ? values.concurrency : ['1', '8']).map(Number);
for (const [flag, v] of Object.entries({
  rounds: ROUNDS,
  requests: REQUESTS,
  connects: CONNECTS,
  'event-runs': EVENT_RUNS,
})) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} must be a whole number of at least 1, got ${v}`);
}
for (const c of CONCURRENCY) {
  if (!Number.isInteger(c) || c < 1 || c > 256) throw new Error(`--concurrency must be 1 to 256, got ${c}`);
}

const SQUID_ROOT = process.env['EP_SQUID_ROOT'] ?? join(import.meta.dirname, '..', '.local/squid/root');
const HOST = '127.0.0.1';
const BOUND_MS = 10_000;
const say = (line: string): void => void process.stdout.write(`door: ${line}\n`);
const dir = mkdtempSync(join(tmpdir(), 'ep-bench-door-'));
chmodSync(dir, 0o777); // Squid run as root drops to nobody

// ---------------------------------------------------------------------------------------------
// Processes

const children = new Set<ChildProcess>();
let cleaned = false;
function cleanup(): void {
  if (cleaned) return;
  cleaned = true;
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    cleanup();
    process.exit(130);
  });
}

function start(argv: string[], env: NodeJS.ProcessEnv = process.env): { proc: ChildProcess; log: () => string } {
  const proc = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
  proc.stderr.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
  return { proc, log: () => out };
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const t = setTimeout(() => proc.kill('SIGKILL'), 3000);
  await gone;
  clearTimeout(t);
}

/** Waits (bounded) until a TCP connect to `port` succeeds. */
async function listening(port: number, what: string, log: () => string): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, HOST, () => {
        sock.destroy();
        resolve(true);
      });
      sock.on('error', () => resolve(false));
    });
    if (up) return;
    if (Date.now() - t0 > BOUND_MS) throw new Error(`${what} not listening on ${port} after ${BOUND_MS} ms:\n${log()}`);
    await sleep(50);
  }
}

/** Peak RSS (VmHWM) of a process, in MiB. */
function peakRssMiB(pid: number | undefined): number {
  const m = pid ? /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8')) : null;
  return m ? Number(m[1]) / 1024 : NaN;
}

/** The target: a Node HTTP server in a child process, answering `via=<Via>` (keep-alive). */
async function startTarget(): Promise<number> {
  const port = await freePort();
  const code = `require('http').createServer((q, s) => { const b = 'via=' + (q.headers.via || '') + '\\n'; s.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(b) }); s.end(b); }).listen(${port}, '${HOST}');`;
  const t = start([process.execPath, '-e', code]);
  await listening(port, 'target', t.log);
  return port;
}

// ---------------------------------------------------------------------------------------------
// Squid (exits and the Squid door)

interface Squid {
  name: string;
  port: number;
  proc: ChildProcess;
  wrapper: string;
  conf: string;
  log: () => string;
}
const squidEnv = { ...process.env, LD_LIBRARY_PATH: join(SQUID_ROOT, 'usr/lib/x86_64-linux-gnu') };
const squidBin = join(SQUID_ROOT, 'usr/sbin/squid');

function squidWrapper(name: string): string {
  return [
    `mime_table ${SQUID_ROOT}/usr/share/squid/mime.conf`,
    `icon_directory ${SQUID_ROOT}/usr/share/squid/icons`,
    `unlinkd_program ${SQUID_ROOT}/usr/lib/squid/unlinkd`,
    `logfile_daemon ${SQUID_ROOT}/usr/lib/squid/log_file_daemon`,
    `error_directory ${SQUID_ROOT}/usr/share/squid-langpack/en`,
    `pid_filename ${join(dir, `${name}.pid`)}`,
    `cache_log ${join(dir, `${name}.cache.log`)}`,
    'cache_effective_user nobody',
    `coredump_dir ${dir}`,
    'access_log none',
    'cache deny all',
    'cache_mem 0 MB',
    'pinger_enable off',
    'netdb_filename none',
    'shutdown_lifetime 0 seconds',
    `visible_hostname ${name}`,
    `include ${join(dir, `${name}.conf`)}`,
    '',
  ].join('\n');
}

const exitConf = (port: number): string =>
  [`http_port ${HOST}:${port}`, `acl local src ${HOST}/32`, 'http_access allow local', 'http_access deny all', ''].join(
    '\n',
  );

/** The Squid door's peers: userhash over the exits, passing the client's credentials on. */
function squidDoorConf(port: number, exits: { name: string; port: number }[]): string {
  const helper = join(dir, 'accept-all.sh');
  writeFileSync(helper, '#!/bin/sh\nwhile read -r line; do echo OK; done\n', { mode: 0o755 });
  return [
    `http_port ${HOST}:${port}`,
    `auth_param basic program ${helper}`,
    'auth_param basic children 2 startup=1',
    'auth_param basic credentialsttl 1 hour',
    'acl authed proxy_auth REQUIRED',
    `acl local src ${HOST}/32`,
    'http_access deny !local',
    'http_access allow authed',
    'http_access deny all',
    ...exits.map(
      (e) =>
        `cache_peer ${HOST} parent ${e.port} 0 no-query no-digest userhash login=PASSTHRU connect-fail-limit=2 connect-timeout=2 name=${e.name}`,
    ),
    'never_direct allow all',
    '',
  ].join('\n');
}

async function startSquid(name: string, confOf: (port: number) => string): Promise<Squid> {
  const port = await freePort();
  const conf = join(dir, `${name}.conf`);
  const wrapper = join(dir, `${name}.wrapper.conf`);
  writeFileSync(conf, confOf(port));
  writeFileSync(wrapper, squidWrapper(name));
  rmSync(join(dir, `${name}.cache.log`), { force: true });
  const s = start([squidBin, '-N', '-d1', '-f', wrapper], squidEnv);
  await listening(port, `squid ${name}`, s.log);
  return { name, port, proc: s.proc, wrapper, conf, log: s.log };
}

// ---------------------------------------------------------------------------------------------
// HAProxy

interface Haproxy {
  port: number;
  proc: ChildProcess;
  sock: string;
  conf: string;
  log: () => string;
}

/** Mode http, hash of Proxy-Authorization; `slot` is an empty disabled server for the runtime API. */
function haproxyConf(
  port: number,
  sock: string,
  mode: 'http' | 'tcp',
  exits: { name: string; port: number }[],
  slot?: string,
): string {
  const check = 'check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down';
  return [
    'global',
    '  maxconn 4096',
    `  stats socket ${sock} mode 600 level admin`,
    'defaults',
    `  mode ${mode}`,
    '  timeout connect 2s',
    '  timeout client 30s',
    '  timeout server 30s',
    '  timeout tunnel 1h',
    '  retries 3',
    '  option redispatch 1',
    'frontend door',
    `  bind ${HOST}:${port}`,
    '  default_backend exits',
    'backend exits',
    mode === 'http' ? '  balance hdr(Proxy-Authorization)' : '  balance source',
    '  hash-type consistent',
    ...exits.map((e) => `  server ${e.name} ${HOST}:${e.port} ${check}`),
    ...(slot ? [`  server ${slot} ${HOST}:1 disabled ${check}`] : []),
    '',
  ].join('\n');
}

let haproxyGen = 0;
async function startHaproxy(
  confOf: (port: number, sock: string) => string,
  port?: number,
  sf?: number,
): Promise<Haproxy> {
  const p = port ?? (await freePort());
  const gen = haproxyGen++;
  const sock = join(dir, `haproxy-${gen}.sock`);
  const conf = join(dir, `haproxy-${gen}.cfg`);
  writeFileSync(conf, confOf(p, sock));
  const h = start(['haproxy', '-db', '-f', conf, ...(sf ? ['-sf', String(sf)] : [])]);
  const t0 = Date.now();
  while (!existsSync(sock)) {
    if (Date.now() - t0 > BOUND_MS || h.proc.exitCode !== null) throw new Error(`haproxy did not start:\n${h.log()}`);
    await sleep(20);
  }
  await listening(p, 'haproxy', h.log);
  return { port: p, proc: h.proc, sock, conf, log: h.log };
}

/** One runtime API command on the stats socket. */
function haproxyCmd(sock: string, cmd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(sock);
    let out = '';
    c.setTimeout(BOUND_MS, () => c.destroy(new Error(`haproxy ${cmd}: no answer`)));
    c.on('connect', () => c.write(`${cmd}\n`));
    c.on('data', (d: Buffer) => (out += d.toString()));
    c.on('end', () => resolve(out));
    c.on('error', reject);
  });
}

const at = (port: number) => ({ host: HOST, port });
const load = (kind: Kind, proxy: number, target: number, n: number, conc: number): Promise<Load> =>
  loadAt(kind, at(proxy), at(target), n, conc);
const plainOnce = (proxy: number, target: number, user: string): Promise<string> =>
  plainOnceAt(at(proxy), at(target), user);

// ---------------------------------------------------------------------------------------------
// Part 1: load, alternating

const VARIANTS = ['straight', 'squid', 'haproxy', 'door', 'haproxy-tcp'] as const;
type Variant = (typeof VARIANTS)[number];

// `openssl passwd -6 -salt abcdefgh secret`: the rendered door's one credential, `user`.
const HASH = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';

interface DoorProc {
  port: number;
  proc: ChildProcess;
  haproxyPid: number;
  decisions: string;
}

/** The door as bin/door runs it (bench/lib/door-service.ts), its decision lines into a file. */
async function startDoor(exits: { name: string; port: number }[]): Promise<DoorProc> {
  const port = await freePort();
  const decisions = join(dir, 'door-decisions.log');
  const out = openSync(decisions, 'w');
  const arg = JSON.stringify({
    spec: {
      listen: { host: HOST, port },
      users: [{ name: 'user', passwordHash: HASH }],
      runtimeSocket: join(dir, 'door.sock'),
      allowReserved: [`${HOST}/32`],
      health: { interMs: 1000, fall: 2, rise: 1 },
      decisionLog: true,
    },
    exits: exits.map((e) => ({ name: e.name, host: HOST, port: e.port })),
    configPath: join(dir, 'door.cfg'),
  });
  const proc = spawn(process.execPath, [join(import.meta.dirname, 'lib/door-service.ts'), arg], {
    stdio: ['ignore', out, 'pipe'],
  });
  closeSync(out);
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  let err = '';
  const haproxyPid = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`the door service is not ready after 30 s:\n${err}`)), 30_000);
    proc.stderr!.on('data', (c: Buffer) => {
      err = (err + c.toString()).slice(-20_000);
      const m = /door-service ready haproxy=(\d+)/.exec(err);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`the door service exited (${code}):\n${err}`));
    });
  });
  return { port, proc, haproxyPid, decisions };
}

async function loadRounds(target: number): Promise<void> {
  const exitA = await startSquid('exit-a', exitConf);
  const exitB = await startSquid('exit-b', exitConf);
  const exits = [
    { name: 'exit-a', port: exitA.port },
    { name: 'exit-b', port: exitB.port },
  ];
  const squidDoor = await startSquid('door', (p) => squidDoorConf(p, exits));
  const hap = await startHaproxy((p, s) => haproxyConf(p, s, 'http', exits));
  const hapTcp = await startHaproxy((p, s) => haproxyConf(p, s, 'tcp', exits));
  const door = await startDoor(exits);
  const port: Record<Variant, number> = {
    straight: exitA.port,
    squid: squidDoor.port,
    haproxy: hap.port,
    door: door.port,
    'haproxy-tcp': hapTcp.port,
  };
  const pid: Record<Variant, number | undefined> = {
    straight: exitA.proc.pid,
    squid: squidDoor.proc.pid,
    haproxy: hap.proc.pid,
    door: door.haproxyPid,
    'haproxy-tcp': hapTcp.proc.pid,
  };
  let doorRequests = 0;
  // Warm-up: every path once, each user's credentials into the Squid door's cache.
  for (const v of VARIANTS) {
    for (const kind of ['http', 'connect'] as const) {
      const r = await load(kind, port[v], target, 200, 8);
      if (r.errors > 0) throw new Error(`${v} ${kind}: ${r.errors} errors in the warm-up`);
      if (v === 'door') doorRequests += 200;
    }
  }
  const res = new Map<string, Load[]>();
  const key = (v: Variant, kind: Kind, c: number): string => `${v} ${kind} c=${c}`;
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate: each round starts at another variant.
    const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
    for (const c of CONCURRENCY) {
      for (const kind of ['http', 'connect'] as const) {
        for (const v of order) {
          const n = kind === 'http' ? REQUESTS : CONNECTS;
          const cpu0 = cpuSecs(pid[v]);
          const svc0 = v === 'door' ? cpuSecs(door.proc.pid) : NaN;
          const r = await load(kind, port[v], target, n, c);
          r.cpuUs = ((cpuSecs(pid[v]) - cpu0) / n) * 1e6;
          if (v === 'door') {
            r.serviceCpuUs = ((cpuSecs(door.proc.pid) - svc0) / n) * 1e6;
            doorRequests += n;
          }
          const k = key(v, kind, c);
          res.set(k, [...(res.get(k) ?? []), r]);
        }
      }
    }
    say(`round ${round + 1}/${ROUNDS} done (load ${fmtLoad(loadavg())})`);
  }
  say('');
  say(`${ROUNDS} rounds; plain: ${REQUESTS} keep-alive GETs, connect: ${CONNECTS} tunnels (one GET each)`);
  say(
    'variant      kind     conc  req/s med (min-max)   ratio  p50 ms med (min-max)  +p50 ms  p99 ms med (min-max)   CPU µs  errors  service µs',
  );
  for (const c of CONCURRENCY) {
    for (const kind of ['http', 'connect'] as const) {
      const base = res.get(key('straight', kind, c))!;
      const baseRps = median(base.map((x) => x.rps));
      const baseP50 = median(base.map((x) => x.p50));
      for (const v of VARIANTS) {
        const rs = res.get(key(v, kind, c))!;
        const rps = spread(rs.map((x) => x.rps));
        const p50 = spread(rs.map((x) => x.p50));
        const p99 = spread(rs.map((x) => x.p99));
        say(
          [
            v.padEnd(12),
            kind.padEnd(8),
            String(c).padStart(4),
            fmtRange(rps, 0).padStart(22),
            ratio(rps.med, baseRps).toFixed(2).padStart(6),
            fmtRange(p50, 3).padStart(22),
            (p50.med - baseP50).toFixed(3).padStart(8),
            fmtRange(p99, 3).padStart(22),
            median(rs.map((x) => x.cpuUs ?? NaN))
              .toFixed(0)
              .padStart(7),
            String(rs.reduce((a, x) => a + x.errors, 0)).padStart(7),
            (v === 'door' ? median(rs.map((x) => x.serviceCpuUs ?? NaN)).toFixed(0) : '').padStart(11),
          ].join(' '),
        );
      }
    }
  }
  // The rendered door against the minimal configuration: what credentials, sessions, rules and
  // the decision log cost, as ratios of the same run's medians.
  for (const c of CONCURRENCY) {
    for (const kind of ['http', 'connect'] as const) {
      const med = (v: Variant, f: (x: Load) => number | undefined): number =>
        median(res.get(key(v, kind, c))!.map((x) => f(x) ?? NaN));
      say(
        `door (rendered) / haproxy (minimal), ${kind} at ${c}: throughput ${ratio(
          med('door', (x) => x.rps),
          med('haproxy', (x) => x.rps),
        ).toFixed(2)}, ` +
          `p50 ${(med('door', (x) => x.p50) - med('haproxy', (x) => x.p50)).toFixed(3)} ms more, ` +
          `HAProxy CPU per request ${ratio(
            med('door', (x) => x.cpuUs),
            med('haproxy', (x) => x.cpuUs),
          ).toFixed(2)}× ` +
          `(+${med('door', (x) => x.serviceCpuUs).toFixed(0)} µs in the door service)`,
      );
    }
  }
  await sleep(200); // the last request's line is written when its stream ends
  const dropped = /DroppedLogs: (\d+)/.exec(await haproxyCmd(join(dir, 'door.sock'), 'show info'))?.[1] ?? '?';
  const decisions = readFileSync(door.decisions, 'utf8')
    .split('\n')
    .filter((l) => l.includes('CANONICAL-PROXY-DECISION'));
  say(`door decision lines: ${decisions.length} for ${doorRequests} requests (HAProxy's DroppedLogs: ${dropped})`);
  say(
    `peak RSS (VmHWM), MiB: exit-a ${peakRssMiB(pid.straight).toFixed(1)}, squid door ${peakRssMiB(pid.squid).toFixed(1)}, haproxy ${peakRssMiB(pid.haproxy).toFixed(1)}, door ${peakRssMiB(pid.door).toFixed(1)} (its service ${peakRssMiB(door.proc.pid).toFixed(1)}), haproxy-tcp ${peakRssMiB(pid['haproxy-tcp']).toFixed(1)}`,
  );
  await stop(door.proc);
  for (const s of [squidDoor, exitA, exitB]) await stop(s.proc);
  for (const h of [hap, hapTcp]) await stop(h.proc);
}

// ---------------------------------------------------------------------------------------------
// Part 2: a member added with a tunnel open; an exit killed

/** One CONNECT tunnel through `proxy` carrying a GET every 20 ms until stopped. */
function openTunnel(proxy: number, target: number): { stop: () => Promise<{ ok: number; failed: string }> } {
  let running = true;
  let ok = 0;
  let failed = '';
  const done = (async () => {
    const c = new Conn(at(proxy));
    try {
      const h = await c.exchange(connectReq(at(target), 'user-session-tunnel'), true);
      if (h.status !== 200) throw new Error(`CONNECT status ${h.status}`);
      while (running) {
        const r = await c.exchange(innerReq(at(target)), false);
        if (r.status !== 200) throw new Error(`status ${r.status}`);
        ok++;
        await sleep(20);
      }
    } catch (err) {
      failed = `after ${ok} requests: ${(err as Error).message}`;
    } finally {
      c.close();
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return { ok, failed };
    },
  };
}

/** Plain GETs through `proxy`, each a new user on a new connection, every 20 ms until `until` says so (bounded). */
async function probeUntil(
  proxy: number,
  target: number,
  until: (via: string) => boolean,
  boundMs = BOUND_MS,
): Promise<{ ms: number; errors: number }> {
  const t0 = performance.now();
  let errors = 0;
  for (let k = 0; performance.now() - t0 < boundMs; k++) {
    const via = await plainOnce(proxy, target, `probe-${Date.now()}-${k}`).catch(() => {
      errors++;
      return '';
    });
    if (until(via)) return { ms: performance.now() - t0, errors };
    await sleep(20);
  }
  return { ms: NaN, errors };
}

type Door = 'squid -k reconfigure' | 'haproxy runtime API' | 'haproxy reload -sf';

async function events(target: number, door: Door): Promise<void> {
  const ex = [await startSquid('exit-a', exitConf), await startSquid('exit-b', exitConf)];
  const exitC = await startSquid('exit-c', exitConf);
  const two = ex.map((e) => ({ name: e.name, port: e.port }));
  const three = [...two, { name: 'exit-c', port: exitC.port }];
  let squidDoor: Squid | undefined;
  let hap: Haproxy | undefined;
  const old: Haproxy[] = [];
  let port: number;
  if (door === 'squid -k reconfigure') {
    squidDoor = await startSquid('door', (p) => squidDoorConf(p, two));
    port = squidDoor.port;
  } else {
    hap = await startHaproxy((p, s) =>
      haproxyConf(p, s, 'http', two, door === 'haproxy runtime API' ? 'exit-c' : undefined),
    );
    port = hap.port;
  }
  // (a) a member added, with one tunnel open and carrying requests.
  const tunnel = openTunnel(port, target);
  await sleep(500);
  const t0 = performance.now();
  if (squidDoor) {
    writeFileSync(squidDoor.conf, squidDoorConf(port, three));
    const r = spawnSync(squidBin, ['-k', 'reconfigure', '-f', squidDoor.wrapper], { env: squidEnv, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`squid -k reconfigure: ${r.stderr}`);
  } else if (door === 'haproxy runtime API') {
    await haproxyCmd(hap!.sock, `set server exits/exit-c addr ${HOST} port ${exitC.port}`);
    await haproxyCmd(hap!.sock, 'set server exits/exit-c state ready');
  } else {
    old.push(hap!);
    hap = await startHaproxy((p, s) => haproxyConf(p, s, 'http', three), port, hap!.proc.pid);
  }
  const applyMs = performance.now() - t0;
  const added = await probeUntil(port, target, (via) => via.includes('exit-c'));
  const addedMs = added.ms + applyMs;
  await sleep(2000);
  const t = await tunnel.stop();
  const oldAlive = old.map((o) => (o.proc.exitCode === null && o.proc.signalCode === null ? 'running' : 'exited'));
  say(
    `${door}: member added: config applied in ${applyMs.toFixed(0)} ms, first request through it ${addedMs.toFixed(0)} ms after the change (${added.errors} probe errors); open tunnel: ${t.failed ? `BROKEN ${t.failed}` : `survived (${t.ok} requests, none failed)`}${old.length ? `; old process ${oldAlive.join(', ')} just after the tunnel closed` : ''}`,
  );
  // (b) exit-b killed: until the door marks it down, and the client requests failing meanwhile.
  const k0 = performance.now();
  ex[1]!.proc.kill('SIGKILL');
  let downMs = NaN;
  let errors = 0;
  let requests = 0;
  let lastErrorMs = NaN;
  for (let k = 0; performance.now() - k0 < BOUND_MS; k++) {
    requests++;
    await plainOnce(port, target, `dead-${k}`).catch(() => {
      errors++;
      lastErrorMs = performance.now() - k0;
    });
    if (Number.isNaN(downMs)) {
      const down = squidDoor
        ? readFileSync(join(dir, 'door.cache.log'), 'utf8').includes('Detected DEAD Parent: exit-b')
        : /exits \d+ exit-b \S+ 0 /.test(await haproxyCmd(hap!.sock, 'show servers state exits'));
      if (down) downMs = performance.now() - k0;
    }
    if (!Number.isNaN(downMs) && performance.now() - k0 > downMs + 1000) break;
    await sleep(20);
  }
  say(
    `${door}: exit-b killed: marked down after ${downMs.toFixed(0)} ms; ${errors} of ${requests} client requests failed${errors ? `, the last at ${lastErrorMs.toFixed(0)} ms` : ''}`,
  );
  if (squidDoor) await stop(squidDoor.proc);
  for (const h of [hap!, ...old].filter(Boolean)) await stop(h.proc);
  for (const e of [...ex, exitC]) await stop(e.proc);
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (!existsSync(squidBin)) throw new Error(`no squid at ${squidBin}: run scripts/test or set EP_SQUID_ROOT`);
  const hv = spawnSync('haproxy', ['-v'], { encoding: 'utf8' });
  if (hv.status !== 0) throw new Error('no haproxy on PATH: apt-get install -y --no-install-recommends haproxy');
  const sv = spawnSync(squidBin, ['-v'], { env: squidEnv, encoding: 'utf8' });
  say(
    `${/HAProxy version \S+/.exec(hv.stdout)?.[0]}, ${/Version \S+/.exec(sv.stdout)?.[0].replace('Version', 'Squid')}, node ${process.version}, ${cpus().length} CPUs, load ${fmtLoad(loadavg())}`,
  );
  const target = await startTarget();
  if (!values['skip-load']) await loadRounds(target);
  if (!values['skip-events']) {
    for (let run = 0; run < EVENT_RUNS; run++) {
      for (const d of ['squid -k reconfigure', 'haproxy runtime API', 'haproxy reload -sf'] as const) {
        await events(target, d);
      }
    }
  }
}

const deadline = setTimeout(() => {
  console.error('door: bound of 20 minutes passed; stopping');
  process.exit(1);
}, 20 * 60_000);
deadline.unref();
try {
  await main();
} finally {
  cleanup();
}
process.exit(0);
