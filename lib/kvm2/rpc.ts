/**
 * Short libvirt calls of the provider on a host's pooled link: one budget and one signal for
 * every call of an operation, and lookups that treat a missing object as absent.
 */
import type { LibvirtClient } from '../libvirt/client.ts';
import type { CallOptions } from '../libvirt/connection.ts';
import { unlessNotFound } from '../libvirt/errors.ts';
import type { Domain, StoragePool, StorageVol } from '../libvirt/protocol.ts';
import type { HostLinks } from '../hostlink/pool.ts';

/** Budget of each libvirt call of an operation when its input gives none, in ms. */
export const DEFAULT_RPC_TIMEOUT_MS = 30_000;

/** A short libvirt call on the host's pooled link, under the operation's budget and signal. */
export type Rpc = <T>(fn: (client: LibvirtClient, call: CallOptions) => Promise<T>) => Promise<T>;

/**
 * Calls on `links`, each bounded by `rpcTimeoutMs` (default {@link DEFAULT_RPC_TIMEOUT_MS}; the
 * budget covers the wait for a slot, a dial if needed, and the call) and ended by `signal`.
 */
export function rpcOn(links: HostLinks, options: { rpcTimeoutMs?: number; signal?: AbortSignal }): Rpc {
  const call: CallOptions = { timeoutMs: options.rpcTimeoutMs ?? DEFAULT_RPC_TIMEOUT_MS, signal: options.signal };
  return (fn) => links.call(fn, call);
}

/** The volume `name` of `pool`, or undefined when there is none. */
export function lookupVol(rpc: Rpc, pool: StoragePool, name: string): Promise<StorageVol | undefined> {
  return rpc((c, o) => unlessNotFound(c.storageVolLookupByName(pool, name, o)));
}

/** The domain `name`, or undefined when there is none. */
export function lookupDomain(rpc: Rpc, name: string): Promise<Domain | undefined> {
  return rpc((c, o) => unlessNotFound(c.domainLookupByName(name, o)));
}
