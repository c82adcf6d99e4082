/**
 * Reading a proxy's address (H3, lib/kvm2/proxy/addresses.ts) with a fake client whose sources
 * answer as scripted: one source failing while the others have nothing is "no address yet", every
 * source failing is Transient (Kvm2AddressUnreadableError), a dead link and a missing domain are
 * rethrown as they are. Guest-reported addresses are untrusted: only real, usable IPv4 passes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kvm2AddressUnreadableError } from '../../lib/kvm2/errors.ts';
import { readAddress, usableIpv4 } from '../../lib/kvm2/proxy/addresses.ts';
import { AddressSource, ErrorNumber, IpAddrType, Proc } from '../../lib/libvirt/constants.ts';
import type { LibvirtClient } from '../../lib/libvirt/client.ts';
import { LibvirtConnectionError, LibvirtError } from '../../lib/libvirt/errors.ts';
import type { DhcpLease, Domain, DomainInterface } from '../../lib/libvirt/protocol.ts';

const MAC = '52:54:00:aa:bb:cc';
const domain: Domain = { name: 'ep_lab_p1', uuid: new Uint8Array(16), id: 1 };

type Answer<T> = T | Error;
interface Script {
  agent?: Answer<DomainInterface[]>;
  lease?: Answer<DhcpLease[]>;
  arp?: Answer<DomainInterface[]>;
  dead?: boolean;
}

function fakeClient(script: Script): LibvirtClient {
  const answer = <T>(a: Answer<T> | undefined, empty: T): Promise<T> =>
    a instanceof Error ? Promise.reject(a) : Promise.resolve(a ?? empty);
  return {
    connection: { isDead: script.dead === true },
    domainInterfaceAddresses: (_d: Domain, source: number) =>
      answer(source === AddressSource.AGENT ? script.agent : script.arp, []),
    networkLookupByName: (name: string) =>
      script.lease instanceof Error
        ? Promise.reject(script.lease)
        : Promise.resolve({ name, uuid: new Uint8Array(16) }),
    networkGetDhcpLeases: () => answer(script.lease, []),
  } as unknown as LibvirtClient;
}

const libvirtError = (code: number, proc: number): LibvirtError =>
  new LibvirtError({ code, domain: 0, message: `error ${code}` }, proc);
const agentDown = (): LibvirtError => libvirtError(ErrorNumber.AGENT_UNRESPONSIVE, Proc.DOMAIN_INTERFACE_ADDRESSES);
const iface = (addr: string, hwaddr = MAC): DomainInterface => ({
  name: 'eth0',
  hwaddr,
  addrs: [{ type: IpAddrType.IPV4, addr, prefix: 24 }],
});
const lease = (ipaddr: string): DhcpLease => ({
  iface: 'virbr0',
  expirytime: 0n,
  type: IpAddrType.IPV4,
  mac: MAC,
  iaid: null,
  ipaddr,
  prefix: 24,
  hostname: null,
  clientid: null,
});

const read = (script: Script) => readAddress({ client: fakeClient(script), domain, mac: MAC, network: 'default' });

describe('usableIpv4 (guest-reported addresses are untrusted)', () => {
  it('accepts ordinary guest addresses', () => {
    for (const ok of ['192.168.122.10', '10.0.0.1', '172.16.5.4', '100.64.0.1', '223.255.255.254']) {
      assert.equal(usableIpv4(ok), true, ok);
    }
  });
  it('refuses what is not a dotted quad, and what cannot be a guest address', () => {
    for (const bad of [
      '999.1.1.1',
      '1.2.3.256',
      '1.2.3',
      '1.2.3.4.5',
      '01.2.3.4',
      ' 1.2.3.4',
      '1.2.3.4\n',
      '::1',
      '',
      '0.0.0.0',
      '0.1.2.3',
      '127.0.0.1',
      '169.254.1.1',
      '224.0.0.1',
      '240.0.0.1',
      '255.255.255.255',
    ]) {
      assert.equal(usableIpv4(bad), false, JSON.stringify(bad));
    }
  });
});

describe('readAddress (H3)', () => {
  it('the agent failing while leases and ARP have nothing is "no address yet", with the failure listed', async () => {
    const r = await read({ agent: agentDown() });
    assert.equal(r.ip, undefined);
    assert.equal(r.source, undefined);
    assert.deepEqual(
      r.failures.map((f) => f.source),
      ['agent'],
    );
  });

  it('the agent failing and a lease present: the lease address', async () => {
    const r = await read({ agent: agentDown(), lease: [lease('192.168.122.7')] });
    assert.equal(r.ip, '192.168.122.7');
    assert.equal(r.source, 'lease');
  });

  it('every source failing is Kvm2AddressUnreadableError (Transient), never "no address"', async () => {
    const err = await read({
      agent: agentDown(),
      lease: libvirtError(ErrorNumber.OPERATION_FAILED, Proc.NETWORK_GET_DHCP_LEASES),
      arp: libvirtError(ErrorNumber.OPERATION_FAILED, Proc.DOMAIN_INTERFACE_ADDRESSES),
    }).then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof Kvm2AddressUnreadableError, String(err));
    assert.equal(err.kind, 'Transient');
    assert.match(err.message, /agent: .*lease: .*arp: /);
  });

  it('a dead link is rethrown at once as the connection error, not as unreadable or empty', async () => {
    const lost = new LibvirtConnectionError('h1/rpc: connection closed by peer');
    await assert.rejects(read({ agent: lost, lease: [lease('192.168.122.7')] }), (e) => e === lost);
    // A daemon error seen while the link is already dead is rethrown too.
    const late = agentDown();
    await assert.rejects(read({ agent: late, dead: true, lease: [lease('192.168.122.7')] }), (e) => e === late);
  });

  it('NotFound from the agent (the domain is gone) is rethrown; NotFound of the network is one failed source', async () => {
    const gone = libvirtError(ErrorNumber.NO_DOMAIN, Proc.DOMAIN_INTERFACE_ADDRESSES);
    await assert.rejects(read({ agent: gone }), (e) => e === gone);
    const r = await read({ lease: libvirtError(ErrorNumber.NO_NETWORK, Proc.NETWORK_LOOKUP_BY_NAME) });
    assert.equal(r.ip, undefined);
    assert.deepEqual(
      r.failures.map((f) => f.source),
      ['lease'],
    );
  });

  it('skips unusable and other-NIC addresses the guest reports, and takes the next source', async () => {
    const r = await read({
      agent: [iface('999.1.1.1'), iface('127.0.0.1'), iface('192.168.122.9', '52:54:00:00:00:01')],
      lease: [lease('192.168.122.7')],
    });
    assert.equal(r.ip, '192.168.122.7');
    assert.equal(r.source, 'lease');
  });
});
