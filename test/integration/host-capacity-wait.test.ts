/**
 * Waiting for capacity for real: the dev server, in-process workers with the real workflows and
 * activities, the namespaced test hosts over SSH. With `maxProxies: 0` on both hosts a proxy
 * waits in WaitingForCapacity naming each host, and one whose VM is larger than any host's memory
 * waits naming each host's memory; nothing is created. A worker restarted with room on the first
 * host (`maxProxies: 1`) places the first proxy there at its next re-check (30 s); the large one
 * keeps waiting.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { PROXY_STATUS_QUERY, PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../../contracts/proxy.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import type { ProvidersConfig } from '../../lib/config/index.ts';
import { deleteAll, fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import { connectClient, connectWorker, installTestRuntime, pollUntil, uniqueId } from '../support/temporal.ts';
import { domainsOf, loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const run = Date.now().toString(36);
const HUGE_MIB = 262_144;

describe('a proxy that fits no host waits, and starts once a host has room', { timeout: 300_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let mirror: ImageMirror;
  let hosts: TestHost[];
  let tmp: string;
  let worker: RunningWorker | undefined;
  const started: WorkflowHandle[] = [];

  before(async () => {
    installTestRuntime();
    hosts = loadTestHosts().slice(0, 2);
    assert.equal(hosts.length, 2, 'two test hosts (test/hosts/testhost up 2)');
    client = await connectClient();
    connection = await connectWorker();
    mirror = await ImageMirror.start();
    tmp = await mkdtemp(join(tmpdir(), 'ep-cap-'));
  });
  after(async () => {
    await deleteAll(client, started);
    await worker?.stop();
    await mirror?.close();
    await connection?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const status = (entry: string, name: string): Promise<ProxyStatus> =>
    client.workflow.getHandle(proxyWorkflowId(entry, name)).query<ProxyStatus>(PROXY_STATUS_QUERY);
  const waitFor = (entry: string, name: string, state: string, timeoutMs: number): Promise<ProxyStatus> =>
    pollUntil(
      async () => {
        const st = await status(entry, name).catch(() => undefined);
        return st?.state === state ? st : undefined;
      },
      { timeoutMs, intervalMs: 250, what: `proxy ${name} ${state}` },
    );

  it('WaitingForCapacity names each host and what it lacks; a restarted worker with room places it', async () => {
    const entry = `cw${run}`;
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(file));
    const configWith = (maxProxies: [number, number]): ProvidersConfig => {
      const config = fleetConfig({ entry, ownerUid: `uid-${run}`, hosts, images: { empty: { url } } });
      config.providers[0]!.hosts.forEach((h, i) => (h.maxProxies = maxProxies[i]));
      return config;
    };
    const taskQueue = uniqueId('cap');
    worker = await startFleetWorker(connection, client, configWith([0, 0]), taskQueue);
    const start = async (name: string, vm?: { memoryMiB: number }) => {
      const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
        workflowId: proxyWorkflowId(entry, name),
        taskQueue,
        args: [{ name, entry, imageKey: 'empty', ...(vm ? { vm } : {}) }],
      });
      started.push(handle);
    };
    await start('small');
    await start('huge', { memoryMiB: HUGE_MIB });

    const small = await waitFor(entry, 'small', 'WaitingForCapacity', 60_000);
    const [h1, h2] = hosts.map((h) => h.name);
    assert.equal(
      small.reason,
      `no host has room for a VM of 128 MiB and 1 vCPUs (${h1}: 0 of 0 proxies; ${h2}: 0 of 0 proxies)`,
    );
    const huge = await waitFor(entry, 'huge', 'WaitingForCapacity', 60_000);
    for (const h of [h1, h2]) {
      assert.match(
        huge.reason ?? '',
        new RegExp(
          `${h}: 0 of 0 proxies, memory: \\d+ of \\d+ MiB committed \\(\\d+ MiB × 1\\), ${HUGE_MIB} more do not fit`,
        ),
      );
    }
    assert.equal(small.host, undefined);
    for (const h of hosts) assert.deepEqual(await domainsOf(h, entry), [], `nothing created on ${h.name}`);

    // The operator gives the first host room and restarts the worker: the next re-check places it.
    await worker.stop();
    worker = await startFleetWorker(connection, client, configWith([1, 0]), taskQueue);
    const running = await waitFor(entry, 'small', 'Running', 150_000);
    assert.equal(running.host, h1);
    assert.deepEqual((await domainsOf(hosts[0]!, entry)).length, 1);
    const still = await status(entry, 'huge');
    assert.equal(still.state, 'WaitingForCapacity');
    // Its own re-check may come before or after the small one's VM counts on h1: memory it lacks either way.
    assert.match(still.reason ?? '', new RegExp(`${h1}: (1 of 1 proxies, )?memory: [^;]*${HUGE_MIB} more do not fit`));
  });
});
