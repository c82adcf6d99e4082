/**
 * Warm spares on the real test hosts (issue 19's benchmark): seconds from a pool's scale-up to the
 * new member in discovery, from a warm spare and without one (a boot), with REAL Squid guests on
 * ep-h1 and ep-h2 under the project's worker process, beside an anchor outside the system: a raw
 * `virsh start` of an already-defined copy of the same guest until its Squid answers a CONNECT.
 *
 * Set-up (as test/e2e/pool.test.ts does, through test/support): a worker process (`bin/worker`)
 * on a task queue of its own, a providers file with one entry over ep-h1 and ep-h2, the e2e image
 * served by a loopback mirror, a health target on ep-h1's root-side address, and a pool of size 1
 * with `spares: 1`. Then rounds, each (in this order):
 *
 * - with a spare: once 1 member serves and a spare is Healthy, the `scale` update to size 2
 *   (spares 1); timed from the update's acceptance (executeUpdate returned) to the second member
 *   in `poolAddresses` of the status query (sampled every 100 ms); then scale back to 1 and wait
 *   until one member serves and a spare is Healthy again;
 * - without a spare: the `scale` update to spares 0 (the spare leaves; wait until it is gone),
 *   then to size 2: timed the same way (a new member booted under TCG); then scale back to 1 with
 *   spares 1 and wait as above;
 * - the anchor: a copy of a member's guest (its inactive domain XML with a new name, MAC and no
 *   UUID or owner mark; a fresh qcow2 overlay on the same base, so a first boot as a member's; a
 *   copy of its cloud-init seed) defined beforehand; timed from `virsh start` to a CONNECT through
 *   its Squid (sent from inside the host, as the e2e prober does) answering 200.
 *
 * The 1-minute load is printed before each trial; the worker process's peak RSS is sampled every
 * second. A round is not started when the run would pass --budget-min (fewer trials, said so).
 *
 *   EP_E2E_IMAGE=/var/cache/egress-proxies/images/<key>/proxy.qcow2 \
 *     node bench/pool-spare.ts [--trials 3] [--anchor-runs 3] [--bound-s 480] [--budget-min 25]
 *
 * Needs `scripts/temporal up` and `test/hosts/testhost up 2`; run it through
 * /tmp/ep-integration.lock (flock) like the integration tests. Every wait is bounded; the pool,
 * its members' workflows, the worker and every domain and volume of the run's entry (the anchor's
 * included) are removed on every path (SIGINT and SIGTERM too), and what is left is printed.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { poolDeleteUpdate, poolScaleUpdate, poolStatusQuery } from '../contracts/messages.ts';
import type { PoolSpec, PoolStatus } from '../contracts/pool.ts';
import { POOL_WORKFLOW_TYPE, poolAddresses, poolWorkflowId } from '../contracts/pool.ts';
import { poolTaskQueue } from '../contracts/task-queues.ts';
import type { poolWorkflow } from '../workflows/pool/index.ts';
import { within } from '../test/support/bounded.ts';
import { spawnWorker, writeProvidersFile } from '../test/support/fleet.ts';
import {
  deleteOpenMembers,
  GUEST_POOL_POLICIES,
  guestEntryConfig,
  openMemberIds,
  removeEntryObjects,
} from '../test/support/pool-guests.ts';
import type { WorkerProcess } from '../test/support/fleet.ts';
import { ImageMirror, sha256Hex } from '../test/support/mirror.ts';
import { startTarget } from '../test/support/target.ts';
import type { Target } from '../test/support/target.ts';
import { connectClient, uniqueId } from '../test/support/temporal.ts';
import { hostPath, inHost, loadTestHosts, virsh } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { rssMiB } from './lib/dev-server.ts';
import { HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, median, ratio, spread } from './lib/stats.ts';

const USAGE =
  'EP_E2E_IMAGE=<proxy.qcow2> node bench/pool-spare.ts [--trials 3] [--anchor-runs 3] [--bound-s 480] [--budget-min 25]';
const { values } = parseArgs({
  options: {
    trials: { type: 'string', default: '3' },
    'anchor-runs': { type: 'string', default: '3' },
    'bound-s': { type: 'string', default: '480' },
    'budget-min': { type: 'string', default: '25' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
const TRIALS = Number(values.trials);
const ANCHOR_RUNS = Number(values['anchor-runs']);
const BOUND_MS = Number(values['bound-s']) * 1000;
const BUDGET_MS = Number(values['budget-min']) * 60_000;
for (const [flag, v] of Object.entries({ trials: TRIALS, 'bound-s': BOUND_MS, 'budget-min': BUDGET_MS })) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} must be a whole number of at least 1, got ${v}`);
}
if (!Number.isInteger(ANCHOR_RUNS) || ANCHOR_RUNS < 0)
  throw new Error(`--anchor-runs must be a whole number (0 leaves the anchor out), got ${values['anchor-runs']}`);
const IMAGE = process.env['EP_E2E_IMAGE'];
if (!IMAGE)
  throw new Error(
    'EP_E2E_IMAGE must name the e2e test image (a proxy.qcow2 with its .sha256 beside it; test/e2e/image/build makes it)',
  );

const run = Date.now().toString(36);
const entry = `ps${run}`;
const key = `k${run}`;
const POOL = 'spare';
/** The anchor's objects: not `ep_<entry>_` (no worker takes them for a proxy), but they name the entry. */
const anchorName = (k: number | string): string => `epb_${entry}_a${k}`;
const say = (line: string): void => void process.stdout.write(`pool-spare: ${line}\n`);
const secs = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

let hosts: TestHost[] = [];
let client: Client | undefined;
let mirror: ImageMirror | undefined;
let target: Target | undefined;
let web: http.Server | undefined;
let tmp: string | undefined;
let worker: WorkerProcess | undefined;
let pool: WorkflowHandle<typeof poolWorkflow> | undefined;
let workerPeakMiB = 0;
let rssTimer: NodeJS.Timeout | undefined;

const status = (): Promise<PoolStatus> => within(pool!.query(poolStatusQuery), 20_000, 'the pool status query');
const hostNamed = (name: string | undefined): TestHost | undefined => hosts.find((h) => h.name === name);
const webDest = (): string => `${hosts[0]!.rootSideAddress}:${(web!.address() as AddressInfo).port}`;

/** Polls the status query every `everyMs` until `done` holds, for at most BOUND_MS; prints each change. */
async function until(what: string, done: (s: PoolStatus) => boolean, everyMs = 1000): Promise<PoolStatus> {
  const deadline = performance.now() + BOUND_MS;
  let last = '';
  let st: PoolStatus | undefined;
  for (;;) {
    const t = performance.now();
    st = await status().catch(() => st);
    if (st) {
      const line = `${st.phase} desired ${st.desired} spares ${st.spares} available ${st.available} replacements ${st.replacements} | ${st.members.map((m) => `${m.name}@${m.host ?? '-'} ${m.state}/${m.healthy}/${m.role}${m.available ? '*' : ''}${m.condemned ? ` (${m.condemned})` : ''}`).join(', ')}`;
      if (line !== last) say(line);
      last = line;
      if (done(st)) return st;
    }
    if (performance.now() > deadline) throw new Error(`${what}: not within ${BOUND_MS / 1000} s; last ${last}`);
    await sleep(Math.max(0, everyMs - (performance.now() - t)));
  }
}

const inDiscovery = (s: PoolStatus): number => poolAddresses(s).length;
/** One member serves, one spare is Healthy, nothing is leaving. */
const oneAndSpare = (s: PoolStatus): boolean =>
  inDiscovery(s) === 1 &&
  s.members.length === 2 &&
  s.members.some((m) => m.role === 'spare' && m.state === 'Running' && m.healthy === 'True');
const oneAlone = (s: PoolStatus): boolean => inDiscovery(s) === 1 && s.members.length === 1;

async function scale(size: number, spares: number): Promise<number> {
  const t0 = performance.now();
  await within(pool!.executeUpdate(poolScaleUpdate, { args: [{ size, spares }] }), 30_000, `scale ${size}/${spares}`);
  return performance.now() - t0;
}

interface Trial {
  /** Seconds from the update's acceptance to 2 in discovery. */
  s: number;
  /** Seconds the update itself took (request to acceptance). */
  updateS: number;
  load: number;
}

/** Scale 1 → 2 from the settled state (with or without the spare); back to 1 with a Healthy spare. */
async function trial(withSpare: boolean, k: number): Promise<Trial> {
  const spares = withSpare ? 1 : 0;
  // The state can change between trials (a spare replaced while the anchor boots): settle again.
  await until('1 serving and a Healthy spare', oneAndSpare);
  if (!withSpare) {
    await scale(1, 0);
    await until('the spare gone', oneAlone);
  }
  const load = loadavg()[0]!;
  say(`trial ${k + 1} ${withSpare ? 'with a spare' : 'without a spare'}: load ${load.toFixed(2)}`);
  const updateMs = await scale(2, spares);
  const t0 = performance.now();
  await until('2 in discovery', (s) => inDiscovery(s) >= 2, 100);
  const s = (performance.now() - t0) / 1000;
  say(`trial ${k + 1} ${withSpare ? 'with a spare' : 'without a spare'}: ${s.toFixed(2)} s to 2 in discovery`);
  await scale(1, 1);
  await until('back to 1 and a Healthy spare', oneAndSpare);
  return { s, updateS: updateMs / 1000, load };
}

/** What the anchor copies: a member's inactive domain XML, its host, the overlay's base, a copy of its seed. */
interface AnchorSource {
  host: TestHost;
  xml: string;
  domain: string;
  backing: string;
  capacity: string;
  seed: string;
}

async function anchorSource(st: PoolStatus): Promise<AnchorSource> {
  const m = st.members.find((x) => x.role === 'serving' && hostNamed(x.host));
  if (!m) throw new Error(`no serving member with a known host to copy: ${JSON.stringify(st.members)}`);
  const host = hostNamed(m.host)!;
  const domain = `ep_${entry}_${m.name}`;
  const xml = await virsh(host, 'dumpxml', '--inactive', domain);
  const vol = await virsh(host, 'vol-dumpxml', '--pool', host.pool, `${domain}.qcow2`);
  const backing = /<backingStore>[\s\S]*?<path>([^<]+)<\/path>/.exec(vol)?.[1];
  const capacity = /<capacity unit='bytes'>(\d+)<\/capacity>/.exec(vol)?.[1];
  if (!backing || !capacity) throw new Error(`${domain}.qcow2 has no backing store or capacity:\n${vol}`);
  const seed = `${anchorName('src')}.seed.iso`;
  await virsh(host, 'vol-clone', '--pool', host.pool, `${domain}.seed.iso`, seed);
  say(`anchor: copies ${domain} on ${host.name} (base ${backing})`);
  return { host, xml, domain, backing, capacity, seed };
}

const randomMac = (): string =>
  `52:54:00:${Array.from({ length: 3 }, () =>
    Math.floor(Math.random() * 256)
      .toString(16)
      .padStart(2, '0'),
  ).join(':')}`;

/** A CONNECT through `address`:3128 to the web target, from inside `host`: the CONNECT's status (0: none). */
async function connectThrough(host: TestHost, address: string): Promise<number> {
  const script = `curl -sS -o /dev/null --max-time 3 -x 'http://${address}:3128' -p 'http://${webDest()}/' -w 'connect=%{http_connect};' 2>&1; true`;
  const out = await inHost(host, ['sh', '-c', script], 10_000).catch(() => '');
  return Number(/connect=(\d{3});/.exec(out)?.[1] ?? 0);
}

interface AnchorRun {
  /** Seconds from `virsh start` to its lease, and to a CONNECT answering 200. */
  addressS: number;
  connectS: number;
  load: number;
}

/** Defines a fresh copy (outside the timing), times `virsh start` to a CONNECT through its Squid, removes it. */
async function anchorRun(src: AnchorSource, k: number): Promise<AnchorRun> {
  const { host } = src;
  const name = anchorName(k);
  const xml = src.xml
    .replaceAll(src.domain, name)
    .replace(/<uuid>[^<]*<\/uuid>\s*/, '')
    .replace(/<metadata>[\s\S]*?<\/metadata>\s*/, '')
    .replace(/<mac address='[^']*'\/>/, `<mac address='${randomMac()}'/>`);
  if (!xml.includes(`${name}.qcow2`) || !xml.includes(`${name}.seed.iso`))
    throw new Error(`the copied XML does not point at ${name}'s volumes:\n${xml}`);
  try {
    await virsh(
      host,
      'vol-create-as',
      host.pool,
      `${name}.qcow2`,
      src.capacity,
      '--format',
      'qcow2',
      '--backing-vol',
      src.backing,
      '--backing-vol-format',
      'qcow2',
    );
    await virsh(host, 'vol-clone', '--pool', host.pool, src.seed, `${name}.seed.iso`);
    await writeFile(hostPath(host, `/tmp/${name}.xml`), xml);
    await virsh(host, 'define', `/tmp/${name}.xml`);
    const load = loadavg()[0]!;
    say(`anchor ${k + 1}: load ${load.toFixed(2)}, virsh start ${name} on ${host.name}`);
    const t0 = performance.now();
    await virsh(host, 'start', name);
    const deadline = t0 + BOUND_MS;
    let address: string | undefined;
    let addressS = NaN;
    for (;;) {
      if (address === undefined) {
        const out = await virsh(host, 'domifaddr', name, '--source', 'lease').catch(() => '');
        address = /(\d+\.\d+\.\d+\.\d+)\/\d+/.exec(out)?.[1];
        if (address !== undefined) addressS = (performance.now() - t0) / 1000;
      }
      if (address !== undefined && (await connectThrough(host, address)) === 200) break;
      if (performance.now() > deadline)
        throw new Error(`anchor ${name}: no CONNECT through ${address ?? '(no address)'} within ${BOUND_MS / 1000} s`);
      await sleep(250);
    }
    const connectS = (performance.now() - t0) / 1000;
    say(`anchor ${k + 1}: address after ${addressS.toFixed(2)} s, CONNECT 200 after ${connectS.toFixed(2)} s`);
    return { addressS, connectS, load };
  } finally {
    await removeAnchor(host, name);
  }
}

async function removeAnchor(host: TestHost, name: string): Promise<void> {
  await virsh(host, 'destroy', name).catch(() => '');
  await virsh(host, 'undefine', name).catch(() => '');
  for (const v of [`${name}.qcow2`, `${name}.seed.iso`])
    await virsh(host, 'vol-delete', '--pool', host.pool, v).catch(() => '');
  await inHost(host, ['rm', '-f', `/tmp/${name}.xml`, `/var/log/libvirt/qemu/${name}.console.log`]).catch(() => '');
}

async function setUp(): Promise<void> {
  hosts = loadTestHosts().filter((h) => h.name === 'ep-h1' || h.name === 'ep-h2');
  if (hosts.length !== 2) throw new Error('test hosts ep-h1 and ep-h2 must be up: test/hosts/testhost up 2');
  const image = await readFile(IMAGE!);
  const sha = (await readFile(`${IMAGE!}.sha256`, 'utf8')).split(/\s+/)[0]!;
  if (sha256Hex(image) !== sha)
    throw new Error(`${IMAGE!} does not match its .sha256: rebuild it (test/e2e/image/build)`);
  tmp = await mkdtemp(join(tmpdir(), 'ep-bench-spare-'));
  client = await connectClient();
  mirror = await ImageMirror.start();
  target = await startTarget(hosts[0]!.rootSideAddress, 'hello from the spare bench target\n');
  web = http.createServer((_req, res) => res.end('hello from the spare bench\n'));
  await new Promise<void>((resolve) => web!.listen(0, hosts[0]!.rootSideAddress, resolve));
  const config = guestEntryConfig({
    entry,
    ownerUid: `bench-spare-${run}`,
    hosts,
    images: { [key]: { url: mirror.serve(`/${entry}/a.qcow2`, image), sha256: sha } },
    targetPort: target.port,
  });
  const taskQueue = uniqueId('bench-spare');
  worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 120_000);
  const pid = worker.child.pid!;
  rssTimer = setInterval(() => {
    try {
      workerPeakMiB = Math.max(workerPeakMiB, rssMiB(pid));
    } catch {
      // the worker is gone (its exit is reported by the steps that need it)
    }
  }, 1_000);
  const spec: PoolSpec = {
    entry,
    name: POOL,
    size: 1,
    spares: 1,
    template: { imageKey: key },
    ...GUEST_POOL_POLICIES,
  };
  pool = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
    workflowId: poolWorkflowId(entry, POOL),
    taskQueue: poolTaskQueue(taskQueue),
    args: [{ spec }],
  });
  say(`entry ${entry}, pool ${pool.workflowId}, task queue ${taskQueue}, worker pid ${pid}`);
}

let cleaning: Promise<string[]> | undefined;
/** Removes everything the run made; returns what is left (domains, volumes, open member workflows). */
function cleanUp(): Promise<string[]> {
  cleaning ??= (async () => {
    if (rssTimer) clearInterval(rssTimer);
    const left: string[] = [];
    const d = await pool?.describe().catch(() => undefined);
    if (pool && d?.status.name === 'RUNNING') {
      await within(pool.executeUpdate(poolDeleteUpdate), 30_000, 'delete the pool').catch(() => undefined);
      await within(pool.result(), 5 * 60_000, 'the pool to end').catch((err: unknown) =>
        say(`cleanup: ${String(err)}`),
      );
    }
    if (client)
      await deleteOpenMembers(client, `${entry}/${POOL}`).catch((err: unknown) => say(`cleanup: ${String(err)}`));
    await worker?.stop().catch(() => worker?.kill());
    for (const h of hosts) {
      const anchors = (await virsh(h, 'list', '--all', '--name').catch(() => ''))
        .split('\n')
        .filter((n) => n.startsWith(`epb_${entry}_`));
      for (const a of anchors) await removeAnchor(h, a);
    }
    left.push(...(await removeEntryObjects(hosts, entry, [key])));
    if (client) {
      for (const id of await openMemberIds(client, `${entry}/${POOL}`).catch(() => []))
        left.push(`workflow ${id} still running`);
      await client.connection.close();
    }
    await target?.close();
    if (web)
      await new Promise<void>((resolve) => {
        web!.closeAllConnections();
        web!.close(() => resolve());
      });
    await mirror?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    return left;
  })();
  return cleaning;
}

for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    say(`${sig}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });

const withS: Trial[] = [];
const withoutS: Trial[] = [];
const anchors: AnchorRun[] = [];
let failure: unknown;
let readyS = NaN;
const t0 = performance.now();
const startedAt = new Date().toISOString().slice(0, 16).replace('T', ' ');
try {
  await setUp();
  await until('the pool Ready with a Healthy spare', oneAndSpare);
  readyS = (performance.now() - t0) / 1000;
  const src = ANCHOR_RUNS > 0 ? await anchorSource(await status()) : undefined;
  let longestRound = 0;
  for (let k = 0; k < TRIALS; k++) {
    const elapsed = performance.now() - t0;
    if (k > 0 && elapsed + longestRound > BUDGET_MS) {
      say(
        `round ${k + 1} not started: ${secs(elapsed)} gone, a round took up to ${secs(longestRound)}, budget ${values['budget-min']} min`,
      );
      break;
    }
    const r0 = performance.now();
    withS.push(await trial(true, k));
    withoutS.push(await trial(false, k));
    if (src && k < ANCHOR_RUNS) anchors.push(await anchorRun(src, k));
    longestRound = Math.max(longestRound, performance.now() - r0);
  }
} catch (err) {
  failure = err;
  say(`FAILED: ${err instanceof Error ? err.stack : String(err)}`);
} finally {
  const left = await cleanUp();
  say(left.length === 0 ? 'cleanup: nothing of the run is left' : `cleanup LEFT: ${left.join('; ')}`);
}

const w = spread(withS.map((t) => t.s));
const wo = spread(withoutS.map((t) => t.s));
const an = spread(anchors.map((a) => a.connectS));
const rows: [string, number, string][] = [
  ['scale 1 → 2 **with a warm spare**: s from the update accepted to 2 in discovery', withS.length, fmtRange(w, 2)],
  [
    'the scale update itself (request to accepted), with a spare: s',
    withS.length,
    fmtRange(spread(withS.map((t) => t.updateS)), 2),
  ],
  [
    'scale 1 → 2 **without a spare** (a boot under TCG): s from the update accepted to 2 in discovery',
    withoutS.length,
    fmtRange(wo, 1),
  ],
  [
    'anchor: `virsh start` of a defined copy of the guest to its Squid answering a CONNECT: s',
    anchors.length,
    fmtRange(an, 1),
  ],
  [
    "anchor: `virsh start` to the copy's DHCP lease: s",
    anchors.length,
    fmtRange(spread(anchors.map((a) => a.addressS)), 1),
  ],
];
console.log(
  `\nRun of ${startedAt} UTC, entry ${entry}; pool Ready with its spare Healthy ${readyS.toFixed(1)} s after the start.\n`,
);
console.log('| measure | trials | median (min-max) |');
console.log('|---|---|---|');
for (const [m, n, v] of rows) console.log(`| ${m} | ${n} | ${v} |`);
console.log(`| without / with (medians) | | ${ratio(wo.med, w.med).toFixed(1)} |`);
console.log(
  `| without / anchor (medians): the pool's boot against the raw one | | ${ratio(wo.med, an.med).toFixed(2)} |`,
);
console.log(`| worker process peak RSS MiB (sampled every second, whole run) | | ${workerPeakMiB.toFixed(0)} |`);
const loads = [
  ...withS.map((t, i) => `with ${i + 1} ${t.load.toFixed(2)}`),
  ...withoutS.map((t, i) => `without ${i + 1} ${t.load.toFixed(2)}`),
  ...anchors.map((a, i) => `anchor ${i + 1} ${a.load.toFixed(2)}`),
];
console.log(`\n1-minute load before each trial: ${loads.join(', ')}.`);
if (withS.length > 0)
  console.log(
    `Goal with a spare ≤ 3 s median: ${median(withS.map((t) => t.s)) <= 3 ? 'MET' : 'NOT MET'} (${w.med.toFixed(2)} s).`,
  );
if (withS.length < TRIALS) console.log(`Only ${withS.length} of ${TRIALS} rounds ran.`);
process.exit(failure === undefined ? 0 : 1);
