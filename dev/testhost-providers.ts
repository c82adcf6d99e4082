// The local test hosts (test/hosts/testhost descriptors): where they are described, how to read
// them, and their mapping to hosts of a providers file. One module for the main job's embedded
// default (dev/providers.ts), the tests' fleets and the test hosts' own smoke test.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What `test/hosts/testhost up` writes per host (the fields a providers file needs). */
export interface TesthostDescriptor {
  name: string;
  address: string;
  port: number;
  user: string;
  keyPath: string;
  knownHostsPath: string;
  socketPath: string;
  pool: string;
  network: string;
  networkCidr: string;
  domainType: 'kvm' | 'qemu';
  /** The root namespace's end of the host's veth: what the host's guests reach through its NAT. */
  rootSideAddress: string;
  /** The root namespace's end of the veth (`ep-hN-r`): the machine's route to the routed network goes there. */
  vethRoot?: string;
  /**
   * The routed libvirt network (`<forward mode='route'/>`), whose subnet the machine routes into
   * `vethRoot`; absent in descriptors written before it existed (`testhost up` adds it).
   */
  routedNetwork?: string;
  routedNetworkCidr?: string;
  routedNetworkGateway?: string;
}

/** Where `test/hosts/testhost` keeps its state: $EP_TESTHOST_STATE, else /var/lib/egress-proxies-testhosts. */
export const TESTHOST_STATE: string = process.env['EP_TESTHOST_STATE'] ?? '/var/lib/egress-proxies-testhosts';

/**
 * Every host described in `<stateRoot>/hosts.json` (its `hosts` list, or a bare list, of
 * descriptor paths, absolute or relative to the state root). Throws with the remedy when the
 * index is missing or unreadable. `T` is the caller's view of a descriptor (the file holds more
 * fields than a providers file needs).
 */
export function loadTesthostDescriptors<T extends TesthostDescriptor = TesthostDescriptor>(
  stateRoot: string = TESTHOST_STATE,
): T[] {
  let index: unknown;
  try {
    index = JSON.parse(readFileSync(join(stateRoot, 'hosts.json'), 'utf8'));
  } catch (err) {
    throw new Error(`no test hosts under ${stateRoot} (${(err as Error).message}): run 'test/hosts/testhost up' first`);
  }
  const list = Array.isArray(index) ? index : ((index as { hosts?: unknown[] }).hosts ?? []);
  return list.map((entry) => {
    const path =
      typeof entry === 'string'
        ? entry
        : ((entry as { descriptor?: string; path?: string }).descriptor ?? (entry as { path: string }).path);
    return JSON.parse(readFileSync(path.startsWith('/') ? path : join(stateRoot, path), 'utf8')) as T;
  });
}

/** `providers[].hosts[]` entries for the descriptors. */
export function providerHosts(
  hosts: readonly Pick<
    TesthostDescriptor,
    'name' | 'address' | 'port' | 'user' | 'keyPath' | 'knownHostsPath' | 'socketPath'
  >[],
) {
  return hosts.map((h) => ({
    name: h.name,
    address: h.address,
    port: h.port,
    user: h.user,
    keyFile: h.keyPath,
    knownHostsFile: h.knownHostsPath,
    socketPath: h.socketPath,
  }));
}
