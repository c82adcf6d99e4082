/**
 * Reading proxies: one proxy's state and address, and every proxy of a provider entry by its mark
 * (for garbage collection), the latter with no state or address calls.
 */
import type { CallOptions } from '../../libvirt/connection.ts';
import type { LibvirtClient } from '../../libvirt/client.ts';
import { isNotFound, unlessNotFound } from '../../libvirt/errors.ts';
import type { HostLinks } from '../../hostlink/pool.ts';
import { rpcOn } from '../rpc.ts';
import { readAddress } from './addresses.ts';
import type { AddressReading } from './addresses.ts';
import { readOwnerMark } from './adoption-guard.ts';
import { proxyObjectNames } from './object-names.ts';
import type { ProxyIdentity } from './object-names.ts';
import { proxyVmState } from './vm-state.ts';
import type { ProxyVmState } from './vm-state.ts';

export interface GetProxyInput extends ProxyIdentity {
  links: HostLinks;
  network: string;
  /** Budget of the whole reading (queue wait, dial and every call), in ms. Default 30000 (DEFAULT_RPC_TIMEOUT_MS). */
  rpcTimeoutMs?: number;
  /** Ends the reading: the call in flight is aborted (its link killed). */
  signal?: AbortSignal;
}

/** The VM's view of a proxy (libvirt state and address), not the workflow's `ProxyStatus` of contracts/proxy.ts. */
export interface VmStatus {
  state: ProxyVmState;
  /** libvirt's raw (state, reason), for operators. */
  libvirtState?: { state: number; reason: number };
  /** Set while Running: the address reading (ip undefined means "no address yet"). */
  address?: AddressReading;
}

/**
 * State and address of one proxy. Missing when no domain has its name; an unreadable address is
 * a Transient error (H3), never a missing one. Does not apply the adoption guard (reading is
 * harmless); `listProxies` and the mutating operations do.
 */
export async function getProxy(input: GetProxyInput): Promise<VmStatus> {
  const names = proxyObjectNames(input);
  return rpcOn(
    input.links,
    input,
  )(async (c, call) => {
    const dom = await unlessNotFound(c.domainLookupByName(names.domain, call));
    if (dom === undefined) return { state: 'Missing' as const };
    const libvirtState = await c.domainGetState(dom, call);
    const state = proxyVmState(libvirtState.state, libvirtState.reason);
    if (state !== 'Running') return { state, libvirtState };
    const address = await readAddress({ client: c, domain: dom, mac: names.mac, network: input.network, call });
    return { state, libvirtState, address };
  });
}

export interface ListedProxy {
  domain: string;
  uuid: string;
  proxyName: string;
  ownerUid: string;
  providerEntry: string;
  createdAt: string;
}

/**
 * Every domain on the host that carries the provider's mark for `entry` (and `ownerUid`, when
 * given). One metadata call per domain; no state or address calls.
 */
export async function listProxies(
  links: HostLinks,
  filter: { entry: string; ownerUid?: string },
  options: CallOptions = {},
): Promise<ListedProxy[]> {
  return links.call(async (c: LibvirtClient, call) => {
    const out: ListedProxy[] = [];
    for (const dom of await c.listAllDomains(0, call)) {
      let mark;
      try {
        mark = await readOwnerMark(c, dom, call);
      } catch (err) {
        if (isNotFound(err)) continue; // undefined meanwhile
        throw err;
      }
      if (!mark || mark.providerEntry !== filter.entry) continue;
      if (filter.ownerUid !== undefined && mark.ownerUid !== filter.ownerUid) continue;
      out.push({ domain: dom.name, uuid: Buffer.from(dom.uuid).toString('hex'), ...mark });
    }
    return out;
  }, options);
}
