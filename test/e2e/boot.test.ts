/**
 * End to end on a real hypervisor, through the provider library only (no Temporal): the test
 * image (test/e2e/image/build) is served from a loopback mirror, ensureImage uploads it onto test
 * host ep-h1, createProxy boots it under the host's domain type (TCG here), getProxy reads its
 * address, and the real health probe sends CONNECT through the guest's Squid, over the host's SSH
 * connection, to a TCP target this test serves on the host's root-side address, so Squid in the
 * VM really connects out. Then deleteProxy removes the domain, overlay and seed, and the base
 * stays. On that NAT guest the probe activity itself (health.via auto) goes through the host's SSH
 * and logs why (its address would leave by the default route). Then, through the workflows (a
 * worker process on a task queue of its own, the same entry and base, the host's routed network),
 * a proxy whose entry has `health.egressIpUrl` on an HTTP server of this test (the host's
 * root-side address, answering each caller's address): the worker logs that it probes it directly
 * (the route to the guest goes into the host's veth), its status query and the API's discovery
 * show as `exitIp` the address that server saw (the guest's own: no NAT on a routed network), and
 * the `curl` line `egressctl proxy up` prints for it runs from this machine. Needs the Temporal
 * dev server (scripts/temporal up). Each phase's time is printed; every wait is bounded. Traffic
 * goes only to loopback and to the test host's addresses: a guest address is sent to only after
 * `ip route get` names the host's veth.
 *
 *   test/e2e/run                      (builds or reuses the image, then runs this file)
 *   EP_E2E_IMAGE=/path/proxy.qcow2 node --test test/e2e/boot.test.ts
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  createProxy,
  deleteProxy,
  ensureImage,
  getProxy,
  listProxies,
  markerVolumeName,
  proxyObjectNames,
} from '../../lib/kvm2/index.ts';
import type { CreateProxyInput, EnsuredImage } from '../../lib/kvm2/index.ts';
import { errorKind } from '../../lib/errors.ts';
import type { ResolvedSquid } from '../../contracts/squid.ts';
import { connectProbe } from '../../lib/probe/connect.ts';
import { openDirectTcp } from '../../lib/probe/direct.ts';
import { reachesDirectly } from '../../lib/probe/route.ts';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createProxyActivities } from '../../activities/proxy.ts';
import { HostRegistry } from '../../activities/hosts.ts';
import { loadProvidersFile } from '../../lib/config/index.ts';
import { curlLine } from '../../client/proxy-up.ts';
import type { Link } from '../../lib/hostlink/link.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { sleep, within } from '../support/bounded.ts';
import { ImageMirror } from '../support/mirror.ts';
import { hostPath, hostTarget, loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';
import { startTarget } from '../support/target.ts';
import type { Target } from '../support/target.ts';
import type { Client } from '@temporalio/client';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { temporalStore } from '../../client/store.ts';
import {
  PROXY_DELETE_UPDATE,
  PROXY_STATUS_QUERY,
  PROXY_WORKFLOW_TYPE,
  proxyWorkflowId,
} from '../../contracts/proxy.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import type { WorkerProcess } from '../support/fleet.ts';
import { connectClient, uniqueId } from '../support/temporal.ts';

/** The console log's reads while ep-seed's and ep-net's lines are awaited (500 ms apart). */
const CONSOLE_READS = 120;
const here = dirname(fileURLToPath(import.meta.url));
const run = Date.now().toString(36);
const entry = `e2e${run}`;
const owner = `e2e-${run}`;
const proxyName = 'boot';
const SQUID_PORT = 3128;
const BUILD_BOUND_MS = 30 * 60_000;
const ADDRESS_BOUND_MS = 240_000;
const HEALTHY_BOUND_MS = 180_000;
const AGENT_BOUND_MS = 180_000;
const PROBE_TIMEOUT_MS = 10_000;
/** The workflow-run proxy: start to Healthy with its exit IP (a TCG boot on a shared machine). */
const WORKFLOW_HEALTHY_BOUND_MS = 8 * 60_000;
/** Discovery lists it once the visibility store has its search attributes. */
const DISCOVERY_BOUND_MS = 60_000;
const exitProxyName = 'exit';

const pexec = promisify(execFile);

/** The interface this machine's kernel picks for `addr` (`ip route get`: a lookup, nothing is sent). */
async function routeDev(addr: string): Promise<string | undefined> {
  const { stdout } = await pexec('ip', ['-j', 'route', 'get', addr], { timeout: 5000 });
  return (JSON.parse(stdout) as { dev?: string }[])[0]?.dev;
}

/** Seconds with one decimal, for the timing lines. */
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const say = (line: string): void => void process.stdout.write(`e2e: ${line}\n`);

/** Runs the image builder (or takes EP_E2E_IMAGE); resolves to the image's path. */
async function buildImage(): Promise<{ path: string; ms: number }> {
  const t0 = performance.now();
  const given = process.env['EP_E2E_IMAGE'];
  // test/e2e/run builds first and passes the path and the builder's time.
  if (given) return { path: given, ms: Number(process.env['EP_E2E_IMAGE_SECONDS'] ?? 0) * 1000 };
  const child = spawn(join(here, 'image/build'), [], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, CI: 'true' },
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  const code = await within(
    new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    }),
    BUILD_BOUND_MS,
    'test/e2e/image/build',
  ).catch((err: unknown) => {
    child.kill('SIGTERM');
    throw err;
  });
  assert.equal(code, 0, `test/e2e/image/build exited with ${String(code)}`);
  const path = out.trim().split('\n').pop() ?? '';
  assert.match(path, /\.qcow2$/, `the builder's last line is the image path, got ${JSON.stringify(out)}`);
  return { path, ms: performance.now() - t0 };
}

describe('a proxy VM boots from the test image and its Squid tunnels a CONNECT', { timeout: 45 * 60_000 }, () => {
  let host: TestHost;
  let links: HostLinks;
  let mirror: ImageMirror;
  let target: Target;
  let health: Link | undefined;
  let image: EnsuredImage | undefined;
  let guestIp: string | undefined;
  let addressAt = 0;
  /** The image on the mirror (the workflow part's entry names the same URL and digest). */
  let imageUrl = '';
  let imageSha = '';
  let client: Client | undefined;
  let worker: WorkerProcess | undefined;
  let tmp: string | undefined;
  let exitStarted = false;
  const timings: [string, string][] = [];
  const names = proxyObjectNames({ ownerUid: owner, entry, name: proxyName });

  const poolVolumes = (): Promise<string[]> =>
    links.call(async (c, call) =>
      (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, call), call)).map((v) => v.name),
    );

  before(async () => {
    host = loadTestHosts().find((h) => h.name === 'ep-h1')!;
    assert.ok(host, 'test host ep-h1 is described (test/hosts/testhost up)');
    assert.equal(typeof host.rootSideAddress, 'string', 'ep-h1 descriptor names its rootSideAddress');
    links = new HostLinks(hostTarget(host), { defaultTimeoutMs: 30_000 });
    mirror = await ImageMirror.start();
    target = await startTarget(host.rootSideAddress);
  });

  after(async () => {
    await health?.close().catch(() => {});
    if (exitStarted && client) {
      const handle = client.workflow.getHandle(proxyWorkflowId(entry, exitProxyName));
      const d = await handle.describe().catch(() => undefined);
      if (d?.status.name === 'RUNNING') {
        await within(handle.executeUpdate(PROXY_DELETE_UPDATE), 30_000, 'delete the exit proxy').catch((err: unknown) =>
          say(`cleanup: delete ${exitProxyName}: ${String(err)}`),
        );
        await within(handle.result(), 180_000, 'the exit proxy to end').catch((err: unknown) =>
          say(`cleanup: ${exitProxyName}: ${String(err)}`),
        );
      }
    }
    await worker?.stop().catch(() => worker?.kill());
    await client?.connection.close().catch(() => {});
    if (tmp) await rm(tmp, { recursive: true, force: true });
    // Everything this run made goes, whatever happened above: the proxy, then base and marker.
    await deleteProxy({ links, ownerUid: owner, entry, name: proxyName, pool: host.pool }).catch((err: unknown) =>
      say(`cleanup: deleteProxy: ${String(err)}`),
    );
    // A define that overran its budget may still complete in libvirtd afterwards: sweep by mark.
    await sleep(1000);
    for (const p of await listProxies(links, { entry, ownerUid: owner }).catch(() => [])) {
      await deleteProxy({ links, ownerUid: owner, entry, name: p.proxyName, pool: host.pool }).catch((err: unknown) =>
        say(`cleanup: sweep ${p.domain}: ${String(err)}`),
      );
    }
    const leftovers = [`base-${entry}-proxy.qcow2`, markerVolumeName(entry, 'proxy', 'qcow2')];
    await links
      .call(async (c, call) => {
        const pool = await c.storagePoolLookupByName(host.pool, call);
        for (const vol of await c.storagePoolListAllVolumes(pool, call)) {
          if (leftovers.includes(vol.name)) await c.storageVolDelete(vol, 0, call);
        }
      })
      .catch((err: unknown) => say(`cleanup: base volumes: ${String(err)}`));
    links.close();
    await target.close();
    await mirror.close();
    if (timings.length > 0) {
      say('timings:');
      for (const [what, value] of timings) say(`  ${what.padEnd(24)} ${value}`);
    }
  });

  it('the image is built or reused, fetched once from the mirror, verified and uploaded', async () => {
    const built = await buildImage();
    const bytes = await readFile(built.path);
    const sha256 = (await readFile(`${built.path}.sha256`, 'utf8')).split(/\s+/)[0]!;
    timings.push([built.ms < 5000 ? 'image (cache hit)' : 'image build', secs(built.ms)]);
    timings.push(['image size', `${(bytes.length / 2 ** 20).toFixed(0)} MiB`]);
    const url = mirror.serve('/images/proxy.qcow2', bytes);
    imageUrl = url;
    imageSha = sha256;
    const t0 = performance.now();
    let lastSaid = 0;
    image = await within(
      ensureImage({
        entry,
        pool: host.pool,
        image: { key: 'proxy', url, sha256, format: 'qcow2' },
        links,
        timeouts: { rpcMs: 30_000, downloadHeadersMs: 10_000, downloadBodyIdleMs: 60_000, downloadTotalMs: 600_000 },
        onProgress: (p) => {
          if (performance.now() - lastSaid < 5000) return;
          lastSaid = performance.now();
          say(`upload ${(p.bytes / 2 ** 20).toFixed(0)}/${(p.totalBytes / 2 ** 20).toFixed(0)} MiB`);
        },
      }),
      660_000,
      'ensureImage',
    );
    const ms = performance.now() - t0;
    timings.push(['fetch + upload', `${secs(ms)} (${(((bytes.length / 2 ** 20) * 1000) / ms).toFixed(0)} MiB/s)`]);
    assert.equal(image.cached, false);
    assert.equal(image.sha256, sha256);
    assert.equal(image.sizeBytes, bytes.length);
    assert.equal(mirror.requests('/images/proxy.qcow2'), 1);
  });

  /**
   * The resolved settings a workflow would pass: the policy refuses private destinations, so the
   * target on the host's root-side (private) address is allowed explicitly, as an operator's
   * entry allows its health target.
   */
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
  it('the VM starts and its guest reports an IPv4 address', async () => {
    assert.ok(image, 'the image step passed');
    const input: CreateProxyInput = {
      links,
      ownerUid: owner,
      entry,
      name: proxyName,
      pool: host.pool,
      network: host.network,
      domainType: host.domainType,
      vcpus: 1,
      memoryMiB: 512,
      diskGiB: 4,
      base: { path: image.path, format: 'qcow2' },
      // sshd inside the host opens the probe's channel from the NAT bridge's address.
      squid: squidOf(host),
      createdAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      reserveBytes: 64 * 1024 * 1024,
      rpcTimeoutMs: 60_000,
    };
    const t0 = performance.now();
    // createProxy converges when re-run (as the workflow's retries do): a Transient failure on
    // the shared, busy host (an overlong call) is retried a bounded number of times.
    let created;
    for (let attempt = 1; ; attempt++) {
      try {
        created = await createProxy(input);
        break;
      } catch (err) {
        if (attempt >= 3 || errorKind(err) !== 'Transient') throw err;
        say(`createProxy attempt ${attempt}: ${String(err)}; retrying`);
        await sleep(2000);
      }
    }
    assert.equal(created.domain, names.domain);
    const startedAt = performance.now();
    timings.push(['create (define+start)', secs(startedAt - t0)]);
    const listed = await listProxies(links, { entry, ownerUid: owner });
    assert.deepEqual(
      listed.map((p) => p.proxyName),
      [proxyName],
    );
    const deadline = performance.now() + ADDRESS_BOUND_MS;
    let ip: string | undefined;
    let last = '';
    while (ip === undefined) {
      if (performance.now() > deadline) {
        say(`console tail:\n${await consoleTail()}`);
        assert.fail(`no address within ${ADDRESS_BOUND_MS} ms; last reading ${last}`);
      }
      await sleep(2000);
      const status = await getProxy({ links, ownerUid: owner, entry, name: proxyName, network: host.network }).catch(
        (err: unknown) => ({ state: 'Error', error: String(err) }) as const,
      );
      last = JSON.stringify(status);
      assert.notEqual(status.state, 'Missing');
      if (status.state === 'Running' && 'address' in status) ip = status.address?.ip;
      if (ip !== undefined) say(`address ${ip} from ${status.state === 'Running' ? status.address?.source : '?'}`);
    }
    addressAt = performance.now();
    guestIp = ip;
    timings.push(['start to address', secs(addressAt - startedAt)]);
  });

  it("a CONNECT through the guest's Squid reaches the test's target with 200", async () => {
    assert.ok(guestIp, 'the address step passed');
    health = await links.dedicated('health');
    const connectTo = `${host.rootSideAddress}:${target.port}`;
    const deadline = performance.now() + HEALTHY_BOUND_MS;
    let lastError = '';
    let result: { status: number; latencyMs: number } | undefined;
    let attempts = 0;
    while (!result) {
      if (performance.now() > deadline) {
        say(`console tail:\n${await consoleTail()}`);
        assert.fail(`no 200 from Squid within ${HEALTHY_BOUND_MS} ms after ${attempts} probes; last: ${lastError}`);
      }
      attempts++;
      try {
        const stream = await health.session.openTcp(guestIp, SQUID_PORT, { timeoutMs: PROBE_TIMEOUT_MS });
        result = await connectProbe(stream, { target: connectTo, timeoutMs: PROBE_TIMEOUT_MS });
      } catch (err) {
        lastError = err instanceof Error ? err.message : String(err);
        await sleep(2000);
      }
    }
    timings.push(['address to 200', `${secs(performance.now() - addressAt)} (${attempts} probes)`]);
    timings.push(['probe latency', `${result.latencyMs.toFixed(0)} ms`]);
    assert.equal(result.status, 200);
    // Squid in the guest connected out; the host's NAT shows it as the host's own address.
    assert.ok(target.peers.length >= 1, 'the target saw a connection');
    assert.equal(target.peers.at(-1), host.address);
  });

  it("the image applied the seed itself (ep-seed) and skipped cloud-init's stages", async () => {
    assert.ok(guestIp, 'the address step passed');
    // The console log is the guest's serial console, kept on the host. Without ep-seed (a seed
    // from an older provider, or a reader that gave up) cloud-init's network stage would have
    // configured Squid instead, 20-30 s later under TCG (docs/benchmarks.md, "Guest boot").
    // ep-seed's and ep-net's lines reach the console through the journal, whose start may follow
    // Squid's (the first CONNECT): the log is read every 500 ms until both are there, at most 60 s.
    const consoleLog = hostPath(host, names.consoleLogPath);
    let consoleText = '';
    for (let i = 0; i < CONSOLE_READS; i++) {
      consoleText = await readFile(consoleLog, 'utf8');
      if (consoleText.includes('ep-seed: applied: ') && consoleText.includes('ep-net: bound: ')) break;
      await sleep(500);
    }
    assert.ok(
      consoleText.includes(`ep-seed: applied: hostname ${proxyName}, 1 file(s)`),
      `ep-seed's line on the console; tail:\n${consoleText.split('\n').slice(-40).join('\n')}`,
    );
    assert.doesNotMatch(consoleText, /Cloud-init v\. .* running 'init'/, 'cloud-init ran its network stage');
    // The image's own initramfs and DHCP client (files/ep-initrd-init, files/ep-net): the lease
    // the provider read is the one ep-dhcp applied, with the network's own name server.
    assert.doesNotMatch(consoleText, /ep-initrd: error/);
    // The first DHCP discover goes out from the initramfs, before systemd starts (the network's
    // DHCP server's 3 s ping of a new address then overlaps the rest of the boot).
    const discover = consoleText.indexOf('ep-initrd: eth0 up, the first DHCP discover goes out');
    const welcome = consoleText.indexOf('Welcome to ');
    assert.ok(
      discover >= 0 && welcome > discover,
      `the initramfs's DHCP discover line before systemd's Welcome (at ${discover}, ${welcome}); head:\n${consoleText.slice(0, 2000)}`,
    );
    assert.match(
      consoleText,
      new RegExp(`ep-net: bound: ${guestIp.replaceAll('.', '\\.')}/\\d+ via \\S+, names from (?!none)\\S+`),
      `ep-net's lease line on the console; tail:\n${consoleText.split('\n').slice(-40).join('\n')}`,
    );
  });

  it('on the NAT network the probe activity (health.via auto) goes through the host over SSH and logs why', async () => {
    const ip = guestIp;
    assert.ok(ip, 'the address step passed');
    assert.ok(imageUrl, 'the image step passed');
    // The NAT guest's address is not routed into the host: from here it would leave by the
    // default route, so the activity must not try it directly.
    assert.notEqual(await routeDev(ip), host.vethRoot);
    const config = fleetConfig({
      entry,
      ownerUid: owner,
      hosts: [host],
      images: { proxy: { url: imageUrl, sha256: imageSha } },
      health: { probeTimeoutMs: PROBE_TIMEOUT_MS },
    });
    config.providers[0]!.health.target = `${host.rootSideAddress}:${target.port}`;
    const registry = new HostRegistry(config);
    const logged: { message: string; meta?: Record<string, unknown> }[] = [];
    const push = (message: string, meta?: Record<string, unknown>): void => void logged.push({ message, meta });
    const logger = {
      log: (_level: string, message: string, meta?: Record<string, unknown>) => push(message, meta),
      trace: push,
      debug: push,
      info: push,
      warn: push,
      error: push,
    };
    try {
      const acts = createProxyActivities(registry);
      /** Runs `fn` in an activity context of its own (the activity's log goes to `logged`). */
      const inActivity = <T>(fn: () => Promise<T>): Promise<T> =>
        new MockActivityEnvironment(undefined, { logger }).run<[], T, () => Promise<T>>(fn);
      const proxy = await inActivity(() => acts.resolveProxy({ name: proxyName, entry, imageKey: 'proxy' }));
      assert.equal(proxy.health.via, 'auto');
      const peersBefore = target.peers.length;
      const outcome = await within(
        inActivity(() => acts.probeProxy({ proxy, host: host.name, ip })),
        60_000,
        'probeProxy',
      );
      assert.equal(outcome.ok, true, JSON.stringify(outcome));
      assert.ok(target.peers.length > peersBefore, "the CONNECT reached the test's target");
      const path = logged.find((l) => l.message === 'probe path');
      assert.ok(path, `a 'probe path' line; logged: ${logged.map((l) => l.message).join(', ')}`);
      say(`NAT guest probe path: ${JSON.stringify(path.meta)}`);
      assert.equal(path.meta?.['via'], 'ssh');
      assert.equal(path.meta?.['ip'], guestIp);
      assert.match(String(path.meta?.['reason']), /a default route's interface/);
    } finally {
      registry.close();
    }
  });

  it("the image's guest agent reports the same address", async () => {
    assert.ok(guestIp, 'the address step passed');
    // The lease usually answers first; the agent (the address source that works on any network)
    // must answer too, or the image's qemu-guest-agent is broken.
    const deadline = performance.now() + AGENT_BOUND_MS;
    let last = '';
    for (;;) {
      const status = await getProxy({ links, ownerUid: owner, entry, name: proxyName, network: host.network });
      last = JSON.stringify(status);
      if (status.state === 'Running' && status.address?.source === 'agent') {
        assert.equal(status.address.ip, guestIp);
        break;
      }
      if (performance.now() > deadline)
        assert.fail(`the guest agent gave no address within ${AGENT_BOUND_MS} ms: ${last}`);
      await sleep(2000);
    }
    timings.push(['address to agent answer', secs(performance.now() - addressAt)]);
  });

  it('delete removes domain, overlay and seed, and leaves the base', async () => {
    assert.ok(image, 'the image step passed');
    const t0 = performance.now();
    const deleted = await deleteProxy({
      links,
      ownerUid: owner,
      entry,
      name: proxyName,
      pool: host.pool,
      shutdownGraceMs: 10_000,
    });
    timings.push(['delete (10 s grace)', secs(performance.now() - t0)]);
    assert.deepEqual(
      { ...deleted, logs: undefined },
      { domain: 'deleted', overlay: 'deleted', seed: 'deleted', ownerRecord: 'deleted', logs: undefined },
    );
    assert.notEqual(deleted.logs, 'failed', 'the log files were removed');
    assert.deepEqual(await getProxy({ links, ownerUid: owner, entry, name: proxyName, network: host.network }), {
      state: 'Missing',
    });
    const vols = await poolVolumes();
    assert.ok(!vols.includes(names.overlayVolume), 'overlay gone');
    assert.ok(!vols.includes(names.seedVolume), 'seed gone');
    assert.ok(vols.includes(image.volumeName), 'base survives');
  });

  it('through the workflows on the routed network: probed directly, exitIp the address the target saw, the curl line runs here', async () => {
    assert.ok(image, 'the image step passed');
    const routedNetwork = host.routedNetwork;
    const routedCidr = host.routedNetworkCidr;
    assert.ok(routedNetwork && routedCidr, 'ep-h1 describes its routed network (test/hosts/testhost up adds it)');
    // An HTTP server on the host's root-side address: the health target (Squid only connects) and
    // the exit-IP URL, answering each caller's address and recording it.
    const seen: string[] = [];
    const echo = http.createServer((req, res) => {
      const remote = req.socket.remoteAddress ?? '?';
      if (req.url === '/ip') seen.push(remote);
      res.end(req.url === '/ip' ? `${remote}\n` : 'hello from the e2e exit-IP target\n');
    });
    await new Promise<void>((resolve) => echo.listen(0, host.rootSideAddress, resolve));
    try {
      const port = (echo.address() as AddressInfo).port;
      const root = host.rootSideAddress;
      const config = fleetConfig({
        entry,
        ownerUid: owner,
        hosts: [host],
        images: { proxy: { url: imageUrl, sha256: imageSha } },
        health: { intervalMs: 2_000, probeTimeoutMs: 5_000, healthyAfter: 2, unhealthyAfter: 3 },
        timeouts: { rpcMs: 60_000, downloadBodyIdleMs: 30_000, downloadTotalMs: 600_000, bootMs: 420_000 },
      });
      // The target and the URL are on a private (root-side) address: the entry allows it, as an
      // operator's entry allows its health target.
      const main = config.providers[0]!;
      main.health.target = `${root}:${port}`;
      main.health.egressIpUrl = `http://${root}:${port}/ip`;
      main.squid.allowDestinations = [`${root}/32`];
      // The routed network: its guests answer this machine (direct probes and the curl line come
      // from this machine's end of the veth, the root-side address).
      main.network = routedNetwork;
      main.squid.allowedClientCidrs = [routedCidr, `${root}/32`];
      tmp = await mkdtemp(join(tmpdir(), 'ep-e2e-boot-'));
      const providersFile = await writeProvidersFile(tmp, config);
      client = await connectClient();
      const taskQueue = uniqueId('e2e-boot');
      worker = await spawnWorker(providersFile, taskQueue, 120_000);
      const t0 = performance.now();
      const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
        workflowId: proxyWorkflowId(entry, exitProxyName),
        taskQueue,
        args: [{ name: exitProxyName, entry, imageKey: 'proxy', vm: { vcpus: 1, memoryMiB: 512, diskGiB: 4 } }],
      });
      exitStarted = true;
      const deadline = performance.now() + WORKFLOW_HEALTHY_BOUND_MS;
      let st: ProxyStatus | undefined;
      let lastState = '';
      const healths = new Set<string>();
      for (;;) {
        st = await within(handle.query<ProxyStatus>(PROXY_STATUS_QUERY), 20_000, 'status query').catch(() => st);
        if (st !== undefined) {
          if (st.state !== lastState) say(`${exitProxyName}: ${st.state} (Healthy ${st.conditions.Healthy.status})`);
          lastState = st.state;
          if (st.state === 'Running') healths.add(`${st.conditions.Healthy.status}/${st.conditions.Healthy.reason}`);
          if (st.state === 'Failed') assert.fail(`${exitProxyName} failed: ${JSON.stringify(st.lastError)}`);
          if (st.conditions.Healthy.status === 'True' && st.exitIp !== undefined) break;
        }
        if (performance.now() > deadline) {
          assert.fail(`no Healthy proxy with an exit IP within ${WORKFLOW_HEALTHY_BOUND_MS} ms: ${JSON.stringify(st)}`);
        }
        await sleep(500);
      }
      timings.push(['workflow: start to exitIp', secs(performance.now() - t0)]);
      say(`${exitProxyName}: Healthy values seen while Running: ${[...healths].join(', ')}`);
      assert.ok(seen.length >= 1, 'the exit-IP URL was read through the proxy');
      assert.equal(st.exitIp, seen.at(-1), 'the status shows the address the target saw');
      // On the routed network (no NAT) the target sees the guest's own address.
      assert.ok(st.ip, 'the status has the address');
      assert.equal(st.exitIp, st.ip);
      assert.ok(st.health.exitIpAt, 'the time of the read');
      // The line is written before the monitor returns, but reaches this process through the
      // worker's stdout, which may be read after the status query's answer: wait for it, bounded.
      let logged: string | undefined;
      for (let i = 0; i < 100 && logged === undefined; i++) {
        logged = worker.lines.find((l) => l.includes('exit IP recorded'));
        if (logged === undefined) await sleep(100);
      }
      assert.ok(
        logged,
        `the worker logged the exit IP (within 10 s of the status showing it); its lines with "exit": ` +
          worker.lines
            .filter((l) => /exit/i.test(l))
            .slice(-5)
            .join('\n'),
      );
      assert.ok(logged.includes(st.ip), logged);
      // The worker's probes went straight over TCP, and its log says so.
      let pathLine: string | undefined;
      for (let i = 0; i < 100 && pathLine === undefined; i++) {
        pathLine = worker.lines.find((l) => l.includes('probe path') && l.includes(st.ip!));
        if (pathLine === undefined) await sleep(100);
      }
      assert.ok(
        pathLine,
        `the worker logged its probe path: ${worker.lines
          .filter((l) => /probe/.test(l))
          .slice(-5)
          .join('\n')}`,
      );
      say(`${exitProxyName}: ${pathLine}`);
      assert.match(pathLine, /"via":"direct"/);
      assert.ok(pathLine.includes(`"dev":"${String(host.vethRoot)}"`), pathLine);
      assert.ok(
        ![...healths].some((h) => h.startsWith('False')),
        `never False while booting: ${[...healths].join(', ')}`,
      );

      const app = await buildApi({
        store: temporalStore(client),
        log: createLogger({ name: 'e2e-api', level: 'warn' }),
        auth: new TokenAuth([{ token: 'e2e-boot-reader-token-0123456789', role: 'read' }]),
        taskQueue,
      });
      try {
        const until = performance.now() + DISCOVERY_BOUND_MS;
        let listed: { name: string; address: string; exitIp?: string } | undefined;
        while (listed === undefined) {
          const res = await app.inject({
            url: `/v1/discovery?entry=${entry}`,
            headers: { authorization: 'Bearer e2e-boot-reader-token-0123456789' },
          });
          assert.equal(res.statusCode, 200, res.body);
          listed = res
            .json<{ proxies: { name: string; address: string; exitIp?: string }[] }>()
            .proxies.find((p) => p.name === exitProxyName);
          if (listed !== undefined) break;
          if (performance.now() > until)
            assert.fail(`discovery did not list ${exitProxyName} within ${DISCOVERY_BOUND_MS} ms`);
          await sleep(1000);
        }
        assert.equal(listed.address, `${st.ip}:${SQUID_PORT}`);
        assert.equal(listed.exitIp, seen.at(-1), 'discovery shows the address the target saw');
        say(`${exitProxyName}: discovery ${listed.address} exitIp ${listed.exitIp}; the target saw ${seen.join(', ')}`);

        // Discovery's ip:port works from this machine, which routes to the guest network (checked
        // first: the kernel's route to the guest goes into the host's veth).
        assert.equal(await routeDev(st.ip), host.vethRoot);
        const sock = await openDirectTcp(st.ip, SQUID_PORT, { timeoutMs: PROBE_TIMEOUT_MS });
        const direct = await connectProbe(sock, { target: `${root}:${port}`, timeoutMs: PROBE_TIMEOUT_MS });
        assert.equal(direct.status, 200);

        // The curl line `egressctl proxy up` prints for it runs here, and answers.
        const line = await curlLine(
          { entry, providersFile, loadProviders: loadProvidersFile, reachesDirectly },
          host.name,
          st.ip,
          SQUID_PORT,
        );
        say(`${exitProxyName}: curl line (${line.from}): ${line.curl}`);
        assert.equal(line.from, 'machine');
        assert.match(line.curl, /^curl /);
        const { stdout } = await pexec('sh', ['-c', line.curl], { timeout: 30_000 });
        assert.equal(stdout, 'hello from the e2e exit-IP target\n');
      } finally {
        await app.close();
      }
    } finally {
      echo.closeAllConnections();
      await new Promise<void>((resolve) => echo.close(() => resolve()));
    }
  });

  async function consoleTail(): Promise<string> {
    try {
      const text = await readFile(hostPath(host, names.consoleLogPath), 'utf8');
      return text.split('\n').slice(-40).join('\n');
    } catch (err) {
      return `(console log unreadable: ${String(err)})`;
    }
  }
});
