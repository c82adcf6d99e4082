// The local test hosts (test/hosts/testhost descriptors) as hosts of a providers file: one mapping
// for the main job's embedded default (dev/providers.ts) and the tests' fleets.

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
