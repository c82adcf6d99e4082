/**
 * Scale-out and outages on the cluster mode (`scripts/temporal cluster`: the real Temporal server
 * on PostgreSQL, mTLS frontend), with real processes: two worker processes (`bin/worker`) and two
 * API replicas (`bin/api`, one page-token secret) on one task queue, the namespaced test hosts over
 * SSH, and a loopback mirror that paces an image so that its upload lasts. Proves:
 *  - scale-out: the worker running a proxy's image upload is SIGKILLed and the other, already
 *    running, fetches it again and takes the proxy to Running; each API replica answers for the
 *    proxy the other created, and a page token one issued is honoured by the other;
 *  - the Temporal server SIGKILLed (`cluster kill-server`) with workflows in flight (durable timers,
 *    the proxy's health loop): while it is down the API answers 503 TEMPORAL_UNAVAILABLE and the
 *    worker logs "Temporal unavailable"; `cluster up` restarts it on the same PostgreSQL data and
 *    every run finishes, by the same worker processes, with no restart of theirs;
 *  - PostgreSQL stopped for 20 s (`cluster pg-stop`, the server left running): the API answers 503
 *    TEMPORAL_UNAVAILABLE to reads and writes, the worker logs "Temporal unavailable"; once
 *    `cluster pg-start` brings it back both recover by themselves (the worker logs "Temporal
 *    reachable again", the API answers 200 again), the proxy created just before the outage and
 *    the workflows started before it finish, and the create refused during it succeeds when retried.
 *
 * Needs: test hosts (`test/hosts/testhost up 2`); the cluster is started here (`clusterUp`,
 * idempotent) and left running and healthy (`after` restores PostgreSQL and the server).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { TemporalSettings } from '../../client/connection.ts';
import { SMOKE_WORKFLOW_TYPE } from '../../contracts/smoke.ts';
import type { SmokeResult } from '../../contracts/smoke.ts';
import { spawnApiProcess } from '../support/api-process.ts';
import type { ApiProcess } from '../support/api-process.ts';
import { writeTokens } from '../support/api.ts';
import type { TestTokens } from '../support/api.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import type { WorkerProcess } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import {
  CLUSTER_UP_TIMEOUT_MS,
  clusterCommand,
  clusterEnv,
  clusterRestore,
  clusterUp,
} from '../support/temporal-cluster.ts';
import { PROJECT_ROOT, connectClient, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import { domainsOf, loadTestHosts, virsh, volumesOf } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const MiB = 1024 * 1024;
/** Bound of one HTTP request to the API: its Temporal calls give up after 10 s (client/). */
const REQUEST_TIMEOUT_MS = 30_000;
const OUTAGE_MS = 20_000;

interface Answer {
  status: number;
  body: Record<string, unknown>;
  ms: number;
}

describe('cluster mode: scale-out, a killed server, a stopped PostgreSQL', { timeout: 900_000 }, () => {
  let cluster: TemporalSettings;
  let env: Record<string, string>;
  let client: Client;
  let host: TestHost;
  let mirror: ImageMirror;
  let tmp: string;
  let tokens: TestTokens;
  let providers: string;
  const entry = `co${run}`;
  const taskQueue = uniqueId('cluster-outage');
  const bigPath = `/${entry}/big.qcow2`;
  const workers: WorkerProcess[] = [];
  const apis: ApiProcess[] = [];
  /** Proxies this test created (deleted at the end). */
  const proxies = new Set<string>();

  const call = async (
    api: ApiProcess,
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = REQUEST_TIMEOUT_MS,
  ): Promise<Answer> => {
    const t0 = performance.now();
    const res = await fetch(api.url + path, {
      method,
      headers: {
        authorization: `Bearer ${tokens.admin}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      ms: performance.now() - t0,
    };
  };
  const create = (api: ApiProcess, name: string, imageKey: string): Promise<Answer> => {
    proxies.add(name);
    return call(api, 'POST', '/v1/proxies', { name, entry, imageKey });
  };
  const stateOf = async (api: ApiProcess, name: string): Promise<string | undefined> => {
    const a = await call(api, 'GET', `/v1/proxies/${entry}/${name}`).catch(() => undefined);
    return a?.status === 200 ? (a.body['status'] as { state?: string } | undefined)?.state : undefined;
  };
  const waitState = (api: ApiProcess, name: string, state: string, timeoutMs: number): Promise<true> =>
    pollUntil(async () => ((await stateOf(api, name)) === state ? true : undefined), {
      timeoutMs,
      intervalMs: 1_000,
      what: `proxy ${entry}/${name} ${state} through ${api.url}`,
    });
  /** Bounded: the first line of `w` after index `from` containing `text`. */
  const waitLine = (w: WorkerProcess, text: string, from: number, timeoutMs: number): Promise<string> =>
    pollUntil(async () => Promise.resolve(w.lines.slice(from).find((l) => l.includes(text))), {
      timeoutMs,
      intervalMs: 250,
      what: `worker ${w.child.pid} to log ${JSON.stringify(text)}`,
    });
  const alive = (): WorkerProcess[] => workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
  const assertUnavailable = (a: Answer, what: string): void => {
    assert.equal(a.status, 503, `${what}: ${JSON.stringify(a.body)}`);
    assert.equal(
      (a.body['error'] as { code?: string }).code,
      'TEMPORAL_UNAVAILABLE',
      `${what}: ${JSON.stringify(a.body)}`,
    );
  };
  const startSmokes = async (tag: string, n: number, sleepMs: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const workflowId = uniqueId(`smoke/${tag}-${i}`);
      await client.workflow.start(SMOKE_WORKFLOW_TYPE, {
        taskQueue,
        workflowId,
        args: [{ name: `${tag}-${i}`, sleepMs }],
      });
      ids.push(workflowId);
    }
    return ids;
  };
  const smokeResults = (ids: string[], timeoutMs: number): Promise<SmokeResult[]> =>
    withTimeout(
      Promise.all(ids.map((id) => client.workflow.getHandle(id).result() as Promise<SmokeResult>)),
      timeoutMs,
      `the results of ${ids.length} smoke workflows`,
    );

  before(
    async () => {
      host = loadTestHosts()[0]!;
      cluster = await clusterUp();
      env = clusterEnv(cluster);
      client = await connectClient(cluster.address, cluster.namespace, { tls: cluster.tls });
      mirror = await ImageMirror.start();
      tmp = await mkdtemp(join(tmpdir(), 'ep-cluster-outage-'));
      const file = join(tmp, 'empty.qcow2');
      await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
      const image = await readFile(file);
      // 24 MiB at 4 MiB/s: about 6 s per transfer, killed after 4 MiB.
      const big = mirror.serve(bigPath, Buffer.concat([image, Buffer.alloc(24 * MiB, 0x5a)]), {
        kind: 'slow',
        bytesPerSecond: 4 * MiB,
      });
      const empty = mirror.serve(`/${entry}/empty.qcow2`, image);
      const config = fleetConfig({
        entry,
        ownerUid: `uid-${run}`,
        hosts: [host],
        images: { big: { url: big }, empty: { url: empty } },
      });
      providers = await writeProvidersFile(tmp, config);
      tokens = await writeTokens(tmp);
      // Started one after the other: they share the workflow bundle cache.
      for (let i = 0; i < 2; i++) workers.push(await spawnWorker(providers, taskQueue, 120_000, env));
      const secret = { ...env, EP_API_PAGE_TOKEN_SECRET: randomBytes(32).toString('hex') };
      apis.push(
        await spawnApiProcess(tokens.file, taskQueue, secret, 60_000),
        await spawnApiProcess(tokens.file, taskQueue, secret, 60_000),
      );
    },
    { timeout: CLUSTER_UP_TIMEOUT_MS + 300_000 },
  );

  after(async () => {
    // The cluster first: other tests use it after this one.
    await clusterRestore().catch((err: unknown) =>
      process.stderr.write(`# the cluster could not be restored: ${(err as Error).message}\n`),
    );
    // Every process's lines, for the reader of a failure (and of what the processes said).
    const logs = join(PROJECT_ROOT, '.data/artifacts', `cluster-outage-${run}`);
    await mkdir(logs, { recursive: true }).catch(() => undefined);
    for (const [i, w] of workers.entries()) await writeFile(join(logs, `worker-${i}.log`), w.lines.join('\n') + '\n');
    for (const [i, a] of apis.entries()) await writeFile(join(logs, `api-${i}.log`), a.lines.join('\n') + '\n');
    process.stderr.write(`# process logs: ${logs}\n`);
    for (const name of proxies) {
      if (alive().length === 0 || apis.length === 0) break;
      await call(apis[0]!, 'DELETE', `/v1/proxies/${entry}/${name}?wait=true&waitMs=20000`).catch(() => undefined);
    }
    await Promise.all(workers.map((w) => w.kill().catch(() => undefined)));
    for (const a of apis) if (a.child.exitCode === null) a.child.kill('SIGKILL');
    await client?.connection.close().catch(() => undefined);
    if (host) {
      for (const key of ['big', 'empty']) {
        for (const vol of [`base-${entry}-${key}.qcow2.marker`, `base-${entry}-${key}.qcow2`]) {
          await virsh(host, 'vol-delete', '--pool', host.pool, vol).catch(() => undefined);
        }
      }
    }
    await mirror?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it("scale-out: the worker uploading is SIGKILLed, the other finishes; either API replica serves the proxy and the other one's page tokens", async () => {
    const created = await create(apis[0]!, 'o1', 'big');
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await pollUntil(
      async () =>
        mirror.sentBytes(bigPath) >= 4 * MiB && (await volumesOf(host, entry)).includes(`base-${entry}-big.qcow2`)
          ? true
          : undefined,
      { timeoutMs: 90_000, intervalMs: 250, what: `the upload of ${bigPath} to be under way` },
    );
    const uploading = workers.findIndex((w) => w.lines.some((l) => l.includes('"activityType":"ensureBaseImage"')));
    assert.ok(uploading >= 0, 'one of the workers logged the upload activity');
    const survivor = workers[1 - uploading]!;
    await workers[uploading]!.kill();
    await waitState(apis[1]!, 'o1', 'Running', 240_000);
    assert.equal(survivor.child.exitCode, null, 'the other worker ran on');
    assert.ok(
      survivor.lines.some((l) => l.includes('replacing the debris of an interrupted image fetch')),
      'the surviving worker took the upload over',
    );
    assert.equal(mirror.requests(bigPath), 2, 'the survivor fetched the image once more');
    assert.equal((await domainsOf(host, entry)).length, 1, 'exactly one domain');

    // A second proxy through the other replica; each replica lists both, and a page token of one
    // is honoured by the other (one EP_API_PAGE_TOKEN_SECRET).
    assert.equal((await create(apis[1]!, 'o2', 'empty')).status, 201);
    assert.equal((await call(apis[0]!, 'GET', `/v1/proxies/${entry}/o2`)).status, 200);
    // Running before the server is killed: an activity that completes while the server is down for
    // over 10 s loses its completion (Core gives up reporting it) and waits for its timeout, 5 min
    // for libvirt calls (docs/temporal.md, "Outages"). Waited for first, so that a failure below
    // does not leave o2 mid-create for the tests after this one.
    await waitState(apis[0]!, 'o2', 'Running', 180_000);
    // Visibility is written after the start: wait until one unpaged list holds both. A full page
    // carries a next-page token whether or not more rows exist (SQL visibility), so a token alone
    // does not say that the second proxy is listed yet.
    await pollUntil(
      async () => {
        const a = await call(apis[0]!, 'GET', `/v1/proxies?entry=${entry}&pageSize=10`);
        const listed = a.status === 200 ? (a.body['proxies'] as { name: string }[]).map((p) => p.name) : [];
        return listed.includes('o1') && listed.includes('o2') ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'visibility to list both proxies' },
    );
    const first = await pollUntil(
      async () => {
        const a = await call(apis[0]!, 'GET', `/v1/proxies?entry=${entry}&pageSize=1`);
        return a.status === 200 && typeof a.body['nextPageToken'] === 'string' ? a : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'a first page of one proxy with a next-page token' },
    );
    const token = encodeURIComponent(first.body['nextPageToken'] as string);
    const second = await call(apis[1]!, 'GET', `/v1/proxies?entry=${entry}&pageSize=1&pageToken=${token}`);
    assert.equal(second.status, 200, JSON.stringify(second.body));
    const names = [first, second].map((a) => (a.body['proxies'] as { name: string }[])[0]!.name).sort();
    assert.deepEqual(names, ['o1', 'o2']);
  });

  it('the Temporal server SIGKILLed with runs in flight: 503 and "Temporal unavailable" while down; after `cluster up` every run finishes, no process restarted', async () => {
    const worker = alive()[0]!;
    const mark = worker.lines.length;
    // Five runs parked on a 10 s durable timer, three that start their activity as the server dies.
    const sleeping = await startSmokes('kill', 5, 10_000);
    await pollUntil(
      async () =>
        Promise.resolve(
          sleeping.every((id) =>
            worker.lines.slice(mark).some((l) => l.includes('smoke workflow sleeping') && l.includes(id)),
          )
            ? true
            : undefined,
        ),
      { timeoutMs: 30_000, intervalMs: 250, what: 'the smoke workflows to sleep on their timers' },
    );
    const racing = await startSmokes('kill-late', 3, 0);
    await clusterCommand(['kill-server']);
    const killedAt = performance.now();
    try {
      const down = await call(apis[0]!, 'GET', `/v1/proxies?entry=${entry}`);
      assertUnavailable(down, 'a list while the server is down');
      const downCreate = await create(apis[1]!, 'o3', 'empty');
      assertUnavailable(downCreate, 'a create while the server is down');
      const unavailable = await waitLine(worker, 'Temporal unavailable', mark, 30_000);
      process.stderr.write(
        `# server down: list 503 in ${Math.round(down.ms)} ms, create 503 in ${Math.round(downCreate.ms)} ms; worker: ${unavailable.slice(0, 300)}\n`,
      );
    } finally {
      await clusterCommand(['up'], CLUSTER_UP_TIMEOUT_MS);
    }
    const upAt = performance.now();
    await waitLine(worker, 'Temporal reachable again', mark, 60_000);
    const results = await smokeResults([...sleeping, ...racing], 120_000);
    for (const [i, r] of results.slice(0, 5).entries()) {
      assert.equal(r.greeting, `hello, kill-${i}`);
      assert.equal(r.sleptMs, 10_000);
      assert.equal(r.activityAttempt, 1, 'the activity before the crash was not run again');
    }
    for (const [i, r] of results.slice(5).entries()) assert.equal(r.greeting, `hello, kill-late-${i}`);
    // The API recovered without a restart; the create refused while down succeeds when retried.
    await pollUntil(
      async () => ((await call(apis[0]!, 'GET', `/v1/proxies?entry=${entry}`)).status === 200 ? true : undefined),
      {
        timeoutMs: 60_000,
        intervalMs: 1_000,
        what: 'the API to answer 200 again',
      },
    );
    const retried = await create(apis[1]!, 'o3', 'empty');
    assert.ok([200, 201].includes(retried.status), JSON.stringify(retried.body));
    await waitState(apis[0]!, 'o1', 'Running', 60_000);
    await waitState(apis[0]!, 'o3', 'Running', 180_000);
    assert.equal(worker.child.exitCode, null, 'the same worker process carried the runs through the restart');
    for (const a of apis) assert.equal(a.child.exitCode, null, 'the API replicas ran on');
    process.stderr.write(
      `# server killed: up again ${Math.round((upAt - killedAt) / 1000)} s after the kill; 8 of 8 runs finished\n`,
    );
  });

  it('PostgreSQL stopped for 20 s: 503 and "Temporal unavailable" during it; both recover by themselves; nothing accepted before is lost', async () => {
    const worker = alive()[0]!;
    const mark = worker.lines.length;
    const before = await create(apis[0]!, 'o4', 'empty');
    assert.equal(before.status, 201, JSON.stringify(before.body));
    await waitState(apis[1]!, 'o4', 'Running', 180_000); // see o2 in the first test
    const sleeping = await startSmokes('pg', 4, 5_000);
    await clusterCommand(['pg-stop']);
    const stoppedAt = performance.now();
    try {
      const read = await call(apis[1]!, 'GET', `/v1/proxies?entry=${entry}`);
      assertUnavailable(read, 'a list while PostgreSQL is down');
      const write = await create(apis[0]!, 'o5', 'empty');
      assertUnavailable(write, 'a create while PostgreSQL is down');
      const ready = await call(apis[0]!, 'GET', '/readyz');
      assert.equal(ready.status, 503, `/readyz while PostgreSQL is down: ${JSON.stringify(ready.body)}`);
      assert.equal(ready.body['temporal'], 'unreachable', JSON.stringify(ready.body));
      const unavailable = await waitLine(worker, 'Temporal unavailable', mark, OUTAGE_MS);
      process.stderr.write(
        `# PostgreSQL down: list 503 in ${Math.round(read.ms)} ms, create 503 in ${Math.round(write.ms)} ms; worker: ${unavailable.slice(0, 300)}\n`,
      );
      const rest = OUTAGE_MS - (performance.now() - stoppedAt);
      if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
    } finally {
      await clusterCommand(['pg-start']);
    }
    const downMs = performance.now() - stoppedAt;
    assert.ok(downMs >= OUTAGE_MS, `down ${Math.round(downMs)} ms`);
    await waitLine(worker, 'Temporal reachable again', mark, 60_000);
    await pollUntil(
      async () => {
        const answers = await Promise.all(
          apis.map((a) => call(a, 'GET', `/v1/proxies?entry=${entry}`).catch(() => undefined)),
        );
        return answers.every((a) => a?.status === 200) ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: 'both API replicas to answer 200 again' },
    );
    await pollUntil(async () => ((await call(apis[0]!, 'GET', '/readyz')).status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 1_000,
      what: '/readyz to answer 200 again',
    });
    const results = await smokeResults(sleeping, 120_000);
    results.forEach((r, i) => assert.equal(r.greeting, `hello, pg-${i}`));
    const retried = await create(apis[0]!, 'o5', 'empty');
    assert.ok([200, 201].includes(retried.status), JSON.stringify(retried.body));
    await waitState(apis[1]!, 'o4', 'Running', 60_000);
    await waitState(apis[1]!, 'o5', 'Running', 180_000);
    assert.equal(worker.child.exitCode, null, 'the worker ran on through the outage');
    for (const a of apis) assert.equal(a.child.exitCode, null, 'the API replicas ran on');
    process.stderr.write(
      `# PostgreSQL stopped ${Math.round(downMs / 1000)} s: 4 of 4 runs finished, o4 and o5 Running\n`,
    );
  });

  it('every proxy deletes through the API; nothing is left on the host', async () => {
    for (const name of proxies) {
      const a = await call(
        apis[1]!,
        'DELETE',
        `/v1/proxies/${entry}/${name}?wait=true&waitMs=90000`,
        undefined,
        100_000,
      );
      assert.equal(a.status, 200, `${name}: ${JSON.stringify(a.body)}`);
      assert.equal(a.body['state'], 'Deleted', `${name}: ${JSON.stringify(a.body)}`);
    }
    proxies.clear();
    assert.deepEqual(await domainsOf(host, entry), []);
  });
});
