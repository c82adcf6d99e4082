/**
 * The orphan GC collects per-proxy volumes left without a domain, on a real host with the real
 * workflow, activities and worker on the dev server: an overlay, seed and owner record left by a
 * crash between the overlay and the define are deleted once older than `gc.minAgeMs`; the same
 * left by a proxy whose workflow is open, or too young, are kept; volumes without our owner
 * record, with another owner's, or whose domain exists, are never touched.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { GC_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import type { GcResult } from '../../contracts/fleet.ts';
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../../contracts/proxy.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { proxyObjectNames } from '../../lib/kvm2/proxy/object-names.ts';
import { writeOwnerRecord } from '../../lib/kvm2/proxy/provenance.ts';
import { rpcOn } from '../../lib/kvm2/rpc.ts';
import type { orphanGcWorkflow } from '../../workflows/fleet.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { connectClient, connectWorker, installTestRuntime, uniqueId, withTimeout } from '../support/temporal.ts';
import { hostTarget, loadTestHosts, virsh, volumesOf } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const run = Date.now().toString(36);
const entry = `gc${run}`;
const owner = `uid-${run}`;
const HOUR_MS = 3_600_000;

describe('orphan GC of volumes without a domain (real host, real worker)', { timeout: 300_000 }, () => {
  let host: TestHost;
  let links: HostLinks;
  let client: Client;
  let connection: NativeConnection;
  let worker: RunningWorker | undefined;
  const taskQueue = uniqueId('gcvol');
  const openId = proxyWorkflowId(entry, 'open');
  const names = (name: string, ownerUid = owner) => proxyObjectNames({ ownerUid, entry, name });

  /** What a crash between the overlay and the define leaves: overlay, seed and (optionally) the record. */
  const leave = async (name: string, createdAt: string | undefined, ownerUid = owner): Promise<void> => {
    const n = names(name, ownerUid);
    await virsh(host, 'vol-create-as', host.pool, n.overlayVolume, '16M', '--format', 'qcow2');
    await virsh(host, 'vol-create-as', host.pool, n.seedVolume, '1M', '--format', 'raw');
    if (createdAt === undefined) return;
    const rpc = rpcOn(links, { rpcTimeoutMs: 20_000 });
    const pool = await rpc((c, o) => c.storagePoolLookupByName(host.pool, o));
    await writeOwnerRecord(rpc, pool, n.ownerRecordVolume, {
      v: 1,
      ownerUid,
      entry,
      name,
      createdAt,
      basePath: `/nowhere/base-${entry}-empty.qcow2`,
    });
  };

  before(async () => {
    installTestRuntime();
    host = loadTestHosts()[0]!;
    links = new HostLinks(hostTarget(host));
    client = await connectClient();
    connection = await connectWorker();
    const config = fleetConfig({
      entry,
      ownerUid: owner,
      hosts: [host],
      images: { empty: { url: `http://127.0.0.1:9/${entry}/empty.qcow2` } },
    });
    worker = await startFleetWorker(connection, client, config, taskQueue);
  });

  after(async () => {
    await client?.workflow
      .getHandle(openId)
      .terminate('test done')
      .catch(() => {});
    await virsh(host, 'undefine', names('domained').domain).catch(() => {});
    for (const v of await volumesOf(host, entry).catch(() => [])) {
      await virsh(host, 'vol-delete', '--pool', host.pool, v).catch(() => {});
    }
    links?.close();
    await worker?.stop();
    await connection?.close();
    await client?.connection.close();
  });

  it('deletes an old orphaned set; keeps open, young, unrecorded, foreign and domained ones', async () => {
    const old = new Date(Date.now() - 2 * HOUR_MS).toISOString();
    await leave('orphan', old);
    await leave('open', old);
    await leave('young', new Date().toISOString());
    await leave('unrecorded', undefined);
    await leave('foreign', old, `other-${run}`);
    await leave('domained', old);
    const bare = `<domain type='${host.domainType}'><name>${names('domained').domain}</name><memory unit='MiB'>32</memory><os><type arch='x86_64'>hvm</type></os></domain>`;
    await links.call((c, call) => c.domainDefineXml(bare, 0, call));
    // The proxy "open" has a running workflow (on a queue nobody polls: it stays open).
    await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: openId,
      taskQueue: uniqueId('nobody'),
      args: [{ entry, name: 'open', imageKey: 'empty' }],
    });
    const before = await volumesOf(host, entry);
    assert.equal(before.length, 17, before.join(' ')); // six sets of overlay and seed, five records

    const result = await withTimeout(
      client.workflow.execute<typeof orphanGcWorkflow>(GC_WORKFLOW_TYPE, {
        taskQueue,
        workflowId: uniqueId('gc'),
        args: [{ minAgeMs: HOUR_MS }],
      }),
      120_000,
      'the GC run',
    );
    const mine: GcResult['hosts'][number] | undefined = result.hosts.find((h) => h.entry === entry);
    assert.equal(mine?.error, undefined, JSON.stringify(mine));
    assert.deepEqual(mine?.volumes?.deleted, ['orphan']);
    assert.deepEqual([...(mine?.volumes?.kept ?? [])].sort(), ['open', 'young']);

    const left = await volumesOf(host, entry);
    const gone = [names('orphan').overlayVolume, names('orphan').seedVolume, names('orphan').ownerRecordVolume];
    assert.deepEqual(
      left.filter((v) => gone.includes(v)),
      [],
      'the orphan set is gone',
    );
    assert.deepEqual(
      left,
      before.filter((v) => !gone.includes(v)),
      'everything else is left',
    );
  });
});
