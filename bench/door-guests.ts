/**
 * The front door on the test hosts: a pool of two real Squid guests (one per host, on the hosts'
 * routed networks) behind its door (bin/door: HAProxy on 127.0.0.1, kept current from the pool),
 * as test/e2e/pool.test.ts runs them. Two parts:
 *
 *  - load, alternating: requests per second and latency (p50, p99) through the door against the
 *    same requests straight to the members' Squid, for plain HTTP (keep-alive absolute-URI GETs)
 *    and CONNECT (a new tunnel per request, one GET inside), at each --concurrency; the door's
 *    HAProxy CPU per request, the door service's (Node; its sync loop's CPU spread over the
 *    requests, since no request passes through it) beside it, the connections the door
 *    opened to the exits per request (HAProxy's `connect` and `reuse`), and peak RSS. Every door
 *    request is a session (`bench-session-<k>`); each straight request goes to the member that
 *    request's session is pinned to (read through the door's `/ip` first), so both variants
 *    load the same guests alike. The door (bin/door) writes its stdout to a file, as under a
 *    supervisor, and the target runs in a process of its own: the client's event loop carries
 *    the same work in both variants;
 *  - a member's death (--deaths times): one session's member destroyed (`virsh destroy`) while
 *    that session sends a request every 50 ms through the door: the time from the destroy until
 *    its requests leave by the other member, the requests that failed, and when the door's status
 *    showed the member out of its rotation; then the pool is let whole again before the next.
 *
 *   flock /tmp/ep-integration.lock bash -c 'scripts/temporal up >/dev/null && test/hosts/testhost up 2 >/dev/null && \
 *     EP_E2E_IMAGE=/var/cache/egress-proxies/images/<key>/proxy.qcow2 node bench/door-guests.ts [--rounds 5]'
 *
 * Options: --rounds (5), --requests (1000 plain GETs per round and variant), --connects (200),
 * --concurrency (repeat; 1 and 8), --deaths (3), --split-cpus (for the load part, the guests'
 * QEMU on the upper half of the machine's CPUs and this process, the door and the target on the
 * lower half, in both variants alike: the door off the cores its exits run on, as it runs beside
 * the API and not on the proxy hosts; the replacements of the deaths part are not pinned). Needs
 * root, the test hosts and the Temporal dev server. Every wait is bounded; the pool, its members,
 * the door and the worker are removed on every path (SIGINT and SIGTERM included). Traffic goes to
 * loopback and to the guests through the machine's routes into the hosts' veths (checked with
 * `ip route get`).
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import type { WorkflowHandle } from '@temporalio/client';
import { poolDeleteUpdate, poolStatusQuery } from '../contracts/messages.ts';
import { POOL_WORKFLOW_TYPE, poolAddresses, poolWorkflowId } from '../contracts/pool.ts';
import type { PoolStatus } from '../contracts/pool.ts';
import { poolTaskQueue } from '../contracts/task-queues.ts';
import { doorSocketPath } from '../lib/door/config.ts';
import { DoorRuntime } from '../lib/door/runtime.ts';
import type { DoorServerConnections } from '../lib/door/runtime.ts';
import type { DoorStatus } from '../lib/door/service.ts';
import type { poolWorkflow } from '../workflows/pool/index.ts';
import { cpuSecs, load, plainOnce } from './lib/proxy-load.ts';
import type { Addr, Kind, Load } from './lib/proxy-load.ts';
import { fmtLoad, HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, median, ratio, spread } from './lib/stats.ts';
import { spawnWorker, writeProvidersFile } from '../test/support/fleet.ts';
import type { WorkerProcess } from '../test/support/fleet.ts';
import { ImageMirror, sha256Hex } from '../test/support/mirror.ts';
import {
  deleteOpenMembers,
  GUEST_POOL_POLICIES,
  guestEntryConfig,
  removeEntryObjects,
} from '../test/support/pool-guests.ts';
import { freePort } from '../test/support/sshd.ts';
import { startTarget } from '../test/support/target.ts';
import { connectClient, PROJECT_ROOT, uniqueId } from '../test/support/temporal.ts';
import { loadTestHosts, virsh } from '../test/support/testhosts.ts';

const USAGE =
  'node bench/door-guests.ts [--rounds 5] [--requests 1000] [--connects 200] [--concurrency 1 --concurrency 8] [--deaths 3] [--split-cpus]';
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '1000' },
    connects: { type: 'string', default: '200' },
    concurrency: { type: 'string', multiple: true, default: [] },
    deaths: { type: 'string', default: '3' },
    'split-cpus': { type: 'boolean', default: false },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const CONNECTS = Number(values.connects);
const DEATHS = Number(values.deaths);
const SPLIT_CPUS = values['split-cpus'];
const CONCURRENCY = (values.concurrency.length > 0 ? values.concurrency : ['1', '8']).map(Number);
const READY_BOUND_MS = 8 * 60_000;
// `openssl passwd -6 -salt abcdefgh secret`: the door's one credential, `bench` (password `secret`).
const HASH = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';
const say = (line: string): void => void process.stdout.write(`door-guests: ${line}\n`);
const pexec = promisify(execFile);

const run = Date.now().toString(36);
const entry = `dg${run}`;
const hosts = loadTestHosts().filter((h) => h.name === 'ep-h1' || h.name === 'ep-h2');
const client = await connectClient();
let tmp = '';
let mirror: ImageMirror | undefined;
let target: Awaited<ReturnType<typeof startTarget>> | undefined;
let web: ChildProcess | undefined;
let worker: WorkerProcess | undefined;
let door: ChildProcess | undefined;
let pool: WorkflowHandle<typeof poolWorkflow> | undefined;
let cleaned = false;

async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  if (pool) {
    await pool.executeUpdate(poolDeleteUpdate).catch(() => undefined);
    await Promise.race([pool.result().catch(() => undefined), sleep(5 * 60_000)]);
  }
  await deleteOpenMembers(client, `${entry}/web`).catch(() => undefined);
  await stopChild(door);
  await worker?.stop().catch(() => worker?.kill());
  await removeEntryObjects(hosts, entry, [`k${run}`]).catch(() => undefined);
  await target?.close();
  await stopChild(web);
  await mirror?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
  await client.connection.close();
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => void cleanup().finally(() => process.exit(130)));
}

/** SIGTERM, SIGKILL after 10 s; resolves once the process is gone. */
async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(t);
}

const status = (): Promise<PoolStatus> => pool!.query(poolStatusQuery);
async function until(done: (s: PoolStatus) => boolean, boundMs: number, what: string): Promise<PoolStatus> {
  const t0 = performance.now();
  for (;;) {
    const st = await status().catch(() => undefined);
    if (st && done(st)) return st;
    if (performance.now() - t0 > boundMs) throw new Error(`${what}: not within ${boundMs} ms`);
    await sleep(1000);
  }
}
let doorHttp = 0;
async function doorState(): Promise<DoorStatus> {
  const r = await fetch(`http://127.0.0.1:${doorHttp}/v1/doors`, { signal: AbortSignal.timeout(5_000) });
  return ((await r.json()) as { doors: DoorStatus[] }).doors[0]!;
}

async function main(): Promise<void> {
  const path = process.env['EP_E2E_IMAGE'];
  if (!path) throw new Error('EP_E2E_IMAGE names the test image (test/e2e/run builds it)');
  if (hosts.length !== 2) throw new Error('test hosts ep-h1 and ep-h2 are needed: test/hosts/testhost up 2');
  for (const h of hosts) {
    const { stdout } = await pexec('ip', ['-o', 'route', 'get', String(h.routedNetworkGateway)], { timeout: 5_000 });
    if (!stdout.includes(` dev ${String(h.vethRoot)} `))
      throw new Error(`${h.name}'s routed network is not routed into its veth`);
  }
  const image = await readFile(path);
  const sha = (await readFile(`${path}.sha256`, 'utf8')).split(/\s+/)[0]!;
  if (sha256Hex(image) !== sha) throw new Error(`${path} does not match its .sha256`);
  tmp = await mkdtemp(join(tmpdir(), 'ep-bench-door-guests-'));
  mirror = await ImageMirror.start();
  const root = hosts[0]!.rootSideAddress;
  target = await startTarget(root);
  // The load's target, in a process of its own: a small fixed answer, or (`/ip`) the caller's
  // address (the exit's own).
  const dest: Addr = { host: root, port: await freePort() };
  web = spawn(
    process.execPath,
    [
      '-e',
      `require('http').createServer((req, res) => { const body = req.url === '/ip' ? req.socket.remoteAddress + '\\n' : 'ok\\n'; ` +
        `res.writeHead(200, { 'content-length': Buffer.byteLength(body) }); res.end(body); }).listen(${dest.port}, '${root}');`,
    ],
    { stdio: 'ignore' },
  );
  const key = `k${run}`;
  const config = guestEntryConfig({
    entry,
    ownerUid: `bench-door-${run}`,
    hosts,
    images: { [key]: { url: mirror.serve(`/${entry}/a.qcow2`, image), sha256: sha } },
    targetPort: target.port,
    routed: true,
  });
  const taskQueue = uniqueId('bench-door');
  worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 120_000);
  pool = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
    workflowId: poolWorkflowId(entry, 'web'),
    taskQueue: poolTaskQueue(taskQueue),
    args: [{ spec: { entry, name: 'web', size: 2, template: { imageKey: key }, ...GUEST_POOL_POLICIES } }],
  });
  const doorAddr: Addr = { host: '127.0.0.1', port: await freePort() };
  doorHttp = await freePort();
  const doorsFile = join(tmp, 'doors.json');
  await writeFile(
    doorsFile,
    JSON.stringify({
      doors: [
        {
          entry,
          pool: 'web',
          listen: doorAddr,
          users: [{ name: 'bench', passwordHash: HASH }],
          allowReserved: [`${root}/32`],
          decisionLog: true,
        },
      ],
    }),
  );
  // bin/door as a supervisor runs it: its stdout (its log and the decision lines) into a file.
  const doorOut = openSync(join(tmp, 'door.out'), 'w');
  door = spawn(
    join(PROJECT_ROOT, 'bin/door'),
    ['--config', doorsFile, '--state-dir', join(tmp, 'doors'), '--http', `127.0.0.1:${doorHttp}`],
    { stdio: ['ignore', doorOut, doorOut], env: { ...process.env, LOG_LEVEL: 'info' } },
  );
  closeSync(doorOut);
  for (let i = 0; !(await doorState().catch(() => undefined)); i++) {
    if (i > 300 || door.exitCode !== null)
      throw new Error(`bin/door did not answer within 30 s:\n${await readFile(join(tmp, 'door.out'), 'utf8')}`);
    await sleep(100);
  }
  const runtime = new DoorRuntime(doorSocketPath({ entry, pool: 'web' }, join(tmp, 'doors')));
  const t0 = performance.now();
  let st = await until((s) => s.phase === 'Ready' && s.available === 2, READY_BOUND_MS, 'the pool Ready');
  for (let i = 0; i < 600; i++) {
    const d = await doorState().catch(() => undefined);
    if (d && d.exits.filter((e) => e.up && e.role === 'serving').length === 2) break;
    await sleep(100);
  }
  say(
    `pool of 2 Ready and in the door after ${((performance.now() - t0) / 1000).toFixed(1)} s; load ${fmtLoad(loadavg())}`,
  );
  const haproxyPid = (await doorState()).pid;
  if (SPLIT_CPUS) {
    if (haproxyPid === undefined) throw new Error("--split-cpus: the door's status names no HAProxy pid");
    say(await splitCpus([process.pid, door.pid!, haproxyPid, web.pid!]));
  }
  // Each session's member, read through the door: its straight requests go there.
  const members = new Map(
    poolAddresses(st).map((a) => [
      a.address.split(':')[0]!,
      { host: a.address.split(':')[0]!, port: Number(a.address.split(':')[1]) },
    ]),
  );
  const sessionExit: Addr[] = [];
  for (let k = 0; k < 64; k++) {
    const ip = (await plainOnce(doorAddr, dest, `bench-session-${k}`, '/ip')).trim();
    const m = members.get(ip);
    if (!m) throw new Error(`bench-session-${k} left by ${ip}, not a member (${[...members.keys()].join(', ')})`);
    sessionExit.push(m);
  }
  const straight = (k: number): Addr => sessionExit[k]!;
  const perMember = (ks: number[]): string =>
    [...members.keys()].map((ip) => `${ip} ${ks.filter((k) => sessionExit[k]!.host === ip).length}`).join(', ');
  say(
    `sessions per member: plain at 8 ${perMember([0, 1, 2, 3, 4, 5, 6, 7])}; plain at 1 ${perMember([0])}; CONNECT ${perMember([...Array(64).keys()])}`,
  );
  const connections = async (): Promise<DoorServerConnections> =>
    [...(await runtime.connections()).values()].reduce(
      (a, c) => ({ connects: a.connects + c.connects, reuses: a.reuses + c.reuses }),
      { connects: 0, reuses: 0 },
    );

  // Part 1: load, alternating straight and door.
  const variants = ['straight', 'door'] as const;
  const res = new Map<string, Load[]>();
  const k = (v: string, kind: Kind, c: number): string => `${v} ${kind} ${c}`;
  for (const v of variants) {
    for (const kind of ['http', 'connect'] as const) {
      const r = await load(
        kind,
        v === 'door' ? doorAddr : straight,
        dest,
        100,
        4,
        v === 'door' ? (w) => `bench-session-${w}` : undefined,
      );
      if (r.errors > 0) throw new Error(`${v} ${kind}: ${r.errors} errors in the warm-up`);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? variants : ([...variants].reverse() as unknown as typeof variants);
    for (const c of CONCURRENCY) {
      for (const kind of ['http', 'connect'] as const) {
        for (const v of order) {
          const n = kind === 'http' ? REQUESTS : CONNECTS;
          const cpu0 = cpuSecs(haproxyPid);
          const svc0 = cpuSecs(door.pid);
          const conn0 = v === 'door' ? await connections() : undefined;
          // Through the door every user is a session (each pinned to one exit, like a client's).
          const r = await load(
            kind,
            v === 'door' ? doorAddr : straight,
            dest,
            n,
            c,
            v === 'door' ? (k) => `bench-session-${k}` : undefined,
          );
          if (v === 'door') {
            r.cpuUs = ((cpuSecs(haproxyPid) - cpu0) / n) * 1e6;
            r.serviceCpuUs = ((cpuSecs(door.pid) - svc0) / n) * 1e6;
            const conn1 = await connections();
            r.connectsPerRequest = (conn1.connects - conn0!.connects) / n;
          }
          res.set(k(v, kind, c), [...(res.get(k(v, kind, c)) ?? []), r]);
        }
      }
    }
    say(`round ${round + 1}/${ROUNDS} done (load ${fmtLoad(loadavg())})`);
  }
  say(
    `${ROUNDS} rounds; plain: ${REQUESTS} keep-alive GETs, connect: ${CONNECTS} tunnels (one GET each); straight to each session's member`,
  );
  say(
    'variant   kind     conc  req/s med (min-max)   ratio  p50 ms med (min-max)  +p50 ms  p99 ms med (min-max)  CPU µs  errors  service µs  connects/req',
  );
  for (const c of CONCURRENCY) {
    for (const kind of ['http', 'connect'] as const) {
      const base = res.get(k('straight', kind, c))!;
      for (const v of variants) {
        const rs = res.get(k(v, kind, c))!;
        const rps = spread(rs.map((x) => x.rps));
        const p50 = spread(rs.map((x) => x.p50));
        say(
          [
            v.padEnd(9),
            kind.padEnd(8),
            String(c).padStart(4),
            fmtRange(rps, 0).padStart(22),
            ratio(rps.med, median(base.map((x) => x.rps)))
              .toFixed(2)
              .padStart(6),
            fmtRange(p50, 3).padStart(22),
            (p50.med - median(base.map((x) => x.p50))).toFixed(3).padStart(8),
            fmtRange(spread(rs.map((x) => x.p99)), 3).padStart(22),
            (v === 'door' ? median(rs.map((x) => x.cpuUs ?? NaN)).toFixed(0) : '-').padStart(6),
            String(rs.reduce((a, x) => a + x.errors, 0)).padStart(7),
            (v === 'door' ? median(rs.map((x) => x.serviceCpuUs ?? NaN)).toFixed(0) : '-').padStart(11),
            (v === 'door' ? median(rs.map((x) => x.connectsPerRequest ?? NaN)).toFixed(3) : '-').padStart(13),
          ].join(' '),
        );
      }
    }
  }
  // Each round's door p50 less the same round's straight p50 (the two ran back to back): the
  // machine's drift between rounds cancels out of each difference.
  for (const c of CONCURRENCY) {
    for (const kind of ['http', 'connect'] as const) {
      const base = res.get(k('straight', kind, c))!;
      const diffs = res.get(k('door', kind, c))!.map((r, i) => r.p50 - base[i]!.p50);
      say(
        `added p50, paired by round, ${kind} at ${c}: ${fmtRange(spread(diffs), 3)} ms; ${diffs.filter((d) => d <= 1).length} of ${diffs.length} rounds at most 1 ms`,
      );
    }
  }
  const hwm = async (pid: number | undefined): Promise<string> => {
    const kb = /VmHWM:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''))?.[1];
    return kb ? (Number(kb) / 1024).toFixed(1) : '?';
  };
  say(`peak RSS: the door's HAProxy ${await hwm(haproxyPid)} MiB, the door service ${await hwm(door.pid)} MiB`);

  // Part 2: a member's death under one session's requests.
  for (let d = 0; d < DEATHS; d++) {
    st = await until((s) => s.phase === 'Ready' && s.available === 2, READY_BOUND_MS, 'the pool whole');
    const ips = new Map(poolAddresses(st).map((a) => [a.address.split(':')[0]!, a]));
    const user = `bench-session-death${d}`;
    const home = (await plainOnce(doorAddr, dest, user, '/ip')).trim();
    const victim = ips.get(home);
    if (!victim) throw new Error(`${user} left by ${home}, not a member (${[...ips.keys()].join(', ')})`);
    const host = hosts.find((h) => h.name === st.members.find((m) => m.name === victim.name)?.host)!;
    const answers: { at: number; ip: string }[] = [];
    let downAt = NaN;
    const k0 = performance.now();
    await virsh(host, 'destroy', `ep_${entry}_${victim.name}`);
    for (let i = 0; performance.now() - k0 < 30_000 && i < 600; i++) {
      const ip = await plainOnce(doorAddr, dest, user, '/ip')
        .then((b) => b.trim())
        .catch(() => '!');
      answers.push({ at: performance.now() - k0, ip });
      if (Number.isNaN(downAt)) {
        const ds = await doorState().catch(() => undefined);
        const still = ds?.exits.find((e) => e.name === victim.name);
        if (ds && (!still || !still.up || still.role !== 'serving')) downAt = performance.now() - k0;
      }
      const moved = answers.findIndex((a) => a.ip !== home && a.ip !== '!');
      if (moved >= 0 && !Number.isNaN(downAt) && answers.length - moved >= 20) break;
      await sleep(50);
    }
    const firstOther = answers.find((a) => a.ip !== home && a.ip !== '!');
    const lastHome = [...answers].reverse().find((a) => a.ip === home);
    say(
      `death ${d + 1}/${DEATHS}: ${victim.name} destroyed; ${user}'s requests left by the other member from ${firstOther ? `${(firstOther.at / 1000).toFixed(2)} s` : 'never (30 s)'}` +
        `, by the dead one last at ${lastHome ? `${(lastHome.at / 1000).toFixed(2)} s` : '- (none after the destroy)'}; ` +
        `${answers.filter((a) => a.ip === '!').length} of ${answers.length} failed; out of the door's rotation (down, draining or gone) at ${(downAt / 1000).toFixed(2)} s; load ${fmtLoad(loadavg())}`,
    );
  }
}

/**
 * Pins every thread of the pool's guests' QEMU to the upper half of the CPUs and every thread of
 * `ours` to the lower half (`taskset -a -p`); what it did, as a line.
 */
async function splitCpus(ours: number[]): Promise<string> {
  const n = cpus().length;
  if (n < 2) throw new Error('--split-cpus needs at least 2 CPUs');
  const low = `0-${Math.floor(n / 2) - 1}`;
  const high = `${Math.floor(n / 2)}-${n - 1}`;
  const { stdout } = await pexec('pgrep', ['-f', `guest=ep_${entry}_`], { timeout: 5_000 });
  const guests = stdout.split(/\s+/).filter((p) => /^\d+$/.test(p));
  if (guests.length !== 2) throw new Error(`--split-cpus: ${guests.length} QEMU processes of ${entry}'s guests, not 2`);
  for (const pid of guests) await pexec('taskset', ['-a', '-p', '-c', high, pid], { timeout: 5_000 });
  for (const pid of ours) await pexec('taskset', ['-a', '-p', '-c', low, String(pid)], { timeout: 5_000 });
  return `CPUs split: the guests' QEMU (${guests.join(', ')}) on ${high}; this process, the door service, its HAProxy and the target (${ours.join(', ')}) on ${low}`;
}

const deadline = setTimeout(() => {
  console.error('door-guests: bound of 40 minutes passed; stopping');
  void cleanup().finally(() => process.exit(1));
}, 40 * 60_000);
deadline.unref();
try {
  await main();
} finally {
  await cleanup();
}
process.exit(0);
