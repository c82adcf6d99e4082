/**
 * A pool end to end, with real Squid guests on both test hosts' routed networks behind the pool's
 * front door: a worker process, a door service process (bin/door: HAProxy on 127.0.0.1, kept
 * current from the pool), a providers file with one entry over ep-h1 and ep-h2 and two image keys
 * of the same image (served by a loopback mirror), and a health target and an `/ip` server (it
 * answers the caller's address: the exit's own, no NAT) on ep-h1's root-side address. Each check
 * prints one row:
 *
 *   pool ready      size 2 reaches Ready: two members Healthy and in discovery, one per host
 *   door sessions   both members in the door; 200 requests through it in 10 sessions
 *                   (`e2e-session-<id>`): each session always leaves by one member's address
 *   door rules      a credential allowed only other names is refused (403), the same rule in report
 *                   mode passes and is logged `report`; no or a wrong credential gets 407; every
 *                   request has its JSON decision line; no Proxy-Authorization reaches the target
 *   VM destroyed    one member's domain destroyed behind the system's back (virsh destroy) while
 *                   the 10 sessions keep sending through the door: the pool is back to 2 available
 *                   (the VM recreated or the member replaced); a session loses at most one
 *                   request, and only the sessions of the destroyed member lose any
 *   rolling update  the template's image key changes with maxSurge 1, maxUnavailable 0 while a
 *                   prober asks the pool every second for its discovery list and CONNECTs through
 *                   each listed member (from inside the member's host; a failed CONNECT is retried
 *                   once at once, and counted): at no sample do fewer than 2 answer; every member
 *                   ends on the new key; a second prober sends a request through the door every
 *                   200 ms: none fails
 *   replace member  a member reported banned (the pool's replaceMember update): it is out of the
 *                   door at once, no request through the door reaches it after that, and a
 *                   replacement makes the pool whole (counted in replacedOnRequest)
 *   host lost       the host with the most members black-holed (blackhole routes to its address and
 *                   its routed network): its members out of discovery within the health
 *                   interval + 10 s (issue goal: 10 s from the first failed probe series);
 *                   the pool is whole again on the other host; once the route goes, the stranded
 *                   members' workflows delete their VMs
 *   drain           the host with the most members drained (cordon, members replaced elsewhere
 *                   within maxSurge 1, maxUnavailable 0) while the prober samples: the host ends
 *                   Drained with no domain of the entry, at no sample fewer than N - 1 answer;
 *                   uncordon makes it schedulable again (its workflow ends)
 *   delete          the pool's delete ends its workflow Deleted; no domain of the entry is left
 *
 *   test/e2e/run pool     (builds or reuses the image first)
 *
 * Every wait is bounded; everything this run creates is removed on every path. Traffic goes only
 * to loopback and to the test hosts: CONNECTs to members are sent from inside the member's host
 * namespace; the door reaches the guests through the machine's routes into the hosts' veths
 * (checked with `ip route get` before the door starts).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import {
  poolDeleteUpdate,
  poolReplaceMemberUpdate,
  poolSpecUpdate,
  poolStatusQuery,
} from '../../contracts/messages.ts';
import type { DoorStatus } from '../../lib/door/service.ts';
import { POOL_WORKFLOW_TYPE, poolAddresses, poolWorkflowId } from '../../contracts/pool.ts';
import { poolTaskQueue } from '../../contracts/task-queues.ts';
import type { PoolSpec, PoolStatus } from '../../contracts/pool.ts';
import type { HostStatus } from '../../contracts/host.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { drainHost, hostStatus, uncordonHost } from '../../client/hosts.ts';
import type { poolWorkflow } from '../../workflows/pool/index.ts';
import { blackHoleHost } from '../support/blackhole.ts';
import type { BlackHole } from '../support/blackhole.ts';
import { sleep, within } from '../support/bounded.ts';
import { spawnService, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import { basic, viaDoor } from '../support/door-client.ts';
import { freePort } from '../support/sshd.ts';
import {
  deleteOpenMembers,
  GUEST_POOL_POLICIES,
  guestEntryConfig,
  removeEntryObjects,
} from '../support/pool-guests.ts';
import type { WorkerProcess } from '../support/fleet.ts';
import { ImageMirror, sha256Hex } from '../support/mirror.ts';
import { startTarget } from '../support/target.ts';
import type { Target } from '../support/target.ts';
import { connectClient, uniqueId } from '../support/temporal.ts';
import { domainsOf, inHost, loadTestHosts, virsh } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const entry = `pl${run}`;
const owner = `e2e-pool-${run}`;
const key1 = `a${run}`;
const key2 = `b${run}`;
const POOL = 'web';
const SIZE = 2;
const READY_BOUND_MS = 8 * 60_000;
/** The door's one credential (`openssl passwd -6 -salt abcdefgh secret`); sessions are `e2e-session-<id>`. */
const DOOR_USER = 'e2e';
const DOOR_HASH = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';
const SESSIONS = Array.from({ length: 10 }, (_, i) => `${DOOR_USER}-session-s${i}`);
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const say = (line: string): void => void process.stdout.write(`e2e-pool: ${line}\n`);

describe(
  'a pool of real proxies: ready, a VM lost, a rolling update without a gap, a host lost, a drain, delete',
  { timeout: 40 * 60_000 },
  () => {
    let hosts: TestHost[];
    let client: Client;
    let mirror: ImageMirror;
    let target: Target;
    let web: http.Server;
    let tmp: string;
    let worker: WorkerProcess | undefined;
    let door: WorkerProcess | undefined;
    let doorPort = 0;
    let doorHttp = 0;
    /** The `/ip` URL on ep-h1's root-side address: it answers the caller's address. */
    let ipUrl = '';
    /** Requests that reached the `/ip` server with a Proxy-Authorization header (the door must strip it). */
    let leakedAuth = 0;
    let pool: WorkflowHandle<typeof poolWorkflow>;
    let taskQueue = '';
    const rows: string[] = [];
    /** The test host drained right now (uncordoned on every path). */
    let cordoned: string | undefined;
    /** The test host black-holed right now (lifted on every path). */
    let hole: BlackHole | undefined;
    let healthIntervalMs = 0;
    /** Every member name the pool reported (their workflows must all have ended at the end). */
    const seen = new Set<string>();
    const row = (check: string, value: string, ok = true): void => {
      rows.push(`| ${check} | ${ok ? '' : 'FAILED: '}${value} |`);
      say(`${ok ? 'ok  ' : 'FAIL'} ${check.padEnd(16)} ${value}`);
    };
    const status = (): Promise<PoolStatus> => within(pool.query(poolStatusQuery), 20_000, 'the pool status query');
    /** Polls the pool until `done` holds (printing each change of its summary), bounded. */
    const until = async (done: (s: PoolStatus) => boolean, boundMs: number, what: string): Promise<PoolStatus> => {
      const deadline = performance.now() + boundMs;
      let last = '';
      let st: PoolStatus | undefined;
      for (;;) {
        st = await status().catch(() => st);
        if (st) {
          for (const m of st.members) seen.add(m.name);
          const line = `${st.phase} desired ${st.desired} healthy ${st.healthy} available ${st.available} updated ${st.updated} | ${st.members.map((m) => `${m.name}@${m.host ?? '-'} ${m.state}/${m.healthy}/${m.role}${m.available ? '*' : ''}`).join(', ')}`;
          if (line !== last) say(line);
          last = line;
          if (done(st)) return st;
        }
        if (performance.now() > deadline) assert.fail(`${what}: not within ${boundMs} ms; last ${JSON.stringify(st)}`);
        await sleep(1000);
      }
    };
    /** A CONNECT through the member at `address` to the target, sent from inside `host`: the CONNECT's status. */
    /** Why the last failed CONNECT of each address failed (curl's error, or the exec's). */
    const why = new Map<string, string>();
    const connectThrough = async (host: TestHost, address: string): Promise<number> => {
      const dest = `${hosts[0]!.rootSideAddress}:${(web.address() as AddressInfo).port}`;
      const script = `curl -sS -o /dev/null --max-time 10 -x 'http://${address}' -p 'http://${dest}/' -w 'connect=%{http_connect};' 2>&1; true`;
      const out = await inHost(host, ['sh', '-c', script], 15_000).catch(
        (err: unknown) => `exec: ${String(err)} connect=000;`,
      );
      const code = Number(/connect=(\d{3});/.exec(out)?.[1] ?? 0);
      if (code !== 200)
        why.set(
          address,
          out
            .replace(/connect=\d{3};/, '')
            .trim()
            .slice(0, 200),
        );
      return code;
    };
    const hostNamed = (name: string | undefined): TestHost | undefined => hosts.find((h) => h.name === name);
    /** The door service's view of the pool's door (its GET /v1/doors), bounded. */
    const doorState = async (): Promise<DoorStatus> => {
      const r = await fetch(`http://127.0.0.1:${doorHttp}/v1/doors`, { signal: AbortSignal.timeout(5_000) });
      return ((await r.json()) as { doors: DoorStatus[] }).doors[0]!;
    };
    /** Polls the door until `done` holds, bounded; the milliseconds it took. */
    const doorUntil = async (done: (d: DoorStatus) => boolean, boundMs: number, what: string): Promise<number> => {
      const t0 = performance.now();
      let d: DoorStatus | undefined;
      for (let i = 0; ; i++) {
        d = await doorState().catch(() => d);
        if (d !== undefined && done(d)) return performance.now() - t0;
        if (performance.now() - t0 > boundMs || i > boundMs / 100) {
          assert.fail(`${what}: not within ${boundMs} ms; the door: ${JSON.stringify(d)}`);
        }
        await sleep(100);
      }
    };
    /** One GET of `/ip` through the door as `user`: the exit's address, or `!<status or error>`. */
    const throughDoor = async (user: string): Promise<string> => {
      try {
        const a = await viaDoor(doorPort, ipUrl, basic(user));
        return a.status === 200 ? a.body.trim() : `!${a.status} ${a.body.trim().slice(0, 80)}`;
      } catch (err) {
        return `!${(err as Error).message.slice(0, 80)}`;
      }
    };
    /**
     * Sends requests through the door as each of `users` in turn, then waits `gapMs`, until
     * stopped (at most 3,000 rounds); `stop()` resolves each user's answers in order.
     */
    const doorTraffic = (users: readonly string[], gapMs: number) => {
      const answers = new Map<string, string[]>(users.map((u) => [u, []]));
      let running = true;
      const loop = (async () => {
        for (let i = 0; running && i < 3000; i++) {
          for (const u of users) answers.get(u)!.push(await throughDoor(u));
          await sleep(gapMs);
        }
      })();
      return {
        stop: async (): Promise<Map<string, string[]>> => {
          running = false;
          await loop;
          return answers;
        },
      };
    };
    const memberIps = (st: PoolStatus): Map<string, string> =>
      new Map(poolAddresses(st).map((a) => [a.address.split(':')[0]!, a.name]));
    /**
     * Runs `work` while a prober outside the system asks the pool every second for its discovery
     * list and CONNECTs through each listed member from inside its host (one retry at once: on this
     * 2-core machine a guest booting under TCG can starve a serving neighbour past curl's bound; a
     * member really gone fails both). Returns the samples and the first attempts that failed.
     */
    const probeDuring = async (
      work: () => Promise<unknown>,
    ): Promise<{ samples: { listed: number; answered: number; at: number; failed?: string[] }[]; slow: string[] }> => {
      const samples: { listed: number; answered: number; at: number; failed?: string[] }[] = [];
      let probing = true;
      /** First attempts that failed (the retry answered or not). */
      const slow: string[] = [];
      const t0 = performance.now();
      const prober = (async () => {
        for (let i = 0; probing && i < 1200; i++) {
          const t = performance.now();
          const st = await status().catch(() => undefined);
          if (st) {
            const listed = poolAddresses(st);
            const codes = await Promise.all(
              listed.map((a) => {
                const h = hostNamed(st.members.find((m) => m.name === a.name)?.host);
                if (!h) return Promise.resolve(0);
                // One retry at once: on this 2-core machine a guest booting under TCG can starve a
                // serving neighbour past curl's bound; a member really gone fails both.
                return connectThrough(h, a.address).then(async (c) => {
                  if (c === 200) return c;
                  slow.push(`${a.name}: ${c}`);
                  return connectThrough(h, a.address);
                });
              }),
            );
            const failed = listed.flatMap((a, j) =>
              codes[j] === 200 ? [] : [`${a.name} ${a.address}: ${codes[j]} (${why.get(a.address) ?? ''})`],
            );
            const at = Math.round(performance.now() - t0);
            samples.push({
              listed: listed.length,
              answered: listed.length - failed.length,
              at,
              ...(failed.length ? { failed } : {}),
            });
            if (failed.length > 0) say(`sample at ${secs(at)}: ${failed.join('; ')}`);
          }
          await sleep(Math.max(0, 1000 - (performance.now() - t)));
        }
      })();
      try {
        await work();
      } finally {
        probing = false;
        await prober;
      }
      return { samples, slow };
    };

    before(async () => {
      hosts = loadTestHosts().filter((h) => h.name === 'ep-h1' || h.name === 'ep-h2');
      assert.equal(hosts.length, 2, 'test hosts ep-h1 and ep-h2 are described (test/hosts/testhost up 2)');
      const path = process.env['EP_E2E_IMAGE'];
      assert.ok(path, 'EP_E2E_IMAGE names the test image (test/e2e/run builds it)');
      const image = await readFile(path);
      const sha = (await readFile(`${path}.sha256`, 'utf8')).split(/\s+/)[0]!;
      assert.equal(sha256Hex(image), sha);
      tmp = await mkdtemp(join(tmpdir(), 'ep-e2e-pool-'));
      client = await connectClient();
      mirror = await ImageMirror.start();
      target = await startTarget(hosts[0]!.rootSideAddress, 'hello from the pool target\n');
      // What the prober CONNECTs to: an HTTP server (the health target closes after a greeting,
      // which races curl's reading of the CONNECT reply).
      // `/ip` answers the caller's address: through the door, the exit's own (routed: no NAT).
      web = http.createServer((req, res) => {
        if (req.headers['proxy-authorization'] !== undefined) leakedAuth++;
        res.end(req.url === '/ip' ? `${req.socket.remoteAddress}\n` : 'hello from the pool prober target\n');
      });
      await new Promise<void>((resolve) => web.listen(0, hosts[0]!.rootSideAddress, resolve));
      ipUrl = `http://${hosts[0]!.rootSideAddress}:${(web.address() as AddressInfo).port}/ip`;
      // The network rule: the machine routes each host's routed network into that host's veth.
      for (const h of hosts) {
        const { stdout } = await pexec('ip', ['-o', 'route', 'get', String(h.routedNetworkGateway)], {
          timeout: 5_000,
        });
        assert.match(
          stdout,
          new RegExp(` dev ${String(h.vethRoot)} `),
          `${h.name}'s routed network goes into its veth`,
        );
      }
      const config = guestEntryConfig({
        entry,
        ownerUid: owner,
        hosts,
        images: {
          [key1]: { url: mirror.serve(`/${entry}/a.qcow2`, image), sha256: sha },
          [key2]: { url: mirror.serve(`/${entry}/b.qcow2`, image), sha256: sha },
        },
        targetPort: target.port,
        routed: true,
      });
      healthIntervalMs = config.providers[0]!.health.intervalMs;
      const providersFile = await writeProvidersFile(tmp, config);
      taskQueue = uniqueId('e2e-pool');
      worker = await spawnWorker(providersFile, taskQueue, 120_000);
      const spec: PoolSpec = {
        entry,
        name: POOL,
        size: SIZE,
        template: { imageKey: key1 },
        ...GUEST_POOL_POLICIES,
      };
      pool = await client.workflow.start<typeof poolWorkflow>(POOL_WORKFLOW_TYPE, {
        workflowId: poolWorkflowId(entry, POOL),
        taskQueue: poolTaskQueue(taskQueue), // the worker polls it beside taskQueue
        args: [{ spec }],
      });
      // The pool's door: one credential; the `/ip` server's private address allowed at the door
      // (the exits allow it too: the entry's allowDestinations).
      doorPort = await freePort();
      doorHttp = await freePort();
      const doorsFile = join(tmp, 'doors.json');
      await writeFile(
        doorsFile,
        JSON.stringify({
          doors: [
            {
              entry,
              pool: POOL,
              listen: { host: '127.0.0.1', port: doorPort },
              users: [
                { name: DOOR_USER, passwordHash: DOOR_HASH },
                // Allowed only names under example.invalid: the /ip address is refused (403).
                {
                  name: 'narrow',
                  passwordHash: DOOR_HASH,
                  rules: { mode: 'enforce', allowDestinations: ['.example.invalid'] },
                },
                // The same rule reported, not enforced: it passes and its decision line says so.
                {
                  name: 'watch',
                  passwordHash: DOOR_HASH,
                  rules: { mode: 'report', allowDestinations: ['.example.invalid'] },
                },
              ],
              allowReserved: [`${hosts[0]!.rootSideAddress}/32`],
            },
          ],
        }),
      );
      door = await spawnService(
        'bin/door',
        ['--config', doorsFile, '--state-dir', join(tmp, 'doors'), '--http', `127.0.0.1:${doorHttp}`],
        'door service running',
        30_000,
      );
      say(
        `entry ${entry}, pool ${pool.workflowId}, task queue ${taskQueue}, worker pid ${worker.child.pid}, door 127.0.0.1:${doorPort} pid ${door.child.pid}`,
      );
    });

    after(async () => {
      await hole?.lift().catch(() => undefined);
      if (cordoned !== undefined)
        await uncordonHost(client, entry, cordoned, { reason: 'e2e cleanup' }).catch((err: unknown) =>
          say(`cleanup: uncordon ${cordoned}: ${String(err)}`),
        );
      const d = await pool?.describe().catch(() => undefined);
      if (d?.status.name === 'RUNNING') {
        await within(pool.executeUpdate(poolDeleteUpdate), 30_000, 'delete the pool').catch(() => undefined);
        await within(pool.result(), 5 * 60_000, 'the pool to end').catch((err: unknown) =>
          say(`cleanup: ${String(err)}`),
        );
      }
      // Members a failed run left: their workflows delete their VMs; then anything still there goes by hand.
      await deleteOpenMembers(client, `${entry}/${POOL}`);
      await door?.stop().catch(() => door?.kill());
      await worker?.stop().catch(() => worker?.kill());
      if (hosts) await removeEntryObjects(hosts, entry, [key1, key2]);
      await target?.close();
      if (web)
        await new Promise<void>((resolve) => {
          web.closeAllConnections();
          web.close(() => resolve());
        });
      await mirror?.close();
      if (tmp) await rm(tmp, { recursive: true, force: true });
      if (rows.length > 0) {
        say('| check | measured |');
        say('|---|---|');
        for (const r of rows) say(r);
      }
    });

    it('pool ready: two members Healthy in discovery, one on each host', async () => {
      const t0 = performance.now();
      const st = await until((s) => s.phase === 'Ready' && s.available === SIZE, READY_BOUND_MS, 'the pool Ready');
      const onHosts = new Set(st.members.map((m) => m.host));
      row(
        'pool ready',
        `${st.available}/${SIZE} available in ${secs(performance.now() - t0)}, hosts ${[...onHosts].join(', ')}`,
        onHosts.size === 2,
      );
      assert.equal(onHosts.size, 2, 'the members are spread over both hosts');
      for (const a of poolAddresses(st)) {
        const m = st.members.find((x) => x.name === a.name)!;
        assert.equal(
          await connectThrough(hostNamed(m.host)!, a.address),
          200,
          `a CONNECT through ${a.name} answers 200`,
        );
      }
    });

    it('door sessions: 200 requests through the door in 10 sessions, each leaving by one member', async () => {
      const st = await status();
      const ips = memberIps(st);
      const ms = await doorUntil(
        (d) => d.exits.filter((e) => e.role === 'serving' && e.up).length === SIZE,
        60_000,
        'both members serving in the door',
      );
      const answers = new Map<string, string[]>(SESSIONS.map((u) => [u, []]));
      for (let round = 0; round < 200 / SESSIONS.length; round++) {
        for (const u of SESSIONS) answers.get(u)!.push(await throughDoor(u));
      }
      const failed = [...answers.values()].flat().filter((a) => a.startsWith('!'));
      const homes = new Map([...answers].map(([u, a]) => [u, [...new Set(a)]]));
      const used = new Set([...homes.values()].flat());
      row(
        'door sessions',
        `both members in the door ${secs(ms)} after the query; 200 requests, ${failed.length} failed; sessions per exit ${[...used].map((ip) => `${ips.get(ip) ?? ip} ${[...homes.values()].filter((h) => h[0] === ip).length}`).join(', ')}`,
        failed.length === 0 && [...homes.values()].every((h) => h.length === 1),
      );
      assert.deepEqual(failed, [], 'no request through the door failed');
      // The door told the pool: its address and the two exits up, in the pool's status.
      const shown = (await status()).door;
      assert.equal(
        shown?.listen,
        `127.0.0.1:${doorPort}`,
        `the pool's status shows its door: ${JSON.stringify(shown)}`,
      );
      assert.deepEqual(
        shown.exits
          .filter((x) => x.up && x.role === 'serving')
          .map((x) => x.name)
          .sort(),
        [...ips.values()].sort(),
      );
      for (const [u, h] of homes) {
        assert.equal(h.length, 1, `${u} always left by one exit: ${h.join(', ')}`);
        assert.ok(ips.has(h[0]!), `${u} left by a member's address (${h[0]} of ${[...ips.keys()].join(', ')})`);
      }
    });

    it('door rules: per-credential allow list enforced (403) and reported, 407 without credentials, no credential reaches the target', async () => {
      const refused = await viaDoor(doorPort, ipUrl, basic('narrow'));
      assert.equal(refused.status, 403, refused.body);
      assert.match(refused.body, /refused by the door: allowDestinations/);
      const reported = await viaDoor(doorPort, ipUrl, basic('watch'));
      assert.equal(reported.status, 200, reported.body);
      const none = await viaDoor(doorPort, ipUrl);
      const wrong = await viaDoor(doorPort, ipUrl, basic(DOOR_USER, 'wrong'));
      for (const a of [none, wrong]) {
        assert.equal(a.status, 407);
        assert.match(String(a.headers['proxy-authenticate']), /^Basic realm=/);
      }
      // The decision lines (HAProxy's, on the door service's stdout): one JSON object each.
      let decisions: { credential: string; decision: string; reason: string; status: number }[] = [];
      for (let i = 0; i < 50; i++) {
        decisions = door!.lines
          .filter((l) => l.includes('CANONICAL-PROXY-DECISION'))
          .map((l) => JSON.parse(l) as (typeof decisions)[number]);
        if (decisions.some((d) => d.credential === 'watch')) break;
        await sleep(100);
      }
      const of = (c: string) => decisions.filter((d) => d.credential === c).at(-1);
      row(
        'door rules',
        `narrow ${refused.status}, watch ${reported.status} (logged ${of('watch')?.decision}), none ${none.status}, wrong ${wrong.status}; ${decisions.length} decision lines; Proxy-Authorization at the target ${leakedAuth}`,
        leakedAuth === 0,
      );
      assert.deepEqual(
        [of('narrow')?.decision, of('narrow')?.reason, of('narrow')?.status],
        ['deny', 'allowDestinations', 403],
      );
      assert.deepEqual(
        [of('watch')?.decision, of('watch')?.reason, of('watch')?.status],
        ['report', 'allowDestinations', 200],
      );
      assert.ok(decisions.length >= 200, 'a decision line per request');
      assert.equal(leakedAuth, 0, 'no Proxy-Authorization reached the target through the door');
    });

    it('VM destroyed: the pool is back to two available; through the door a session loses at most one request', async () => {
      const before = await status();
      const victim = before.members[0]!;
      const victimIp = victim.address?.split(':')[0];
      const host = hostNamed(victim.host)!;
      const domain = `ep_${entry}_${victim.name}`;
      const traffic = doorTraffic(SESSIONS, 300);
      await sleep(1_000); // every session has a home before the loss
      const t0 = performance.now();
      await virsh(host, 'destroy', domain);
      say(`destroyed ${domain} on ${host.name}`);
      let answers: Map<string, string[]>;
      let st: PoolStatus;
      try {
        // First the loss is seen (the member is not available), then the pool is whole again.
        await until(
          (s) => s.available < SIZE || !s.members.some((m) => m.name === victim.name && m.available),
          3 * 60_000,
          'the loss seen',
        );
        st = await until((s) => s.phase === 'Ready' && s.available === SIZE, READY_BOUND_MS, 'the pool whole again');
      } finally {
        answers = await traffic.stop();
      }
      const replaced = !st.members.some((m) => m.name === victim.name);
      const lost = [...answers].map(([u, a]) => ({
        u,
        onVictim: a[0] === victimIp,
        failed: a.filter((x) => x.startsWith('!')),
        sent: a.length,
      }));
      const worst = Math.max(...lost.map((l) => l.failed.length));
      const others = lost.filter((l) => !l.onVictim && l.failed.length > 0);
      row(
        'VM destroyed',
        `${SIZE}/${SIZE} available again after ${secs(performance.now() - t0)} (${replaced ? `${victim.name} replaced` : `${victim.name}'s VM recreated`}; replacements ${st.replacements}); through the door ${lost.reduce((n, l) => n + l.sent, 0)} requests, ${lost.filter((l) => l.onVictim).length} sessions on it, most failed in one session ${worst}, failed in others ${others.length}`,
        worst <= 1 && others.length === 0,
      );
      for (const l of lost) assert.ok(l.failed.length <= 1, `${l.u} lost at most one request: ${l.failed.join('; ')}`);
      assert.deepEqual(others, [], 'sessions on the other member lost nothing');
    });

    it('rolling update: a new image key rolls through, discovery never drops below two, no request through the door fails', async () => {
      const t0 = performance.now();
      const prober = doorTraffic([DOOR_USER], 200);
      let doorAnswers: string[] = [];
      const { samples, slow } = await probeDuring(async () => {
        const accepted = await pool.executeUpdate(poolSpecUpdate, { args: [{ template: { imageKey: key2 } }] });
        assert.equal(accepted.revision, 2);
        const st = await until(
          (s) =>
            s.phase === 'Ready' &&
            s.revision === 2 &&
            s.members.every((m) => m.imageKey === key2) &&
            s.members.length === SIZE,
          2 * READY_BOUND_MS,
          'the rollout done',
        );
        assert.equal(st.available, SIZE);
      }).finally(async () => {
        doorAnswers = (await prober.stop()).get(DOOR_USER)!;
      });
      const fewest = Math.min(...samples.map((s) => s.answered));
      const doorFailed = doorAnswers.filter((a) => a.startsWith('!'));
      const ok = samples.length > 10 && fewest >= SIZE && doorFailed.length === 0;
      row(
        'rolling update',
        `done in ${secs(performance.now() - t0)}; ${samples.length} samples, fewest answering ${fewest}, most listed ${Math.max(...samples.map((s) => s.listed))}; first attempts retried ${slow.length}; through the door ${doorAnswers.length} requests by ${new Set(doorAnswers).size - (doorFailed.length ? 1 : 0)} exits, ${doorFailed.length} failed`,
        ok,
      );
      assert.ok(doorAnswers.length > 10, 'the door prober sent requests');
      assert.deepEqual(doorFailed, [], 'no request through the door failed during the rollout');
      assert.ok(samples.length > 10, 'the prober took samples');
      assert.ok(
        fewest >= SIZE,
        `at every sample at least ${SIZE} members answered: ${JSON.stringify(samples.filter((x) => x.failed))}`,
      );
    });

    it('replace member: a banned member leaves the door at once and a replacement makes the pool whole', async () => {
      const before = await status();
      const victim = poolAddresses(before)[0]!;
      const victimIp = victim.address.split(':')[0]!;
      const t0 = performance.now();
      const brief = await within(
        pool.executeUpdate(poolReplaceMemberUpdate, {
          args: [{ name: victim.name, reason: 'e2e: banned by a target' }],
        }),
        30_000,
        'the replaceMember update',
      );
      const outMs = await doorUntil(
        (d) => !d.exits.some((e) => e.name === victim.name && e.role === 'serving'),
        30_000,
        `${victim.name} out of the door's rotation`,
      );
      const after = await Promise.all(Array.from({ length: 20 }, () => throughDoor(DOOR_USER)));
      const st = await until(
        (s) =>
          s.phase === 'Ready' && s.available === SIZE && !s.members.some((m) => m.name === victim.name && m.available),
        READY_BOUND_MS,
        'the pool whole again',
      );
      row(
        'replace member',
        `${victim.name} out of the door ${secs(outMs)} after the update was accepted; whole again after ${secs(performance.now() - t0)}; replacedOnRequest ${st.replacedOnRequest}`,
        !after.includes(victimIp) && st.replacedOnRequest === 1,
      );
      assert.equal(brief.replacedOnRequest, 1, 'the answer counts the request');
      assert.ok(
        !after.includes(victimIp),
        `no request through the door left by ${victim.name} after it left: ${after.join(', ')}`,
      );
      assert.deepEqual(
        after.filter((a) => a.startsWith('!')),
        [],
        'the door answered every request',
      );
      assert.equal(st.replacedOnRequest, 1);
    });

    it('host lost: the members of a black-holed host are replaced on the other; their VMs go once it returns', async () => {
      const before = await status();
      const on = (h: TestHost): string[] => before.members.filter((m) => m.host === h.name).map((m) => m.name);
      const lost = on(hosts[0]!).length >= on(hosts[1]!).length ? hosts[0]! : hosts[1]!;
      const stranded = on(lost);
      assert.ok(stranded.length > 0, `a member runs on ${lost.name}`);
      const t0 = performance.now();
      hole = await blackHoleHost(lost);
      say(`black-holed ${lost.name} (${lost.address}), members there: ${stranded.join(', ')}`);
      let back = 0;
      /** When discovery first listed none of the stranded members, and when the door first sent to none. */
      let outOfDiscovery: number | undefined;
      let outOfDoor: number | undefined;
      const doorWatch = (async () => {
        for (let i = 0; outOfDoor === undefined && i < READY_BOUND_MS / 250; i++) {
          const d = await doorState().catch(() => undefined);
          if (d && !d.exits.some((e) => stranded.includes(e.name) && e.role === 'serving' && e.up)) {
            outOfDoor = performance.now() - t0;
          }
          await sleep(250);
        }
      })();
      try {
        const st = await until(
          (s) => {
            if (outOfDiscovery === undefined && !poolAddresses(s).some((a) => stranded.includes(a.name))) {
              outOfDiscovery = performance.now() - t0;
            }
            return (
              s.available === SIZE &&
              s.members.filter((m) => m.available).every((m) => m.host !== lost.name && !stranded.includes(m.name))
            );
          },
          READY_BOUND_MS,
          `the pool whole again without ${lost.name}`,
        );
        back = performance.now() - t0;
        await doorWatch;
        // Issue goal and docs/health.md, "Detecting a silent host": out of discovery within 10 s of
        // the first failed probe series, which starts at most one health interval after the black
        // hole (the first failed read is bounded by probeTimeoutMs, within those 10 s).
        const bound = healthIntervalMs + 10_000;
        row(
          'host lost',
          `out of the door's rotation ${secs(outOfDoor ?? NaN)} and out of discovery ${secs(outOfDiscovery ?? NaN)} after the black hole (bound ${secs(bound)}); ${SIZE}/${SIZE} available on the other host after ${secs(back)} (replacements ${st.replacements})`,
          outOfDiscovery !== undefined && outOfDiscovery <= bound,
        );
        assert.ok(
          outOfDiscovery !== undefined && outOfDiscovery <= bound,
          `the stranded members out of discovery within ${bound} ms of the black hole: ${outOfDiscovery}`,
        );
      } finally {
        await hole?.lift();
        hole = undefined;
      }
      const t1 = performance.now();
      await until(
        (s) => !s.members.some((m) => stranded.includes(m.name)),
        10 * 60_000,
        'the stranded members deleted',
      );
      const left = (await domainsOf(lost, entry)).filter((d) => stranded.some((n) => d.endsWith(`_${n}`)));
      row(
        'host returned',
        `stranded ${stranded.join(', ')} deleted ${secs(performance.now() - t1)} after it returned; ${left.length} of their domains left`,
        left.length === 0,
      );
      assert.deepEqual(left, []);
    });

    it('drain: the host with the members empties while never fewer than N - 1 answer; uncordon ends its workflow', async () => {
      const before = await status();
      const on = (h: TestHost): string[] => before.members.filter((m) => m.host === h.name).map((m) => m.name);
      const drained = on(hosts[0]!).length >= on(hosts[1]!).length ? hosts[0]! : hosts[1]!;
      const moving = on(drained);
      assert.ok(moving.length > 0, `a member runs on ${drained.name}`);
      const t0 = performance.now();
      let end: HostStatus | undefined;
      const { samples, slow } = await probeDuring(async () => {
        const accepted = await drainHost(client, entry, drained.name, { reason: 'e2e drain' }, taskQueue);
        cordoned = drained.name;
        assert.equal(accepted.cordoned, true);
        say(`draining ${drained.name}, members there: ${moving.join(', ')}`);
        await until(
          (s) =>
            s.phase === 'Ready' &&
            s.available === SIZE &&
            s.members.length === SIZE &&
            s.members.every((m) => m.host !== drained.name),
          2 * READY_BOUND_MS,
          `the pool whole off ${drained.name}`,
        );
        for (let i = 0; i < 90; i++) {
          end = await hostStatus(client, entry, drained.name);
          if (end.phase === 'Drained') break;
          await sleep(2000);
        }
      });
      const fewest = Math.min(...samples.map((s) => s.answered));
      const left = await domainsOf(drained, entry);
      row(
        'drain',
        `${drained.name} ${end?.phase} in ${secs(performance.now() - t0)}, ${left.length} domains of the entry left; ${samples.length} samples, fewest answering ${fewest}; first attempts retried ${slow.length}`,
        end?.phase === 'Drained' && left.length === 0 && fewest >= SIZE - 1,
      );
      assert.equal(end?.phase, 'Drained', `the host's drain finished: ${JSON.stringify(end)}`);
      assert.deepEqual(left, [], `no domain of the entry is left on ${drained.name}`);
      assert.ok(samples.length > 10, 'the prober took samples');
      assert.ok(
        fewest >= SIZE - 1,
        `at every sample at least ${SIZE - 1} members answered: ${JSON.stringify(samples.filter((x) => x.failed))}`,
      );
      const un = await uncordonHost(client, entry, drained.name, { reason: 'e2e drain done' });
      cordoned = undefined;
      assert.equal(un.cordoned, false);
      assert.equal((await hostStatus(client, entry, drained.name)).phase, 'Schedulable');
    });

    it('delete: the pool ends Deleted and leaves no domain of the entry', async () => {
      await pool.executeUpdate(poolDeleteUpdate);
      const end = await within(pool.result(), 5 * 60_000, 'the pool to end');
      assert.equal(end.phase, 'Deleted');
      const left = (await Promise.all(hosts.map((h) => domainsOf(h, entry)))).flat();
      row('delete', `Deleted; ${left.length} domains of the entry left`, left.length === 0);
      assert.deepEqual(left, []);
      assert.ok(seen.size >= 2 * SIZE, `members seen over the run: ${[...seen].join(', ')}`);
      for (const name of seen) {
        const d = await client.workflow.getHandle(proxyWorkflowId(entry, name)).describe();
        assert.notEqual(d.status.name, 'RUNNING', `${name}'s workflow ended`);
      }
    });
  },
);
