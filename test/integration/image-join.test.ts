/**
 * The joinImage activity for real: the dev server, a test host over SSH, the activity run as the
 * worker runs it (MockActivityEnvironment, real registry and client). It joins the host's
 * ensure-image workflow (signal-with-start, here on a task queue no worker polls, so the workflow
 * only records the join) and then looks in the pool: with no base there it returns null (the
 * waiter waits for the signal); with the entry's verified base there it returns that base (the
 * late joiner, which the broadcast missed, goes on at once). Either way the join is in the image
 * workflow's history. Everything made is removed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createImageActivities } from '../../activities/image.ts';
import { HostRegistry } from '../../activities/hosts.ts';
import { IMAGE_JOIN_SIGNAL, imageWorkflowId } from '../../contracts/image.ts';
import type { EnsuredBase, ImageWorkflowInput } from '../../contracts/image.ts';
import { parseProvidersYaml } from '../../lib/config/index.ts';
import { fleetConfig } from '../support/fleet.ts';
import { connectClient, uniqueId } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';
import { plantVerifiedBase, removeVerifiedBase } from '../support/verified-base.ts';
import type { VerifiedBase } from '../support/verified-base.ts';

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

describe('joinImage: join, then look in the pool', { timeout: 120_000 }, () => {
  let client: Client;
  let host: TestHost;
  let registry: HostRegistry;
  let base: VerifiedBase | undefined;
  const entry = `ij${Date.now().toString(36)}`;
  const taskQueue = uniqueId('nobody-polls');
  const started: string[] = [];

  before(async () => {
    client = await connectClient();
    host = loadTestHosts()[0]!;
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${entry}`,
      hosts: [host],
      // The url plantVerifiedBase records in the marker (never fetched: no port listens there).
      images: { empty: { url: `http://127.0.0.1/${entry}/empty.qcow2` } },
    });
    registry = new HostRegistry(parseProvidersYaml(JSON.stringify(config), 'image-join.test'));
  });

  after(async () => {
    for (const id of started)
      await client.workflow
        .getHandle(id)
        .terminate('test over')
        .catch(() => undefined);
    if (base) await removeVerifiedBase(registry.host(entry, host.name).links, host.pool, base).catch(() => undefined);
    registry?.close();
    await client?.connection.close().catch(() => undefined);
  });

  /** Runs joinImage for `key` as the worker would; returns its result and the image workflow's ID. */
  async function join(key: string, waiter: string): Promise<{ found: EnsuredBase | null; workflowId: string }> {
    const image: ImageWorkflowInput = { entry, host: host.name, key };
    const workflowId = `${imageWorkflowId(host.name, entry, key)}/${uniqueId('t')}`;
    started.push(workflowId);
    const acts = createImageActivities(registry, client, taskQueue);
    const input = { workflowId, image, waiter };
    const found = await new MockActivityEnvironment(undefined, { logger: silent }).run<
      [typeof input],
      EnsuredBase | null,
      (i: typeof input) => Promise<EnsuredBase | null>
    >((i) => acts.joinImage(i), input);
    return { found, workflowId };
  }

  /** The waiters whose join signal the image workflow's history holds. */
  async function joinsOf(workflowId: string): Promise<string[]> {
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    return (history.events ?? []).flatMap((e) => {
      const a = e.workflowExecutionSignaledEventAttributes;
      if (a?.signalName !== IMAGE_JOIN_SIGNAL) return [];
      const data = a.input?.payloads?.[0]?.data;
      return [(JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { waiter: string }).waiter];
    });
  }

  it('no base in the pool: joined, and null (the waiter waits for the signal)', async () => {
    const { found, workflowId } = await join('empty', 'proxy/w1');
    assert.equal(found, null);
    assert.deepEqual(await joinsOf(workflowId), ['proxy/w1']);
  });

  it('the verified base in the pool: joined, and that base (no wait for a signal)', async () => {
    base = await plantVerifiedBase(registry.host(entry, host.name).links, host.pool, entry, 'empty');
    const { found, workflowId } = await join('empty', 'proxy/w2');
    assert.ok(found, 'the base the pool holds');
    assert.equal(found.path, base.path);
    assert.equal(found.volumeName, base.name);
    assert.deepEqual(await joinsOf(workflowId), ['proxy/w2']);
  });
});
