/**
 * Guest boot on the real test hosts: seconds from a proxy VM's start to its first address and to
 * its first real CONNECT through the guest's Squid answering 200, for one or more images booted
 * in alternation (the image before a change and after it, say), N boots each.
 *
 * Each boot goes through the provider library as the workflow's activities do (test/e2e/boot.test.ts
 * is the same path): `createProxy` (overlay, seed from lib/kvm2/seed/cloud-config.ts, define,
 * start) on ep-h1, then `getProxy` every 250 ms until an address is read (lease or guest agent),
 * then a CONNECT through the guest's Squid over the host's SSH connection (`direct-tcpip`, as the
 * health probe does) every 250 ms (2 s timeout each) to a TCP target this bench serves on the
 * host's root-side address, until one answers 200. Beside that, from the same start, the health
 * monitor's own loop (activities/monitor.ts runMonitor: its folds, its 1 s polls while the proxy
 * boots, `healthyAfter` 2 passes) reads and probes the VM the same way until it turns Healthy
 * True: "start → Healthy" is what the workflow would record, less one workflow task. Start is
 * `createProxy` returning (the domain runs); the define and start before it are printed apart.
 * The guest's serial console is read every 250 ms and the first sight of each boot stage is
 * timed (GRUB, kernel, init, systemd, cloud-init, Squid, login), so a slow boot shows where its
 * time went; with `--analyze`, the last boot of each image also prints `systemd-analyze` and `blame` from the guest agent (guest-exec).
 * Then the proxy is deleted (no grace) and the next boot starts from a fresh overlay and seed.
 *
 *   flock /tmp/ep-integration.lock bash -c 'scripts/temporal up >/dev/null && test/hosts/testhost up 2 >/dev/null && \
 *     node bench/boot.ts --image BEFORE.qcow2 --image AFTER.qcow2 --boots 5 [--analyze]'
 *
 * `--record FILE` appends each boot as a JSON line; `node bench/boot.ts --table-from FILE...` prints
 * the table of recorded boots (several runs, each under its own lock hold, tabled together).
 * `--console-dir DIR` keeps each boot's serial console log. `--base PATH` boots on a base volume
 * already in the host's pool (another run's, verified there; left in place) instead of uploading
 * the one --image, so that nothing but the boot runs on the host meanwhile; its proxies then take
 * that base's entry (a proxy boots only its entry's base) under this run's owner UID. `--seed cloud-init` boots each image with
 * the seed an older provider wrote (no `ep-seed` file), so the image's fallback, cloud-init, applies
 * it: the same image timed on both paths. `--seed ep-seed --seed cloud-init` boots every image
 * with both seeds, alternating, so the two paths are compared in one run.
 *
 * Needs root and `test/hosts/testhost up` (the Temporal server is not used). Every wait is
 * bounded (--bound-s per boot); every proxy, base and marker volume of the run is removed on
 * every path, SIGINT and SIGTERM included.
 */
import { appendFile, copyFile, mkdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { basename, dirname } from 'node:path';
import { parseArgs } from 'node:util';
import {
  createProxy,
  deleteProxy,
  ensureImage,
  getProxy,
  markerVolumeName,
  proxyObjectNames,
  proxySeedSpec,
} from '../lib/kvm2/index.ts';
import type { EnsuredImage } from '../lib/kvm2/index.ts';
import type { ResolvedSquid } from '../contracts/squid.ts';
import { buildCloudInitSeed } from '../lib/kvm2/seed/cloud-config.ts';
import { buildSeedImage } from '../lib/kvm2/seed/seed-image.ts';
import { MockActivityEnvironment } from '@temporalio/testing';
import { runMonitor } from '../activities/monitor.ts';
import type { MonitorResult, MonitorState } from '../contracts/health.ts';
import type { ProbeOutcome, ResolvedProxy } from '../contracts/proxy.ts';
import { HealthSchema } from '../lib/config/schema.ts';
import { connectProbe } from '../lib/probe/connect.ts';
import { initialStatus, markBooting, markVmRunning } from '../workflows/proxy/status.ts';
import type { Link } from '../lib/hostlink/link.ts';
import { HostLinks } from '../lib/hostlink/pool.ts';
import { ImageMirror } from '../test/support/mirror.ts';
import { startTarget } from '../test/support/target.ts';
import type { Target } from '../test/support/target.ts';
import { hostPath, hostTarget, loadTestHosts, virsh } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';
import { HELP_OPTION, printUsageIfAsked, sleep } from './lib/run.ts';
import { fmtRange, ratio, spread } from './lib/stats.ts';

const USAGE =
  'node bench/boot.ts --image A.qcow2 [--image B.qcow2 ...] [--boots 5] [--host ep-h1] [--bound-s 240] [--analyze] [--seed ep-seed|cloud-init ...] [--vcpus 1 ...] [--console-dir DIR] [--record FILE] [--base PATH] | --table-from FILE...';
const { values } = parseArgs({
  options: {
    image: { type: 'string', multiple: true, default: [] },
    boots: { type: 'string', default: '5' },
    host: { type: 'string', default: 'ep-h1' },
    'bound-s': { type: 'string', default: '240' },
    analyze: { type: 'boolean', default: false },
    seed: { type: 'string', multiple: true, default: ['ep-seed'] },
    vcpus: { type: 'string', multiple: true, default: ['1'] },
    'console-dir': { type: 'string' },
    record: { type: 'string' },
    'table-from': { type: 'string', multiple: true, default: [] },
    base: { type: 'string' },
    ...HELP_OPTION,
  },
});
printUsageIfAsked(values, USAGE);
const IMAGES =
  values.image.length > 0 ? values.image : process.env['EP_E2E_IMAGE'] ? [process.env['EP_E2E_IMAGE']] : [];
if (IMAGES.length === 0 && values['table-from'].length === 0)
  throw new Error(`--image must name a proxy.qcow2 (with its .sha256 beside it): ${USAGE}`);
const BOOTS = Number(values.boots);
type SeedKind = 'ep-seed' | 'cloud-init';
const SEEDS = [...new Set(values.seed)] as SeedKind[];
for (const k of SEEDS) {
  if (k !== 'ep-seed' && k !== 'cloud-init')
    throw new Error(`--seed must be ep-seed or cloud-init, got ${JSON.stringify(k)}: ${USAGE}`);
}
const BOUND_MS = Number(values['bound-s']) * 1000;
const VCPUS = [...new Set(values.vcpus.map(Number))];
for (const [flag, v] of [
  ['boots', BOOTS],
  ['bound-s', BOUND_MS],
  ...VCPUS.map((n): [string, number] => ['vcpus', n]),
] as [string, number][]) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} must be a whole number of at least 1, got ${v}`);
}

const POLL_MS = 250;
const PROBE_TIMEOUT_MS = 2000;
const SQUID_PORT = 3128;
const run = Date.now().toString(36);
const owner = `bench-boot-${run}`;
const say = (line: string): void => void process.stdout.write(`boot: ${line}\n`);
const s = (ms: number): string => (ms / 1000).toFixed(1);

/**
 * Boot stages as the serial console shows them (the table's name, the per-boot line's short name,
 * the line); the first line matching each is timed.
 */
const STAGES: readonly [string, string, RegExp][] = [
  ['console: first output (BIOS, GRUB)', 'out', /\S/],
  ['GRUB: kernel read', 'grub-k', /ep-boot: grub loads the initrd/],
  ['GRUB: initrd read, kernel starts', 'grub-i', /ep-boot: grub starts the kernel/],
  ['kernel: Linux version (not in a quiet kernel)', 'linux', /Linux version \d/],
  ['initramfs: the first DHCP discover', 'dhcp', /ep-initrd: eth0 up, the first DHCP discover/],
  ['systemd: Welcome', 'systemd', /Welcome to /],
  ['ep-seed: seed applied (no cloud-init)', 'ep-seed', /ep-seed: applied/],
  ['cloud-init network stage starts', 'ci-net', /running 'init'/],
  [
    'cloud-init network stage done',
    'ci-net-done',
    /Finished.*cloud-init\.s|Reached target.*cloud-config\.target|Cloud-config availability/,
  ],
  ['network-online.target', 'online', /Reached target.*network-online/],
  ['squid.service started', 'squid', /Started.*squid\.service/],
  ['cloud-config starts', 'ci-config', /running 'modules:config'/],
  ['login prompt', 'login', /login:/],
];

interface Boot {
  image: number;
  /** The seed it booted with (absent in records from before --seed could be given twice: `ep-seed`, or the run's one --seed). */
  seed?: SeedKind;
  /** Its vCPUs (absent in records from before --vcpus could be given twice: the run's one --vcpus). */
  vcpus?: number;
  createMs: number;
  addressMs: number;
  healthyMs: number;
  /** Start → Healthy True by the health monitor's loop (absent in records from before it was timed). */
  monitorHealthyMs?: number;
  source: string;
  probes: number;
  load: number;
  stages: (number | undefined)[];
  /** Why the boot did not reach a 200 within --bound-s (its times are then left out of the medians). */
  failed?: string;
}

let host: TestHost;
let links: HostLinks | undefined;
let health: Link | undefined;
let mirror: ImageMirror | undefined;
let target: Target | undefined;
/** With --base, the entry whose verified base it is (`base-<entry>-<key>.<format>`): a proxy boots only its entry's base. */
const baseEntry =
  values.base === undefined ? undefined : /^base-(.+)-[^-]+\.[a-z0-9]+$/.exec(basename(values.base))?.[1];
if (values.base !== undefined && baseEntry === undefined)
  throw new Error(`--base must name a base volume (base-<entry>-<key>.<format>), got ${values.base}`);
const bases: { entry: string; image: EnsuredImage | undefined }[] = IMAGES.map((_, i) => ({
  entry: baseEntry ?? `bb${run}${i}`,
  image: undefined,
}));
const live = new Set<{ entry: string; name: string }>();

async function upload(i: number, path: string): Promise<void> {
  const bytes = await readFile(path);
  const sha256 = (await readFile(`${path}.sha256`, 'utf8')).split(/\s+/)[0]!;
  const url = mirror!.serve(`/images/${i}.qcow2`, bytes);
  bases[i]!.image = await ensureImage({
    entry: bases[i]!.entry,
    pool: host.pool,
    image: { key: 'proxy', url, sha256, format: 'qcow2' },
    links: links!,
    timeouts: { rpcMs: 30_000, downloadHeadersMs: 10_000, downloadBodyIdleMs: 60_000, downloadTotalMs: 600_000 },
  });
  say(`image ${i}: ${path} (${(bytes.length / 2 ** 20).toFixed(0)} MiB, sha256 ${sha256.slice(0, 16)}…) uploaded`);
}

const squidOf = (h: TestHost): ResolvedSquid => ({
  port: SQUID_PORT,
  allowedClientCidrs: [h.networkCidr],
  egress: {
    mode: 'enforce',
    allowDestinations: [`${h.rootSideAddress}/32`],
    denyDestinations: [],
    allowPorts: ['80', '443', '1024-65535'],
  },
});

/** One boot of image `i` as proxy `name`; deletes it afterwards whatever happened. */
async function boot(i: number, seedKind: SeedKind, vcpus: number, name: string, analyze: boolean): Promise<Boot> {
  const { entry, image } = bases[i]!;
  const names = proxyObjectNames({ ownerUid: owner, entry, name });
  const load = loadavg()[0]!;
  const t0 = performance.now();
  const obj = { entry, name };
  live.add(obj);
  try {
    const created = await createProxy({
      links: links!,
      ownerUid: owner,
      entry,
      name,
      pool: host.pool,
      network: host.network,
      domainType: host.domainType,
      vcpus,
      memoryMiB: 512,
      diskGiB: 4,
      base: { path: image!.path, format: 'qcow2' },
      squid: squidOf(host),
      createdAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      reserveBytes: 64 * 1024 * 1024,
      rpcTimeoutMs: 60_000,
    });
    if (seedKind === 'cloud-init') {
      // The seed an older provider wrote (no ep-seed file): stopped while still in the BIOS, the
      // seed replaced, the console log emptied, started again; the image falls back to cloud-init.
      await virsh(host, 'destroy', names.domain);
      const { epSeed: _dropped, ...withoutEpSeed } = buildCloudInitSeed(
        proxySeedSpec({ ownerUid: owner, entry, name, squid: squidOf(host) }),
      );
      await writeFile(hostPath(host, created.seedPath), buildSeedImage(withoutEpSeed));
      await truncate(hostPath(host, names.consoleLogPath), 0).catch(() => undefined);
      await virsh(host, 'start', names.domain);
    }
    const start = performance.now();
    const deadline = start + BOUND_MS;
    const stages: (number | undefined)[] = STAGES.map(() => undefined);
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const text = await readFile(hostPath(host, names.consoleLogPath), 'utf8').catch(() => '');
        const at = performance.now() - start;
        STAGES.forEach(([, , re], k) => {
          if (stages[k] === undefined && re.test(text)) stages[k] = at;
        });
        await sleep(POLL_MS);
      }
    })();
    let addressAt = NaN;
    let probes = 0;
    let source = '';
    let first200 = NaN;
    const monitor = monitorHealthy(entry, name, start, deadline);
    const result = (failed?: string, monitorHealthyMs?: number): Boot => ({
      image: i,
      seed: seedKind,
      vcpus,
      createMs: start - t0,
      addressMs: addressAt - start,
      healthyMs: failed ? NaN : first200,
      ...(monitorHealthyMs === undefined ? {} : { monitorHealthyMs }),
      source,
      probes,
      load,
      stages,
      ...(failed ? { failed } : {}),
    });
    try {
      let ip: string | undefined;
      while (ip === undefined) {
        if (performance.now() > deadline) return result(`no address within ${s(BOUND_MS)} s`);
        const st = await getProxy({ links: links!, ownerUid: owner, entry, name, network: host.network }).catch(
          () => undefined,
        );
        if (st?.state === 'Running' && st.address) ({ ip, source = '?' } = st.address);
        else await sleep(POLL_MS);
      }
      addressAt = performance.now();
      for (;;) {
        if (performance.now() > deadline) return result(`no 200 through Squid within ${s(BOUND_MS)} s`);
        probes++;
        const t = performance.now();
        const ok = (await probeOnce(ip)).ok;
        if (ok) break;
        await sleep(Math.max(0, POLL_MS - (performance.now() - t)));
      }
      first200 = performance.now() - start;
      const healthyAt = await monitor;
      if (typeof healthyAt === 'string') return result(healthyAt);
      const done = result(undefined, healthyAt);
      await sleep(POLL_MS); // the console's last lines
      watching = false;
      await watcher;
      if (analyze) await printAnalysis(names.domain);
      return done;
    } finally {
      watching = false;
      await watcher;
      await monitor.catch(() => undefined);
      const dir = values['console-dir'];
      if (dir) {
        await copyFile(hostPath(host, names.consoleLogPath), `${dir}/image${i}-${name}.console.log`).catch(
          (err: unknown) => say(`console copy: ${String(err)}`),
        );
      }
    }
  } finally {
    await deleteProxy({ links: links!, ownerUid: owner, entry, name, pool: host.pool, shutdownGraceMs: 0 }).catch(
      (err: unknown) => say(`cleanup: deleteProxy ${entry}/${name}: ${String(err)}`),
    );
    live.delete(obj);
  }
}

/** One CONNECT through the guest's Squid to the bench's target, over the host's SSH link. */
async function probeOnce(ip: string): Promise<ProbeOutcome> {
  const t = performance.now();
  try {
    const stream = await health!.session.openTcp(ip, SQUID_PORT, { timeoutMs: PROBE_TIMEOUT_MS });
    const r = await connectProbe(stream, {
      target: `${host.rootSideAddress}:${target!.port}`,
      timeoutMs: PROBE_TIMEOUT_MS,
    });
    if (r.status === 200) return { ok: true, latencyMs: performance.now() - t };
    return { ok: false, code: 'PROBE_STATUS', message: `status ${r.status}` };
  } catch (err) {
    return { ok: false, code: 'PROBE_FAILED', message: String(err) };
  }
}

/**
 * Runs the health monitor's loop (activities/monitor.ts) on proxy `name` from its start, as the
 * workflow would (Running, Healthy Unknown (Booting); each return folded in and the loop run again),
 * with the bench's own read and probe; resolves to ms from `start` to Healthy True, or why not.
 */
async function monitorHealthy(entry: string, name: string, start: number, deadline: number): Promise<number | string> {
  const at = new Date().toISOString();
  const proxy = {
    name,
    entry,
    health: HealthSchema.parse({ target: `${host.rootSideAddress}:${target!.port}`, probeTimeoutMs: PROBE_TIMEOUT_MS }),
    timeouts: { rpcMs: 30_000, bootMs: BOUND_MS, shutdownGraceMs: 0, downloadTotalMs: 600_000 },
  } as ResolvedProxy;
  let state: MonitorState = {
    status: markBooting(
      markVmRunning({ ...initialStatus({ name, entry, imageKey: 'proxy' }, at), state: 'Running' }, at),
      at,
    ),
    missedPolls: 0,
    addressedOnce: false,
    polls: 0,
  };
  const env = new MockActivityEnvironment();
  const endsAt = Date.now() + Math.max(0, deadline - performance.now());
  const io = {
    read: async () => {
      const st = await getProxy({ links: links!, ownerUid: owner, entry, name, network: host.network });
      return { state: st.state, ip: st.address?.ip, source: st.address?.source };
    },
    probe: (ip: string) => probeOnce(ip),
    now: () => Date.now(),
    wait: (ms: number) => sleep(Math.min(ms, Math.max(0, deadline - performance.now()))),
    heartbeat: () => undefined,
    resumed: () => undefined,
  };
  for (let k = 0; k < 100; k++) {
    if (performance.now() > deadline) return `the monitor saw no Healthy within ${s(BOUND_MS)} s`;
    const r = await env.run<[], MonitorResult, () => Promise<MonitorResult>>(() =>
      runMonitor({ proxy, host: host.name, state, bootDeadlineMs: endsAt, checkpointAtMs: endsAt }, io),
    );
    state = r.state;
    if (state.status.conditions.Healthy.status === 'True') return performance.now() - start;
    if (r.reason !== 'Transition') return `the monitor returned ${r.reason}`;
  }
  return 'the monitor returned 100 times without Healthy';
}

/** `systemd-analyze` and the slowest units, through the guest agent (guest-exec). */
async function printAnalysis(domain: string): Promise<void> {
  const exec = async (argv: string[]): Promise<string> => {
    const started = await virsh(
      host,
      'qemu-agent-command',
      domain,
      JSON.stringify({
        execute: 'guest-exec',
        arguments: { path: argv[0], arg: argv.slice(1), 'capture-output': true },
      }),
    );
    const pid = (JSON.parse(started) as { return: { pid: number } }).return.pid;
    for (let k = 0; k < 40; k++) {
      const out = await virsh(
        host,
        'qemu-agent-command',
        domain,
        JSON.stringify({ execute: 'guest-exec-status', arguments: { pid } }),
      );
      const st = (JSON.parse(out) as { return: { exited: boolean; 'out-data'?: string; 'err-data'?: string } }).return;
      const text = (b64: string | undefined): string => Buffer.from(b64 ?? '', 'base64').toString('utf8');
      if (st.exited) return text(st['out-data']) + text(st['err-data']);
      await sleep(500);
    }
    return '(still running after 20 s)';
  };
  try {
    // The agent starts after Squid (the image orders it so): wait for it, bounded.
    for (let k = 0; ; k++) {
      const ok = await virsh(host, 'qemu-agent-command', domain, '{"execute":"guest-ping"}').then(
        () => true,
        () => false,
      );
      if (ok) break;
      if (k >= 60) throw new Error('the guest agent did not answer guest-ping within 30 s');
      await sleep(500);
    }
    for (const argv of [
      ['/usr/bin/systemd-analyze', 'time'],
      ['/bin/sh', '-c', 'systemd-analyze blame --no-pager | head -n 15'],
      ['/usr/bin/systemd-analyze', 'critical-chain', '--no-pager', 'squid.service'],
      // The kernel's own milestones: the initramfs starts, the root is mounted, systemd runs.
      [
        '/bin/sh',
        '-c',
        'dmesg | grep -E "Run /init|Run /sbin/init|EXT4-fs \\(vda1\\)|systemd\\[1\\]: systemd |Freeing unused kernel|virtio_blk|virtio_net" | head -n 12',
      ],
      // The slowest initcalls, in µs, when the kernel ran with initcall_debug (nothing otherwise).
      [
        '/bin/sh',
        '-c',
        'dmesg | sed -n "s/.*initcall \\([^ ]*\\) returned .* after \\([0-9]*\\) usecs/\\2 \\1/p" | sort -rn | head -n 15',
      ],
      // When each unit on the way to the first CONNECT was queued, exec'd and active (monotonic
      // µs since the kernel started), and the guest's own log lines for the seed and the lease.
      [
        '/bin/sh',
        '-c',
        'for u in ep-seed.service cloud-init.service ifup@eth0.service systemd-networkd.service systemd-resolved.service ep-net.service ep-names.target squid.service; do systemctl show -p Id -p InactiveExitTimestampMonotonic -p ExecMainStartTimestampMonotonic -p ActiveEnterTimestampMonotonic "$u" | tr "\\n" " "; echo; done; journalctl -b -o short-monotonic --no-pager | grep -E "DHCPACK|bound to|DHCPv4 address|ep-seed:|ep-net:|udhcpc: lease" || true',
      ],
      // Squid's own start-up, from its log.
      ['/bin/sh', '-c', 'journalctl -b -u squid.service -o short-monotonic --no-pager | head -n 25'],
      // Squid started once (no restart, no reconfigure after cloud-init wrote its configuration).
      [
        '/bin/sh',
        '-c',
        'systemctl show -p NRestarts -p ExecMainStartTimestamp squid.service; echo "reconfigures: $(journalctl -b -u squid.service --no-pager | grep -ci reconfigur)"',
      ],
    ]) {
      say(`guest: ${argv.join(' ')}`);
      for (const line of (await exec(argv)).trimEnd().split('\n')) say(`  ${line}`);
    }
  } catch (err) {
    say(`guest-exec failed (the agent is not up, or refuses guest-exec): ${String(err)}`);
  }
}

async function cleanUp(): Promise<void> {
  for (const p of [...live]) {
    await deleteProxy({ links: links!, ownerUid: owner, ...p, pool: host.pool, shutdownGraceMs: 0 }).catch(() => {});
  }
  // Another run's base (--base) stays: that run removes it.
  if (links && values.base === undefined) {
    const names = bases.flatMap((b) => [`base-${b.entry}-proxy.qcow2`, markerVolumeName(b.entry, 'proxy', 'qcow2')]);
    await links
      .call(async (c, call) => {
        const pool = await c.storagePoolLookupByName(host.pool, call);
        for (const vol of await c.storagePoolListAllVolumes(pool, call)) {
          if (names.includes(vol.name)) await c.storageVolDelete(vol, 0, call);
        }
      })
      .catch((err: unknown) => say(`cleanup: base volumes: ${String(err)}`));
  }
  await health?.close().catch(() => {});
  links?.close();
  await target?.close();
  await mirror?.close();
}

async function main(): Promise<void> {
  const found = loadTestHosts().find((h) => h.name === values.host);
  if (!found) throw new Error(`--host ${values.host}: no such test host (test/hosts/testhost up 2)`);
  host = found;
  links = new HostLinks(hostTarget(host), { defaultTimeoutMs: 30_000 });
  mirror = await ImageMirror.start();
  target = await startTarget(host.rootSideAddress);
  if (values.base !== undefined) {
    // Another run's verified base of this image (bench/boot-product.ts's): no upload, left in place.
    if (IMAGES.length !== 1) throw new Error(`--base goes with one --image (the image it holds): ${USAGE}`);
    const path = values.base;
    bases[0]!.image = {
      volumeName: basename(path),
      path,
      format: 'qcow2',
      sizeBytes: 0,
      sha256: '',
      url: '',
      cached: true,
    };
    say(`image 0: ${IMAGES[0]} as the base ${path} already on ${host.name}`);
  } else for (const [i, path] of IMAGES.entries()) await upload(i, path);
  health = await links.dedicated('health');
  if (values['console-dir']) await mkdir(values['console-dir'], { recursive: true });
  const boots: Boot[] = [];
  for (let k = 0; k < BOOTS; k++) {
    for (const [j, seedKind] of SEEDS.entries())
      for (const vcpus of VCPUS)
        for (let i = 0; i < IMAGES.length; i++) {
          const b = await boot(i, seedKind, vcpus, `b${k}s${j}c${vcpus}`, values.analyze && k === BOOTS - 1);
          boots.push(b);
          say(
            `image ${i} (${seedKind} seed, ${vcpus} vCPU) boot ${k + 1}/${BOOTS} (load ${b.load.toFixed(2)})${b.failed ? ` FAILED: ${b.failed}` : ''}: define+start ${s(b.createMs)} s, ` +
              `start → address ${s(b.addressMs)} s (${b.source}), → 200 ${s(b.healthyMs)} s (${b.probes} probes), → Healthy ${b.monitorHealthyMs === undefined ? '—' : s(b.monitorHealthyMs)} s; ` +
              `console: ${STAGES.map(([, what], j) => `${what} ${b.stages[j] === undefined ? '—' : s(b.stages[j])}`).join(', ')}`,
          );
          if (values.record) {
            const rec: BootRecord = { ...b, imagePath: IMAGES[i]!, host: host.name, at: new Date().toISOString() };
            await appendFile(values.record, `${JSON.stringify(rec)}\n`);
          }
        }
  }
  say(
    `host ${host.name} (${host.domainType}), ${VCPUS.join(' and ')} vCPU, ${SEEDS.join(' and ')} seed, ${BOOTS} boots per image, seed and vCPU count, alternating`,
  );
  printTable(boots.map((b) => ({ ...b, imagePath: IMAGES[b.image]! })));
}

/** A boot as --record writes it (one JSON line), to be tabled with others by --table-from. */
interface BootRecord extends Boot {
  imagePath: string;
  host?: string;
  at?: string;
}

/** The table of boots by image (in the order the images first appear): seconds, median (min-max). */
function printTable(boots: readonly BootRecord[]): void {
  // One column per image, seed and vCPU count (records from before the seed or the vCPUs were
  // recorded: without them).
  const column = (b: BootRecord): string =>
    [b.imagePath, b.seed ?? '', b.vcpus === undefined ? '' : String(b.vcpus)].join('\u0000');
  const images = [...new Set(boots.map(column))];
  const of = (i: number): BootRecord[] => boots.filter((b) => column(b) === images[i]);
  const rows: [string, (b: Boot) => number | undefined][] = [
    ['define + start (createProxy)', (b) => b.createMs],
    ['start → address', (b) => b.addressMs],
    ['address → CONNECT 200', (b) => b.healthyMs - b.addressMs],
    ['**start → CONNECT 200**', (b) => b.healthyMs],
    ["**start → Healthy** (the monitor's loop)", (b) => b.monitorHealthyMs],
    ...STAGES.map(([what], j): [string, (b: Boot) => number | undefined] => [`console: ${what}`, (b) => b.stages[j]]),
    ['1-minute load before the boot', (b) => b.load * 1000],
  ];
  const col = (i: number): string => {
    const [path, seedKind, vcpus] = images[i]!.split('\u0000');
    return `${basename(dirname(path!))}/${basename(path!)}${seedKind ? `, ${seedKind} seed` : ''}${vcpus ? `, ${vcpus} vCPU` : ''}`;
  };
  process.stdout.write(`\nseconds, median (min-max) of the boots that reached a 200\n`);
  process.stdout.write(`\n| measure | ${images.map((_, i) => `${i}: ${col(i)}`).join(' | ')} |\n`);
  process.stdout.write(`|---|${images.map(() => '---|').join('')}\n`);
  process.stdout.write(
    `| boots (reached a 200 / all) | ${images.map((_, i) => `${of(i).filter((b) => !b.failed).length} / ${of(i).length}`).join(' | ')} |\n`,
  );
  for (const [what, f] of rows) {
    const cells = images.map((_, i) => {
      const v = of(i)
        .filter((b) => !b.failed)
        .map((b) => f(b));
      const sp = spread(v.map((x) => (x === undefined || x === null ? undefined : x / 1000)));
      return Number.isNaN(sp.med) ? '—' : fmtRange(sp, what.startsWith('1-minute') ? 2 : 1);
    });
    process.stdout.write(`| ${what} | ${cells.join(' | ')} |\n`);
  }
  const med = (i: number): number => spread(of(i).map((b) => (b.failed ? undefined : b.healthyMs))).med;
  for (let i = 1; i < images.length; i++)
    process.stdout.write(`\nstart → 200, column 0 / column ${i} (medians): ${ratio(med(0), med(i)).toFixed(2)}\n`);
}

const stop = (sig: string): void => {
  say(`${sig}: cleaning up`);
  void cleanUp().finally(() => process.exit(130));
};
process.once('SIGINT', () => stop('SIGINT'));
process.once('SIGTERM', () => stop('SIGTERM'));
if (values['table-from'].length > 0) {
  const lines = (await Promise.all(values['table-from'].map((f) => readFile(f, 'utf8')))).join('\n');
  printTable(
    lines
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as BootRecord),
  );
} else {
  try {
    await main();
  } finally {
    await cleanUp();
  }
}
