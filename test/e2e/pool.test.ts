/**
 * A pool end to end, with real Squid guests on both test hosts: a worker process, a providers
 * file with one entry over ep-h1 and ep-h2 and two image keys of the same image (served by a
 * loopback mirror), and a health target on ep-h1's root-side address. Each check prints one row:
 *
 *   pool ready      size 2 reaches Ready: two members Healthy and in discovery, one per host
 *   VM destroyed    one member's domain destroyed behind the system's back (virsh destroy):
 *                   the pool is back to 2 available (the member's VM recreated or the member replaced)
 *   rolling update  the template's image key changes with maxSurge 1, maxUnavailable 0 while a
 *                   prober asks the pool every second for its discovery list and CONNECTs through
 *                   each listed member (from inside the member's host; a failed CONNECT is retried
 *                   once at once, and counted): at no sample do fewer than 2 answer; every member
 *                   ends on the new key
 *   host lost       the host with the most members black-holed (a blackhole route to its address):
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
 * to loopback and to the test hosts (CONNECTs are sent from inside the member's host namespace).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { poolDeleteUpdate, poolSpecUpdate, poolStatusQuery } from '../../contracts/messages.ts';
import { POOL_WORKFLOW_TYPE, poolAddresses, poolWorkflowId } from '../../contracts/pool.ts';
import { poolTaskQueue } from '../../contracts/task-queues.ts';
import type { PoolSpec, PoolStatus } from '../../contracts/pool.ts';
import type { HostStatus } from '../../contracts/host.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { drainHost, hostStatus, uncordonHost } from '../../client/hosts.ts';
import type { poolWorkflow } from '../../workflows/pool/index.ts';
import { sleep, within } from '../support/bounded.ts';
import { spawnWorker, writeProvidersFile } from '../support/fleet.ts';
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
    let pool: WorkflowHandle<typeof poolWorkflow>;
    let taskQueue = '';
    const rows: string[] = [];
    /** The test host drained right now (uncordoned on every path). */
    let cordoned: string | undefined;
    /** The test host address black-holed right now (removed on every path). */
    let blackholed: string | undefined;
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
      web = http.createServer((_req, res) => res.end('hello from the pool prober target\n'));
      await new Promise<void>((resolve) => web.listen(0, hosts[0]!.rootSideAddress, resolve));
      const config = guestEntryConfig({
        entry,
        ownerUid: owner,
        hosts,
        images: {
          [key1]: { url: mirror.serve(`/${entry}/a.qcow2`, image), sha256: sha },
          [key2]: { url: mirror.serve(`/${entry}/b.qcow2`, image), sha256: sha },
        },
        targetPort: target.port,
      });
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
      say(`entry ${entry}, pool ${pool.workflowId}, task queue ${taskQueue}, worker pid ${worker.child.pid}`);
    });

    after(async () => {
      if (blackholed !== undefined)
        await pexec('ip', ['route', 'del', 'blackhole', `${blackholed}/32`]).catch(() => undefined);
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

    it('VM destroyed: the pool is back to two available', async () => {
      const before = await status();
      const victim = before.members[0]!;
      const host = hostNamed(victim.host)!;
      const domain = `ep_${entry}_${victim.name}`;
      const t0 = performance.now();
      await virsh(host, 'destroy', domain);
      say(`destroyed ${domain} on ${host.name}`);
      // First the loss is seen (the member is not available), then the pool is whole again.
      await until(
        (s) => s.available < SIZE || !s.members.some((m) => m.name === victim.name && m.available),
        3 * 60_000,
        'the loss seen',
      );
      const st = await until(
        (s) => s.phase === 'Ready' && s.available === SIZE,
        READY_BOUND_MS,
        'the pool whole again',
      );
      const replaced = !st.members.some((m) => m.name === victim.name);
      row(
        'VM destroyed',
        `${SIZE}/${SIZE} available again after ${secs(performance.now() - t0)} (${replaced ? `${victim.name} replaced` : `${victim.name}'s VM recreated`}; replacements ${st.replacements})`,
      );
    });

    it('rolling update: a new image key rolls through and discovery never drops below two', async () => {
      const t0 = performance.now();
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
      });
      const fewest = Math.min(...samples.map((s) => s.answered));
      const ok = samples.length > 10 && fewest >= SIZE;
      row(
        'rolling update',
        `done in ${secs(performance.now() - t0)}; ${samples.length} samples, fewest answering ${fewest}, most listed ${Math.max(...samples.map((s) => s.listed))}; first attempts retried ${slow.length}`,
        ok,
      );
      assert.ok(samples.length > 10, 'the prober took samples');
      assert.ok(
        fewest >= SIZE,
        `at every sample at least ${SIZE} members answered: ${JSON.stringify(samples.filter((x) => x.failed))}`,
      );
    });

    it('host lost: the members of a black-holed host are replaced on the other; their VMs go once it returns', async () => {
      const before = await status();
      const on = (h: TestHost): string[] => before.members.filter((m) => m.host === h.name).map((m) => m.name);
      const lost = on(hosts[0]!).length >= on(hosts[1]!).length ? hosts[0]! : hosts[1]!;
      const stranded = on(lost);
      assert.ok(stranded.length > 0, `a member runs on ${lost.name}`);
      const t0 = performance.now();
      await pexec('ip', ['route', 'add', 'blackhole', `${lost.address}/32`], { timeout: 10_000 });
      blackholed = lost.address;
      say(`black-holed ${lost.name} (${lost.address}), members there: ${stranded.join(', ')}`);
      let back = 0;
      try {
        const st = await until(
          (s) =>
            s.available === SIZE &&
            s.members.filter((m) => m.available).every((m) => m.host !== lost.name && !stranded.includes(m.name)),
          READY_BOUND_MS,
          `the pool whole again without ${lost.name}`,
        );
        back = performance.now() - t0;
        row(
          'host lost',
          `${SIZE}/${SIZE} available on the other host ${secs(back)} after the black hole (replacements ${st.replacements})`,
        );
      } finally {
        await pexec('ip', ['route', 'del', 'blackhole', `${lost.address}/32`], { timeout: 10_000 });
        blackholed = undefined;
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
