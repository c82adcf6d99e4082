/**
 * A host's cordon as placement sees it, on the dev server with a real worker (the real host
 * workflow and activities, over one namespaced test host, an entry of its own): client/hosts.ts
 * cordons the host and the worker's own `surveyHosts` (the libvirt survey of the host, its cordon
 * read from the host workflow) marks it `cordoned` at the next call, inside the survey's 5 s
 * cache; a drain of the host (none of this entry's proxies on it) lists it through visibility and
 * the host's libvirt and reaches Drained; uncordon ends the workflow and the next survey has the
 * host schedulable. A cordon of a host the providers file lacks is refused naming the known one.
 * No VM is created.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { createActivities } from '../../activities/index.ts';
import {
  cordonedHosts,
  cordonHost,
  drainHost,
  HostActionRefusedError,
  hostStatus,
  uncordonHost,
} from '../../client/hosts.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import { hostWorkflowId } from '../../contracts/host.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { connectClient, connectWorker, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const entry = `hk${run}`.slice(0, 30);

describe('cordon through the host workflow, read by the real survey', { timeout: 180_000 }, () => {
  let client: Client;
  let connection: NativeConnection;
  let worker: RunningWorker;
  let survey: (input: { entry: string }) => Promise<HostSurvey[]>;
  let host: string;
  const taskQueue = uniqueId('host-cordon');

  before(async () => {
    const hosts = loadTestHosts().slice(0, 1);
    assert.equal(hosts.length, 1, 'a test host (test/hosts/testhost up 2)');
    host = hosts[0]!.name;
    client = await connectClient();
    connection = await connectWorker();
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts,
      images: { empty: { url: 'http://127.0.0.1:9/empty.qcow2' } },
    });
    worker = await startFleetWorker(connection, client, config, taskQueue);
    const activities = createActivities({ registry: worker.registry, client, taskQueue });
    survey = (input) => activities.surveyHosts(input);
  });
  after(async () => {
    await client?.workflow
      .getHandle(hostWorkflowId(entry, host))
      .terminate('test over')
      .catch(() => undefined);
    await worker?.stop();
    await connection?.close();
    await client?.connection.close();
  });

  const surveyed = async (): Promise<HostSurvey> => {
    const s = (await survey({ entry })).find((h) => h.host === host);
    assert.ok(s, `the survey has ${host}`);
    return s;
  };

  it('a cordon is in the next survey (the libvirt part still cached); uncordon takes it out', async () => {
    const first = await surveyed();
    assert.equal(first.reachable, true, first.error);
    assert.equal(first.cordoned, undefined);

    const st = await cordonHost(client, entry, host, { reason: 'integration test' }, taskQueue);
    assert.deepEqual([st.phase, st.cordoned, st.reason], ['Cordoned', true, 'integration test']);
    const marked = await surveyed();
    assert.equal(marked.cordoned, true, 'the survey right after the cordon marks the host');
    assert.equal(marked.rttMs, first.rttMs, 'from the same cached libvirt survey');
    assert.deepEqual([...(await cordonedHosts(client, entry, [host]))], [host]);

    const un = await uncordonHost(client, entry, host, {});
    assert.deepEqual([un.phase, un.cordoned], ['Schedulable', false]);
    const desc = await client.workflow.getHandle(hostWorkflowId(entry, host)).describe();
    assert.equal(desc.status.name, 'COMPLETED', 'uncordon ended the workflow');
    assert.equal((await surveyed()).cordoned, undefined, 'schedulable at the next survey');
  });

  it('a drain of a host without our proxies reaches Drained from the real listing', async () => {
    const st = await drainHost(client, entry, host, { reason: 'empty host' }, taskQueue);
    assert.equal(st.cordoned, true);
    const drained = await pollUntil(
      async () => {
        const s = await hostStatus(client, entry, host);
        return s.phase === 'Drained' ? s : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250, what: 'Drained' },
    );
    assert.equal(drained.drain?.remaining, 0);
    assert.equal(drained.drain?.lastError, undefined, 'the host answered the listing');
    assert.ok(drained.drain?.finishedAt);
    assert.equal((await surveyed()).cordoned, true, 'a drained host stays cordoned');
    await withTimeout(uncordonHost(client, entry, host, {}), 20_000, 'uncordon');
    assert.equal((await hostStatus(client, entry, host)).phase, 'Schedulable');
  });

  it('a host the providers file lacks is refused naming the known one', async () => {
    await assert.rejects(
      cordonHost(client, entry, 'no-such-host', {}, taskQueue),
      (err: Error) =>
        err instanceof HostActionRefusedError && err.message.includes(`no host "no-such-host" (known: ${host})`),
    );
    assert.equal((await hostStatus(client, entry, 'no-such-host')).phase, 'Schedulable');
  });
});
