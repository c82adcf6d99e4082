/**
 * Reading a proxy's IPv4 address (H3): the guest agent first, then the network's DHCP leases,
 * then the host's ARP table. One source failing is "no address yet"; every source failing, or the
 * link being dead, is a Transient error, never "no address". (Keeping the previous IP through an
 * agent restart is the workflow's job: it holds the last address it saw.)
 */
import { isIPv4 } from 'node:net';
import { errorKind } from '../../errors.ts';
import { AddressSource, IpAddrType } from '../../libvirt/constants.ts';
import type { CallOptions } from '../../libvirt/connection.ts';
import type { LibvirtClient } from '../../libvirt/client.ts';
import { isNotFound, LibvirtConnectionError, LibvirtError } from '../../libvirt/errors.ts';
import type { Domain, DomainInterface } from '../../libvirt/protocol.ts';
import { Kvm2AddressUnreadableError } from '../errors.ts';

export type AddressSourceName = 'agent' | 'lease' | 'arp';

export interface AddressReading {
  /** The address found, or undefined for "no address yet". */
  ip: string | undefined;
  source: AddressSourceName | undefined;
  /** Sources that failed (with their error) on the way: informative when `ip` is undefined. */
  failures: { source: AddressSourceName; error: string }[];
}

export interface ReadAddressInput {
  client: LibvirtClient;
  domain: Domain;
  /** The NIC's MAC address (lowercase); addresses of other NICs are ignored. Unset: any NIC but loopback. */
  mac?: string;
  /** The network whose DHCP leases are consulted. */
  network: string;
  call?: CallOptions;
}

const SOURCES: readonly AddressSourceName[] = ['agent', 'lease', 'arp'];

/**
 * Whether `addr` (reported by the guest agent, the leases or ARP: untrusted) can be a guest's
 * IPv4 address: a dotted quad `net.isIPv4` accepts, and not "this network" (0/8), loopback
 * (127/8), link-local (169.254/16), multicast (224/4), reserved (240/4) or broadcast.
 */
export function usableIpv4(addr: string): boolean {
  if (!isIPv4(addr)) return false;
  const [a, b] = addr.split('.').map(Number) as [number, number];
  return a !== 0 && a !== 127 && !(a === 169 && b === 254) && a < 224;
}

function pick(ifaces: DomainInterface[], mac: string | undefined): string | undefined {
  for (const iface of ifaces) {
    if (iface.name === 'lo') continue;
    if (mac !== undefined && iface.hwaddr?.toLowerCase() !== mac) continue;
    for (const a of iface.addrs) if (a.type === IpAddrType.IPV4 && usableIpv4(a.addr)) return a.addr;
  }
  return undefined;
}

async function fromSource(input: ReadAddressInput, source: AddressSourceName): Promise<string | undefined> {
  const { client, domain, mac, call } = input;
  if (source === 'agent') return pick(await client.domainInterfaceAddresses(domain, AddressSource.AGENT, call), mac);
  if (source === 'arp') return pick(await client.domainInterfaceAddresses(domain, AddressSource.ARP, call), mac);
  const net = await client.networkLookupByName(input.network, call);
  const leases = await client.networkGetDhcpLeases(net, mac ?? null, call);
  const now = BigInt(Math.floor(Date.now() / 1000));
  const lease = leases
    .filter((l) => l.type === IpAddrType.IPV4 && usableIpv4(l.ipaddr) && (l.expirytime === 0n || l.expirytime > now))
    .sort((a, b) => Number(b.expirytime - a.expirytime))[0];
  return lease?.ipaddr;
}

/**
 * Asks each source in turn. Returns the first address found; `{ ip: undefined }` when no source
 * has one yet (some may have failed); throws Kvm2AddressUnreadableError (Transient) when every
 * source failed, and rethrows at once when the link itself is dead.
 */
export async function readAddress(input: ReadAddressInput): Promise<AddressReading> {
  const failures: AddressReading['failures'] = [];
  for (const source of SOURCES) {
    try {
      const ip = await fromSource(input, source);
      if (ip !== undefined) return { ip, source, failures };
    } catch (err) {
      if (err instanceof LibvirtConnectionError || input.client.connection.isDead) throw err;
      if (isNotFound(err) && source !== 'lease') throw err; // the domain is gone
      failures.push({ source, error: err instanceof Error ? err.message : String(err) });
      if (!(err instanceof LibvirtError) && errorKind(err) !== 'Transient') throw err;
    }
  }
  if (failures.length === SOURCES.length) {
    throw new Kvm2AddressUnreadableError(
      `${input.domain.name}: every address source failed (${failures.map((f) => `${f.source}: ${f.error}`).join('; ')})`,
    );
  }
  return { ip: undefined, source: undefined, failures };
}
