/**
 * A pool of real Squid guests on the test hosts: the providers entry (real-guest VM size, health
 * and timeouts, a health target and CONNECT destinations on the first host's root-side address),
 * the pool policies such a pool runs with, and the removal of everything of an entry on every
 * path (its pool members' workflows, then its domains and volumes on the hosts). Used by
 * test/e2e/pool.test.ts.
 */
import type { Client } from '@temporalio/client';
import type { PoolSpec } from '../../contracts/pool.ts';
import { PROXY_DELETE_UPDATE } from '../../contracts/proxy.ts';
import type { ProvidersConfig } from '../../lib/config/index.ts';
import { within } from './bounded.ts';
import { fleetConfig } from './fleet.ts';
import type { TestHost } from './testhosts.ts';
import { domainsOf, virsh, volumesOf } from './testhosts.ts';

export interface GuestEntryOptions {
  entry: string;
  ownerUid: string;
  /** The test hosts; the first one's root-side address holds the health target and the CONNECT destinations. */
  hosts: TestHost[];
  images: Record<string, { url: string; sha256?: string }>;
  /** Port of the health target (test/support/target.ts) on the first host's root-side address. */
  targetPort: number;
  /**
   * Guests on the hosts' routed network (`ep-routed`), which the machine routes into each host's
   * veth: a door on this machine reaches them, from the hosts' root-side addresses. Default: the
   * NAT network, reached only from inside each host.
   */
  routed?: boolean;
}

/**
 * One providers entry over `hosts` for real guests under TCG (1 vCPU, 512 MiB, 4 GiB; 2 s health
 * interval), on their NAT network or (`routed`) their routed one.
 */
export function guestEntryConfig(o: GuestEntryOptions): ProvidersConfig {
  const config = fleetConfig({
    entry: o.entry,
    ownerUid: o.ownerUid,
    hosts: o.hosts,
    images: o.images,
    health: { intervalMs: 2_000, probeTimeoutMs: 5_000, healthyAfter: 2, unhealthyAfter: 3 },
    timeouts: { rpcMs: 60_000, downloadBodyIdleMs: 30_000, downloadTotalMs: 600_000, bootMs: 300_000 },
  });
  const e = config.providers[0]!;
  const root = o.hosts[0]!.rootSideAddress;
  e.vm = { vcpus: 1, memoryMiB: 512, diskGiB: 4 };
  e.health.target = `${root}:${o.targetPort}`;
  e.squid.allowDestinations = [`${root}/32`];
  e.squid.allowedClientCidrs = o.hosts.map((h) => String(h['networkCidr']));
  if (o.routed === true) {
    const first = o.hosts[0]!;
    if (!first.routedNetwork) throw new Error(`${first.name} has no routed network: run test/hosts/testhost up`);
    e.network = first.routedNetwork;
    e.squid.allowedClientCidrs = o.hosts.flatMap((h) => [String(h.routedNetworkCidr), `${h.rootSideAddress}/32`]);
  }
  return config;
}

/** The rollout, replacement and drain policies of a pool of real guests (a boot is about a minute). */
export const GUEST_POOL_POLICIES: Pick<PoolSpec, 'rollout' | 'replacement' | 'drainDelayMs'> = {
  rollout: { maxSurge: 1, maxUnavailable: 0, minHealthyMs: 5_000, progressDeadlineMs: 15 * 60_000 },
  replacement: { unhealthyGraceMs: 30_000 },
  drainDelayMs: 3_000,
};

const openMembers = (pool: string): string => `ProxyPool = '${pool}' AND ExecutionStatus = 'Running'`;

/**
 * Deletes every member of `pool` (`entry/name`) whose workflow still runs (the delete update, then
 * its result; 30 s and 2 min at most each, failures ignored). Call it while the worker still runs.
 */
export async function deleteOpenMembers(client: Client, pool: string): Promise<void> {
  for await (const wf of client.workflow.list({ query: openMembers(pool) })) {
    const h = client.workflow.getHandle(wf.workflowId);
    await within(h.executeUpdate(PROXY_DELETE_UPDATE), 30_000, `delete ${wf.workflowId}`).catch(() => undefined);
    await within(h.result(), 120_000, `${wf.workflowId} to end`).catch(() => undefined);
  }
}

/** The workflow IDs of `pool`'s members still running. */
export async function openMemberIds(client: Client, pool: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query: openMembers(pool) })) ids.push(wf.workflowId);
  return ids;
}

/**
 * Destroys and undefines the domains of `entry` on every host and deletes the volumes that name
 * the entry or one of `keys` (its bases); returns what is left (`<host> domain|volume <name>`).
 */
export async function removeEntryObjects(
  hosts: readonly TestHost[],
  entry: string,
  keys: readonly string[],
): Promise<string[]> {
  const left: string[] = [];
  for (const h of hosts) {
    for (const dom of await domainsOf(h, entry).catch(() => [] as string[])) {
      await virsh(h, 'destroy', dom).catch(() => '');
      await virsh(h, 'undefine', dom).catch(() => '');
    }
    const vols = (await virsh(h, 'vol-list', h.pool).catch(() => ''))
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[0] ?? '')
      .filter((v) => v.includes(entry) || keys.some((k) => v.includes(k)));
    for (const v of vols) await virsh(h, 'vol-delete', '--pool', h.pool, v).catch(() => '');
    left.push(
      ...(await domainsOf(h, entry).catch(() => [])).map((x) => `${h.name} domain ${x}`),
      ...(await volumesOf(h, entry).catch(() => [])).map((x) => `${h.name} volume ${x}`),
    );
  }
  return left;
}
