/**
 * The worker refuses to start when open proxy workflows of its task queue sit on a host (or entry)
 * its providers file no longer has: exit 2, one fatal JSON line naming entry/host, the proxies and
 * the fix. With the host back in the file it starts. The proxy workflows are started on a task
 * queue nobody polls (until the second worker), with the search attributes a placed proxy has
 * (two as members of a pool, whose members are proxy workflows too),
 * and terminated at the end.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { openProxiesQuery } from '../../client/host-removal.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../../contracts/proxy.ts';
import { SA_PROVIDER_ENTRY, SA_PROXY_HOST, SA_PROXY_POOL } from '../../contracts/search-attributes.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import { connectClient, PROJECT_ROOT, pollUntil, uniqueId } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const WORKER = join(PROJECT_ROOT, 'bin/worker');
const ENTRY_KEY = defineSearchAttributeKey(SA_PROVIDER_ENTRY, SearchAttributeType.KEYWORD);
const HOST_KEY = defineSearchAttributeKey(SA_PROXY_HOST, SearchAttributeType.KEYWORD);
const POOL_KEY = defineSearchAttributeKey(SA_PROXY_POOL, SearchAttributeType.KEYWORD);

let tmp: string;
let client: Client;
const started: WorkflowHandle[] = [];

before(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'ep-host-removal-'));
  client = await connectClient();
});
after(async () => {
  for (const h of started) await h.terminate('test over').catch(() => undefined);
  await client?.connection.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** An open workflow of the proxy type on `taskQueue` whose search attributes place it on entry/host (a member of `pool`). */
async function placedProxy(
  taskQueue: string,
  entry: string,
  name: string,
  host: string,
  pool?: string,
): Promise<WorkflowHandle> {
  const h = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
    workflowId: proxyWorkflowId(entry, name),
    taskQueue,
    args: [],
    typedSearchAttributes: [
      { key: ENTRY_KEY, value: entry },
      { key: HOST_KEY, value: host },
      ...(pool === undefined ? [] : [{ key: POOL_KEY, value: `${entry}/${pool}` }]),
    ],
    workflowExecutionTimeout: '10 minutes',
  });
  started.push(h);
  return h;
}

it(
  'refuses a providers file that lost a host (or an entry) proxies live on; starts with it back',
  { timeout: 180_000 },
  async () => {
    const [kept, removed] = loadTestHosts();
    assert.ok(kept && removed, 'needs two test hosts (test/hosts/testhost up 2)');
    const run = Date.now().toString(36);
    const entry = `hr${run}`;
    const taskQueue = uniqueId('hr');
    const images = { empty: { url: 'http://127.0.0.1:9/e.qcow2' } };
    // Five standalone proxies and two members of a pool (a pool's member is a proxy workflow too).
    for (let i = 0; i < 5; i++) await placedProxy(taskQueue, entry, `p${i}`, removed.name);
    for (const m of ['pool-aaaaa', 'pool-bbbbb']) await placedProxy(taskQueue, entry, m, removed.name, 'pool');
    const gone = await placedProxy(taskQueue, `${entry}old`, 'q0', 'hv-old');
    // Visibility answers once the starts are indexed (bounded).
    await pollUntil(
      async () => ((await client.workflow.count(openProxiesQuery(taskQueue))).count >= 8 ? true : undefined),
      {
        timeoutMs: 20_000,
        intervalMs: 250,
        what: 'the proxies in visibility',
      },
    );

    const without = await writeProvidersFile(
      tmp,
      fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [kept], images }),
    );
    const refused = await pexec(
      process.execPath,
      [WORKER, '--providers', without, '--task-queue', taskQueue, '--no-schedules'],
      { timeout: 60_000, env: { ...process.env, LOG_LEVEL: 'info' } },
    ).then(
      () => undefined,
      (e: unknown) => e as { code: number; stdout: string },
    );
    assert.ok(refused, 'the worker refused to start');
    assert.equal(refused.code, 2, refused.stdout);
    const fatal = refused.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: string; msg: string; code?: string; stranded?: { proxies: string[] }[] })
      .find((l) => l.level === 'fatal');
    assert.ok(fatal, refused.stdout);
    assert.equal(fatal.code, 'HOSTS_REMOVED_WITH_PROXIES');
    assert.ok(fatal.msg.includes(`${entry}/${removed.name}: 7 proxies p0, p1, p2, p3, p4 (and 2 more)`), fatal.msg);
    assert.deepEqual(fatal.stranded?.[0]?.proxies.slice(5), ['pool-aaaaa', 'pool-bbbbb'], 'the pool members counted');
    assert.ok(fatal.msg.includes(`${entry}old/hv-old (entry ${entry}old is not in the file): 1 proxy q0`), fatal.msg);
    assert.ok(fatal.msg.includes(`egressctl host drain ${entry}/${removed.name}`), fatal.msg);
    assert.ok(!refused.stdout.includes('"worker running"'), 'it never polled');

    // The removed entry's proxy deleted, the host back in the file: the worker starts.
    await gone.terminate('deleted');
    await pollUntil(
      async () => ((await client.workflow.count(openProxiesQuery(taskQueue))).count === 7 ? true : undefined),
      {
        timeoutMs: 20_000,
        intervalMs: 250,
        what: 'the terminated proxy out of visibility',
      },
    );
    const withHost = await writeProvidersFile(
      tmp,
      fleetConfig({ entry, ownerUid: `uid-${run}`, hosts: [kept, removed], images }),
    );
    const worker = await spawnWorker(withHost, taskQueue);
    try {
      assert.ok(worker.lines.some((l) => l.includes('"worker running"')));
    } finally {
      for (const h of started) await h.terminate('test over').catch(() => undefined);
      await worker.stop();
    }
  },
);
