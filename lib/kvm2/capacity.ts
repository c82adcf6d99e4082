/**
 * A host's capacity for placement: its memory and CPUs (NODE_GET_INFO, NODE_GET_MEMORY_STATS) and
 * what the domains running on it, ours and others', have been given (DOMAIN_GET_INFO of each
 * active domain). Inactive domains are not counted: they hold no memory until started.
 */
import type { CallOptions } from '../libvirt/connection.ts';
import type { LibvirtClient } from '../libvirt/client.ts';
import { ListDomainsFlags } from '../libvirt/constants.ts';
import { isNotFound } from '../libvirt/errors.ts';

export interface HostCapacity {
  /**
   * Physical memory, in MiB: the kernel's MemTotal (NODE_GET_MEMORY_STATS `total`, as `virsh
   * nodememstats` shows it), else NODE_GET_INFO's figure. libvirt builds the latter from the NUMA
   * cells, which read low on some hosts (a test host here: 17.5 GiB of 23.5), so free memory could
   * exceed the total.
   */
  memoryTotalMiB: number;
  /**
   * Memory the kernel can hand a new VM now, in MiB: free plus buffers and page cache
   * (NODE_GET_MEMORY_STATS; `virsh nodememstats`). MemFree alone reads low on any host that has
   * run a while, since Linux fills idle memory with cache it gives back on demand.
   */
  memoryFreeMiB: number;
  /** The sum of the maximum memory of every active domain, in MiB. */
  memoryCommittedMiB: number;
  /** Active host CPUs. */
  cpus: number;
  /** The sum of the vCPUs of every active domain. */
  vcpusCommitted: number;
  /** Active domains counted. */
  activeDomains: number;
}

const KIB_PER_MIB = 1024n;

/** Whole MiB in `kib` KiB (rounded down). */
export function kibToMiB(kib: bigint): number {
  return Number(kib / KIB_PER_MIB);
}

/** Physical memory in KiB: NODE_GET_MEMORY_STATS `total` when the host gives it, else NODE_GET_INFO's. */
export function physicalKiB(nodeMemoryKiB: bigint, stats: ReadonlyMap<string, bigint>): bigint {
  const total = stats.get('total');
  return total !== undefined && total > 0n ? total : nodeMemoryKiB;
}

/** Free memory in KiB from NODE_GET_MEMORY_STATS fields: free + buffers + cached (those present). */
export function reclaimableKiB(stats: ReadonlyMap<string, bigint>): bigint {
  return (stats.get('free') ?? 0n) + (stats.get('buffers') ?? 0n) + (stats.get('cached') ?? 0n);
}

/** Reads `client`'s host capacity. Throws what the calls throw (a domain gone meanwhile is skipped). */
export async function hostCapacity(client: LibvirtClient, call?: CallOptions): Promise<HostCapacity> {
  const node = await client.nodeGetInfo(call);
  const stats = await client.nodeGetMemoryStats(undefined, call);
  let committedKiB = 0n;
  let vcpus = 0;
  let active = 0;
  for (const dom of await client.listAllDomains(ListDomainsFlags.ACTIVE, call)) {
    let info;
    try {
      info = await client.domainGetInfo(dom, call);
    } catch (err) {
      if (isNotFound(err)) continue; // destroyed or undefined meanwhile
      throw err;
    }
    committedKiB += info.maxMemKiB;
    vcpus += info.vcpus;
    active++;
  }
  return {
    memoryTotalMiB: kibToMiB(physicalKiB(node.memoryKiB, stats)),
    memoryFreeMiB: kibToMiB(reclaimableKiB(stats)),
    memoryCommittedMiB: kibToMiB(committedKiB),
    cpus: node.cpus,
    vcpusCommitted: vcpus,
    activeDomains: active,
  };
}
