/**
 * Failover on the test hosts, seen from outside (issue 41): a pool of 2 real Squid guests on both
 * test hosts' routed networks (a worker process, bin/worker, as test/e2e/pool.test.ts runs it) and
 * an outside prober (bench/lib/failover-prober.ts, a process of its own) that asks the pool for its
 * discovery list every second and CONNECTs through each listed member to a target this bench
 * serves on ep-h1's root-side address. Each round black-holes the host of one member
 * (test/support/blackhole.ts: its address and its routed network) and reads from the prober's
 * samples: the first failed CONNECT through the lost member, when discovery stopped listing it,
 * when discovery listed N members again that all answered; from the pool, its
 * `hostUnreachableSince`; from the replacement's workflow history, its start and its boot (start to
 * Healthy). Then the route returns, the stranded member's VM is deleted by its workflow, the pool
 * settles (a member replaced by request when the hosts are unbalanced), and the next round runs.
 *
 *   (a) spares 0: goals: out of discovery within 10 s of the first failed CONNECT; N restored
 *       within hostFailureGraceMs + boot + 15 s of the black hole;
 *   (b) spares 1 (the same pool, scaled): out as in (a); N restored within 10 s of the black hole
 *       (the spare promoted at once).
 *
 *   flock /tmp/ep-integration.lock bash -c 'scripts/temporal up >/dev/null && test/hosts/testhost up 2 >/dev/null && \
 *     EP_E2E_IMAGE=/var/cache/egress-proxies/images/<key>/proxy.qcow2 node bench/failover.ts [--rounds 5]'
 *
 * Options: --rounds (5 per phase), --grace-ms (the pool's replacement.hostFailureGraceMs, 20000),
 * --phases (a,b), --json FILE (the rounds as JSON; they are printed as one `failover-json:` line
 * too); `--report FILE` prints an earlier run's table from that JSON and runs nothing. Needs root,
 * the test hosts and the Temporal dev server. Every wait is bounded; the black hole, the prober,
 * the pool, its members and the worker are removed on every path (SIGINT and SIGTERM included). Traffic goes to loopback and to the guests through the machine's routes into
 * the hosts' veths (checked with `ip route get`, by the prober before each new address).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import type { WorkflowHandle } from '@temporalio/client';
import { poolDeleteUpdate, poolReplaceMemberUpdate, poolScaleUpdate, poolStatusQuery } from '../contracts/messages.ts';
import { POOL_WORKFLOW_TYPE, poolWorkflowId } from '../contracts/pool.ts';
import type { PoolMemberStatus, PoolStatus } from '../contracts/pool.ts';
import { poolTaskQueue } from '../contracts/task-queues.ts';
import type { poolWorkflow } from '../workflows/pool/index.ts';
import { blackHoleHost } from '../test/support/blackhole.ts';
import type { BlackHole } from '../test/support/blackhole.ts';
import { spawnWorker, writeProvidersFile } from '../test/support/fleet.ts';
import type { WorkerProcess } from '../test/support/fleet.ts';
import { ImageMirror, sha256Hex } from '../test/support/mirror.ts';
import {
  deleteOpenMembers,
  GUEST_POOL_POLICIES,
  guestEntryConfig,
  removeEntryObjects,
} from '../test/support/pool-guests.ts';
import { startTarget } from '../test/support/target.ts';
import { connectClient, uniqueId } from '../test/support/temporal.ts';
import { domainsOf, loadTestHosts } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { bootOf, goals, readSamples, roundLine, table } from './lib/failover-rounds.ts';
import type { Round, Sample } from './lib/failover-rounds.ts';
import { BENCH_DIR, fmtLoad, HELP_OPTION, printUsageIfAsked, sh, sleep } from './lib/run.ts';

const USAGE =
  'node bench/failover.ts [--rounds 5] [--grace-ms 20000] [--phases a,b] [--json FILE] | node bench/failover.ts --report FILE';
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    'grace-ms': { type: 'string', default: '20000' },
    phases: { type: 'string', default: 'a,b' },
    json: { type: 'string' },
    report: { type: 'string' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
if (values.report) {
  // Prints the table of an earlier run's JSON (--json), without running anything.
  const earlier = JSON.parse(await readFile(values.report, 'utf8')) as { graceMs: number; rounds: Round[] };
  for (const r of earlier.rounds) console.log(roundLine(r));
  for (const line of table(earlier.rounds)) console.log(line);
  process.exit(0);
}
const ROUNDS = Number(values.rounds);
const GRACE_MS = Number(values['grace-ms']);
const PHASES = values.phases.split(',') as ('a' | 'b')[];
const SIZE = 2;
const READY_BOUND_MS = 8 * 60_000;
const say = (line: string): void => void process.stdout.write(`failover: ${line}\n`);
const iso = (): string => new Date().toISOString().slice(11, 19);

const run = Date.now().toString(36);
const entry = `fo${run}`;
const key = `k${run}`;
const hosts = loadTestHosts().filter((h) => h.name === 'ep-h1' || h.name === 'ep-h2');
const client = await connectClient();
let tmp = '';
let mirror: ImageMirror | undefined;
let target: Awaited<ReturnType<typeof startTarget>> | undefined;
let web: http.Server | undefined;
let worker: WorkerProcess | undefined;
let prober: ChildProcess | undefined;
let pool: WorkflowHandle<typeof poolWorkflow> | undefined;
let hole: BlackHole | undefined;
let cleaned = false;
const samples: Sample[] = [];
const rounds: Round[] = [];

async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await hole?.lift().catch((err: unknown) => say(`cleanup: lifting the black hole: ${String(err)}`));
  prober?.kill('SIGTERM');
  if (pool) {
    await pool.executeUpdate(poolDeleteUpdate).catch(() => undefined);
    await Promise.race([pool.result().catch(() => undefined), sleep(5 * 60_000)]);
  }
  await deleteOpenMembers(client, `${entry}/web`).catch(() => undefined);
  await worker?.stop().catch(() => worker?.kill());
  await removeEntryObjects(hosts, entry, [key]).catch(() => undefined);
  await target?.close();
  web?.closeAllConnections();
  web?.close();
  await mirror?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
  await client.connection.close();
}
/** The table and the JSON of the rounds done (also when stopped by a signal). */
async function report(): Promise<void> {
  if (rounds.length === 0) return;
  say(`hostFailureGraceMs ${GRACE_MS}; pool of ${SIZE}; samples every 1 s, CONNECT bound 3 s; ${rounds.length} rounds`);
  for (const line of table(rounds)) say(line);
  const json = JSON.stringify({ graceMs: GRACE_MS, size: SIZE, rounds: rounds.map((r) => ({ ...r, ...goals(r) })) });
  say(`failover-json: ${json}`);
  if (values.json) await writeFile(values.json, json);
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => void cleanup().finally(() => void report().finally(() => process.exit(130))));
}

const status = (): Promise<PoolStatus> =>
  Promise.race([
    pool!.query(poolStatusQuery),
    sleep(20_000).then(() => Promise.reject(new Error('the status query did not answer within 20 s'))),
  ]);
async function until(done: (s: PoolStatus) => boolean, boundMs: number, what: string): Promise<PoolStatus> {
  const t0 = Date.now();
  let last = '';
  for (;;) {
    const st = await status().catch(() => undefined);
    if (st) {
      const line = `${st.phase} available ${st.available} | ${st.members.map((m) => `${m.name}@${m.host ?? '-'} ${m.state}/${m.healthy}/${m.role}${m.available ? '*' : ''}`).join(', ')}`;
      if (line !== last) say(`  ${iso()} ${line}`);
      last = line;
      if (done(st)) return st;
    }
    if (Date.now() - t0 > boundMs) throw new Error(`${what}: not within ${boundMs} ms; last ${last}`);
    await sleep(1000);
  }
}
const on = (st: PoolStatus, h: TestHost): PoolMemberStatus[] => st.members.filter((m) => m.host === h.name);

/**
 * The layout a round needs, or the member to replace to get nearer to it: with spares 0 one
 * member a host; with spares 1 one host holding one serving member and the other a serving member
 * and the spare. A member on the fuller host is replaced (a serving one: its replacement goes to
 * the host with fewest members, and a spare takes its place at once).
 */
function rebalance(st: PoolStatus, spares: number): PoolMemberStatus | undefined {
  const [x, y] = [on(st, hosts[0]!), on(st, hosts[1]!)];
  const fuller = x.length >= y.length ? x : y;
  const single = x.length >= y.length ? y : x;
  const good = spares === 0 ? x.length === 1 && y.length === 1 : single.length === 1 && single[0]!.role === 'serving';
  return good ? undefined : (fuller.find((m) => m.role === 'serving') ?? fuller[0]);
}

/** Waits for the pool settled on `spares` (every member Healthy, N in discovery, all answering the prober). */
async function settle(spares: number): Promise<PoolStatus> {
  for (let fix = 0; ; fix++) {
    const st = await until(
      (s) =>
        s.phase === 'Ready' &&
        s.available === SIZE &&
        s.members.length === SIZE + spares &&
        s.members.every(
          (m) => m.role !== 'leaving' && m.healthy === 'True' && m.host !== undefined && !m.hostUnreachableSince,
        ),
      READY_BOUND_MS,
      'the pool settled',
    );
    const move = rebalance(st, spares);
    if (move === undefined) {
      // Three samples in a row that list N members, every one answering.
      for (let i = 0; i < 60; i++) {
        const last = samples.slice(-3);
        if (last.length === 3 && last.every((s) => s.listed?.length === SIZE && s.failed?.length === 0)) return st;
        await sleep(1000);
      }
      throw new Error(`the prober did not see ${SIZE} members answering: ${JSON.stringify(samples.slice(-3))}`);
    }
    if (fix >= 4) throw new Error(`the pool did not reach the round's layout after ${fix} replacements`);
    say(`  rebalance: replacing ${move.name} on ${move.host}`);
    await pool!.executeUpdate(poolReplaceMemberUpdate, { args: [{ name: move.name, reason: 'bench: rebalance' }] });
    await sleep(2000);
  }
}

async function round(phase: 'a' | 'b', k: number): Promise<Round> {
  const spares = phase === 'a' ? 0 : 1;
  const st0 = await settle(spares);
  // (a) the hosts in turn; (b) the host whose one member serves (the spare is on the other).
  const host =
    phase === 'a' ? hosts[k % 2]! : hosts.find((h) => on(st0, h).length === 1 && on(st0, h)[0]!.role === 'serving')!;
  const lost = on(st0, host).map((m) => m.name);
  const before = new Set(st0.members.map((m) => m.name));
  const spare = st0.members.find((m) => m.role === 'spare')?.name;
  const r: Round = {
    phase,
    round: k + 1,
    spares,
    host: host.name,
    lost,
    load: loadavg()[0]!,
    graceMs: 0,
    samples: 0,
    failedSamples: 0,
  };
  r.graceMs = st0.spec.replacement.hostFailureGraceMs;
  say(
    `${iso()} round ${phase}${k + 1}: black-holing ${host.name} (members there: ${lost.join(', ')}); load ${fmtLoad(loadavg())}`,
  );
  const t0 = Date.now();
  hole = await blackHoleHost(host);
  let last: PoolStatus | undefined;
  for (let i = 0; ; i++) {
    const st = await status().catch(() => undefined);
    if (st) {
      last = st;
      const since = st.members.find((m) => lost.includes(m.name) && m.hostUnreachableSince)?.hostUnreachableSince;
      if (since !== undefined) r.unreachableMs ??= Date.parse(since) - t0;
      // A member of the host that still answers must never be reported silent.
      for (const m of st.members) {
        if (m.host !== host.name && m.hostUnreachableSince && !(r.spurious ??= []).includes(m.name))
          r.spurious.push(m.name);
      }
    }
    // The route returns only once the lost members are condemned (past the grace): a host that
    // answers within the grace keeps its members (docs/pools.md, "Host failure").
    const condemned = st?.members.filter((m) => lost.includes(m.name)).every((m) => m.condemned !== undefined);
    if (readSamples(samples, t0, lost, SIZE).restored !== undefined && condemned === true) break;
    if (Date.now() - t0 > GRACE_MS + READY_BOUND_MS) throw new Error(`round ${phase}${k + 1}: N not restored`);
    await sleep(1000);
  }
  Object.assign(r, readSamples(samples, t0, lost, SIZE));
  delete (r as { restored?: unknown }).restored;
  const fresh = (last?.members ?? []).filter((m) => !before.has(m.name)).map((m) => m.name);
  r.replacement = fresh[0];
  const restored = readSamples(samples, t0, lost, SIZE).restored;
  if (spare !== undefined && restored?.listed?.some((a) => a.name === spare)) r.promoted = spare;
  // The route returns; the stranded members' workflows delete their VMs.
  await hole.lift();
  hole = undefined;
  const t1 = Date.now();
  await until((s) => !s.members.some((m) => lost.includes(m.name)), 10 * 60_000, 'the lost members gone');
  for (let i = 0; i < 120; i++) {
    const left = (await domainsOf(host, entry).catch(() => [] as string[])).filter((d) =>
      lost.some((n) => d.endsWith(`_${n}`)),
    );
    if (left.length === 0) break;
    if (i === 119) say(`  domains still there after 10 min: ${left.join(', ')}`);
    await sleep(5000);
  }
  r.cleanupMs = Date.now() - t1;
  if (r.replacement === undefined) {
    const st = await status();
    r.replacement = st.members.find((m) => !before.has(m.name))?.name;
  }
  if (r.replacement !== undefined) {
    for (let i = 0; i < 60; i++) {
      const b = await bootOf(client, entry, r.replacement).catch(() => undefined);
      if (b?.healthyAt !== undefined) {
        r.replacementStartMs = b.startAt - t0;
        r.bootMs = b.healthyAt - b.startAt;
        break;
      }
      await sleep(5000);
    }
  }
  return r;
}

async function main(): Promise<void> {
  const path = process.env['EP_E2E_IMAGE'];
  if (!path) throw new Error('EP_E2E_IMAGE names the test image (test/e2e/run builds it)');
  if (hosts.length !== 2) throw new Error('test hosts ep-h1 and ep-h2 are needed: test/hosts/testhost up 2');
  for (const h of hosts) {
    const out = sh(['ip', '-o', 'route', 'get', String(h.routedNetworkGateway)]).stdout;
    if (!out.includes(` dev ${String(h.vethRoot)} `))
      throw new Error(`${h.name}'s routed network is not routed into its veth`);
  }
  const image = await readFile(path);
  const sha = (await readFile(`${path}.sha256`, 'utf8')).split(/\s+/)[0]!;
  if (sha256Hex(image) !== sha) throw new Error(`${path} does not match its .sha256`);
  tmp = await mkdtemp(join(tmpdir(), 'ep-bench-failover-'));
  mirror = await ImageMirror.start();
  const root = hosts[0]!.rootSideAddress;
  target = await startTarget(root);
  web = http.createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((resolve) => web!.listen(0, root, resolve));
  const config = guestEntryConfig({
    entry,
    ownerUid: `bench-failover-${run}`,
    hosts,
    images: { [key]: { url: mirror.serve(`/${entry}/a.qcow2`, image), sha256: sha } },
    targetPort: target.port,
    routed: true,
  });
  const taskQueue = uniqueId('bench-failover');
  worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 120_000);
  const spares = PHASES[0] === 'b' ? 1 : 0;
  pool = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
    workflowId: poolWorkflowId(entry, 'web'),
    taskQueue: poolTaskQueue(taskQueue),
    args: [
      {
        spec: {
          entry,
          name: 'web',
          size: SIZE,
          spares,
          template: { imageKey: key },
          ...GUEST_POOL_POLICIES,
          // A short grace keeps a run bounded; rebalancing replaces by request more than 6 an hour.
          replacement: { ...GUEST_POOL_POLICIES.replacement, hostFailureGraceMs: GRACE_MS, requestedPerHour: 100 },
        },
      },
    ],
  });
  prober = spawn(
    process.execPath,
    [
      join(BENCH_DIR, 'lib/failover-prober.ts'),
      '--pool',
      pool.workflowId,
      '--target',
      `${root}:${(web.address() as AddressInfo).port}`,
      ...hosts.flatMap((h) => ['--dev', String(h.vethRoot)]),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  createInterface({ input: prober.stdout! }).on('line', (line) => {
    try {
      samples.push(JSON.parse(line) as Sample);
    } catch {
      say(`prober: ${line}`);
    }
  });
  say(
    `entry ${entry}, pool ${pool.workflowId}, worker pid ${worker.child.pid}, prober pid ${prober.pid}; hostFailureGraceMs ${GRACE_MS}`,
  );
  for (const phase of PHASES) {
    const want = phase === 'a' ? 0 : 1;
    if ((await status()).spec.spares !== want) {
      await pool.executeUpdate(poolScaleUpdate, { args: [{ size: SIZE, spares: want }] });
    }
    for (let k = 0; k < ROUNDS; k++) {
      const r = await round(phase, k);
      rounds.push(r);
      say(roundLine(r));
    }
  }
}

const deadline = setTimeout(() => {
  console.error('failover: bound of 150 minutes passed; stopping');
  void cleanup().finally(() => process.exit(1));
}, 150 * 60_000);
deadline.unref();
let failed: unknown;
try {
  await main();
} catch (err) {
  failed = err;
  say(`FAILED: ${String((err as Error).stack ?? err)}`);
} finally {
  await cleanup();
}
await report();
process.exit(failed === undefined ? 0 : 1);
