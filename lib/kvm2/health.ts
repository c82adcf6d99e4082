/**
 * Host health: reachable, round-trip latency of a trivial call, libvirt and hypervisor versions,
 * and the storage pool's capacity and free space. Runs on the host's health link (a connection of
 * its own, so a busy RPC link or an upload never delays it).
 */
import type { CallOptions } from '../libvirt/connection.ts';
import type { LibvirtClient } from '../libvirt/client.ts';

export interface HostHealth {
  reachable: true;
  /** Round trip of CONNECT_GET_LIB_VERSION, in ms. */
  rttMs: number;
  libvirtVersion: string;
  hypervisorVersion: string;
  pool: { name: string; state: number; capacityBytes: number; availableBytes: number; allocationBytes: number };
}

/** libvirt packs versions as major × 1e6 + minor × 1e3 + micro. */
export function versionString(v: bigint): string {
  const n = Number(v);
  return `${Math.floor(n / 1e6)}.${Math.floor(n / 1e3) % 1000}.${n % 1000}`;
}

/** Reads a host's health through `client`. Throws what the calls throw (classify with errorKind). */
export async function hostHealth(client: LibvirtClient, poolName: string, call?: CallOptions): Promise<HostHealth> {
  const t0 = performance.now();
  const lib = await client.getLibVersion(call);
  const rttMs = Math.round((performance.now() - t0) * 1000) / 1000;
  const hv = await client.getVersion(call);
  const pool = await client.storagePoolLookupByName(poolName, call);
  const info = await client.storagePoolGetInfo(pool, call);
  return {
    reachable: true,
    rttMs,
    libvirtVersion: versionString(lib),
    hypervisorVersion: versionString(hv),
    pool: {
      name: poolName,
      state: info.state,
      capacityBytes: Number(info.capacity),
      availableBytes: Number(info.available),
      allocationBytes: Number(info.allocation),
    },
  };
}
