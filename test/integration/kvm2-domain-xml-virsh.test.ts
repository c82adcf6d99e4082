/**
 * The XML builders against a real libvirtd (test host ep-h1, through `virsh` inside the host's
 * namespaces): volumes created from buildVolumeXml (raw base, qcow2 overlay backed by it, raw
 * seed with a real seed image uploaded), a domain defined from buildDomainXml and read back with
 * `virsh dumpxml` (libxml2 reads it: xmllint), the owner mark read back from dumpxml and from
 * DOMAIN_GET_METADATA (`virsh metadata`) before and after DOMAIN_SET_METADATA, and the domain
 * started once (QEMU accepts the devices: read-only virtio seed, file console, guest-agent
 * channel, RNG), then destroyed. Everything is removed in `after`. Needs `test/hosts/testhost up`.
 */
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  OWNER_METADATA_PREFIX,
  OWNER_METADATA_URI,
  buildDomainXml,
  buildOwnerMetadataElement,
  buildVolumeXml,
  parseOwnerMetadata,
  xpathOfXml,
} from '../support/kvm2-xml.ts';
import type { OwnerMetadata } from '../support/kvm2-xml.ts';
import { buildSeedImage } from '../../lib/kvm2/seed/seed-image.ts';
import { buildCloudInitSeed } from '../../lib/kvm2/seed/cloud-config.ts';
import { hostPath, inHost, loadTestHosts } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const VIRSH_TIMEOUT_MS = 30_000;

const host: TestHost = loadTestHosts()[0]!;
const tag = randomBytes(3).toString('hex');
const name = `ep-it-xml-${tag}`;
const baseVol = `ep-it-base-${tag}.raw`;
const overlayVol = `ep-it-ov-${tag}.qcow2`;
const seedVol = `ep-it-seed-${tag}.iso`;
const hostTmp = `/tmp/ep-it-${tag}`;
const META: OwnerMetadata = {
  ownerUid: `uid-${tag}&<"'>`,
  proxyName: 'p1 </ep:name><evil/>',
  providerEntry: 'lab-a',
  createdAt: '2026-01-02T03:04:05Z',
};

function virsh(args: string[]): Promise<string> {
  return inHost(host, ['virsh', '-q', '-c', 'qemu:///system', ...args], VIRSH_TIMEOUT_MS);
}

/** libxml2's reading of `xml` at `expr` (the document goes through a file on this side). */
const xpath = (xml: string, expr: string): Promise<string> => xpathOfXml(xml, expr, `/tmp/ep-it-xpath-${tag}.xml`);

async function volPath(vol: string): Promise<string> {
  return (await virsh(['vol-path', '--pool', host.pool, vol])).trim();
}

async function cleanup(): Promise<void> {
  await virsh(['destroy', name]).catch(() => undefined);
  await virsh(['undefine', name]).catch(() => undefined);
  for (const vol of [overlayVol, seedVol, baseVol])
    await virsh(['vol-delete', '--pool', host.pool, vol]).catch(() => undefined);
  await rm(hostPath(host, hostTmp), { recursive: true, force: true });
}

describe(`kvm2 XML on a real libvirtd (${host.name}, domain type ${host.domainType})`, () => {
  before(async () => {
    await cleanup();
    await inHost(host, ['mkdir', '-p', hostTmp]);
  });
  after(cleanup);

  it('libvirt creates the volumes: raw base, qcow2 overlay backed by it, raw seed', async () => {
    const create = async (xml: string) => {
      await writeFile(hostPath(host, `${hostTmp}/vol.xml`), xml);
      await virsh(['vol-create', host.pool, `${hostTmp}/vol.xml`]);
    };
    await create(buildVolumeXml({ name: baseVol, capacityBytes: 64 * 2 ** 20, format: 'raw' }));
    const basePath = await volPath(baseVol);
    await create(
      buildVolumeXml({
        name: overlayVol,
        capacityBytes: 128 * 2 ** 20,
        format: 'qcow2',
        backingPath: basePath,
        backingFormat: 'raw',
      }),
    );
    const seed = buildSeedImage(
      buildCloudInitSeed({ instanceId: tag, hostname: 'p1', squidPort: 3128, allowedClientCidrs: ['192.168.0.0/16'] }),
    );
    await create(buildVolumeXml({ name: seedVol, capacityBytes: seed.length, format: 'raw' }));
    const created = await virsh(['vol-dumpxml', '--pool', host.pool, seedVol]);
    assert.equal(await xpath(created, 'string(/volume/target/format/@type)'), 'raw');
    await writeFile(hostPath(host, `${hostTmp}/seed.iso`), seed);
    await virsh(['vol-upload', '--pool', host.pool, seedVol, `${hostTmp}/seed.iso`]);

    const ov = await virsh(['vol-dumpxml', '--pool', host.pool, overlayVol]);
    assert.equal(await xpath(ov, 'string(/volume/capacity)'), String(128 * 2 ** 20));
    assert.equal(await xpath(ov, 'string(/volume/target/format/@type)'), 'qcow2');
    assert.equal(await xpath(ov, 'string(/volume/backingStore/path)'), basePath);
    assert.equal(await xpath(ov, 'string(/volume/backingStore/format/@type)'), 'raw');
    // Once it holds the image, libvirt's dir backend probes the content and reports format "iso".
    const sv = await virsh(['vol-dumpxml', '--pool', host.pool, seedVol]);
    assert.match(await xpath(sv, 'string(/volume/target/format/@type)'), /^(raw|iso)$/);
    assert.equal(await xpath(sv, 'string(/volume/capacity)'), String(seed.length));
    await virsh(['vol-download', '--pool', host.pool, seedVol, `${hostTmp}/seed.back`]);
    const back = await inHost(host, ['cmp', `${hostTmp}/seed.iso`, `${hostTmp}/seed.back`]);
    assert.equal(back, '', 'the seed volume holds the image byte for byte');
  });

  it('libvirt defines the domain and dumpxml keeps every field and the owner mark', async () => {
    const xml = buildDomainXml({
      name,
      domainType: host.domainType,
      vcpus: 1,
      memoryMiB: 192,
      overlayPath: await volPath(overlayVol),
      seedPath: await volPath(seedVol),
      network: host.network,
      mac: '52:54:00:e9:00:01',
      consoleLogPath: `/var/log/libvirt/qemu/${name}-console.log`,
      metadata: META,
    });
    await writeFile(hostPath(host, `${hostTmp}/domain.xml`), xml);
    await virsh(['define', `${hostTmp}/domain.xml`]);
    const dump = await virsh(['dumpxml', '--inactive', name]);
    const checks: [string, string][] = [
      ['string(/domain/@type)', host.domainType],
      ['string(/domain/name)', name],
      ['string(/domain/memory)', String(192 * 1024)],
      ['string(/domain/memory/@unit)', 'KiB'],
      ['string(/domain/vcpu)', '1'],
      ['string(/domain/os/boot/@dev)', 'hd'],
      ['string(/domain/on_poweroff)', 'destroy'],
      ['string(/domain/on_crash)', 'destroy'],
      ["string(//disk[target/@dev='vda']/target/@bus)", 'virtio'],
      ["string(//disk[target/@dev='vda']/driver/@type)", 'qcow2'],
      ["string(//disk[target/@dev='vdb']/target/@bus)", 'virtio'],
      ["string(//disk[target/@dev='vdb']/@device)", 'disk'],
      ["count(//disk[target/@dev='vdb']/readonly)", '1'],
      ["count(//disk[@device='cdrom'])", '0'],
      ['string(//interface/source/@network)', host.network],
      ['string(//interface/mac/@address)', '52:54:00:e9:00:01'],
      ['string(//interface/model/@type)', 'virtio'],
      ['string(//channel/target/@name)', 'org.qemu.guest_agent.0'],
      ['string(//serial/@type)', 'file'],
      ['string(//serial/source/@path)', `/var/log/libvirt/qemu/${name}-console.log`],
      ['string(//rng/backend)', '/dev/urandom'],
      ['count(//graphics)', '0'],
      ['namespace-uri(/domain/metadata/*)', OWNER_METADATA_URI],
      [`string(/domain/metadata/*/*[local-name()='name'])`, META.proxyName],
      ['count(//evil)', '0'],
    ];
    for (const [expr, want] of checks) assert.equal(await xpath(dump, expr), want, expr);
    assert.equal(
      await xpath(dump, 'string(/domain/cpu/@mode)'),
      host.domainType === 'kvm' ? 'host-passthrough' : 'custom',
      'host-passthrough for kvm; libvirt chooses for qemu',
    );
    assert.deepEqual(parseOwnerMetadata(dump), META);
  });

  it('DOMAIN_GET_METADATA returns the mark; DOMAIN_SET_METADATA with the bare element replaces it', async () => {
    const got = await virsh(['metadata', name, '--uri', OWNER_METADATA_URI]);
    assert.deepEqual(parseOwnerMetadata(got), META);
    const next = { ...META, ownerUid: `uid-${tag}-2`, proxyName: 'p2' };
    await virsh([
      'metadata',
      name,
      '--uri',
      OWNER_METADATA_URI,
      '--key',
      OWNER_METADATA_PREFIX,
      '--set',
      buildOwnerMetadataElement(next),
      '--config',
    ]);
    assert.deepEqual(parseOwnerMetadata(await virsh(['metadata', name, '--uri', OWNER_METADATA_URI])), next);
    assert.deepEqual(parseOwnerMetadata(await virsh(['dumpxml', '--inactive', name])), next);
  });

  it('QEMU starts the domain with these devices (then it is destroyed)', async () => {
    await virsh(['start', name]);
    try {
      assert.match(await virsh(['domstate', name]), /running/);
      const live = await virsh(['dumpxml', name]);
      assert.equal(await xpath(live, "count(//disk[target/@dev='vdb']/readonly)"), '1');
      assert.equal(await xpath(live, 'string(//channel/target/@name)'), 'org.qemu.guest_agent.0');
    } finally {
      await virsh(['destroy', name]);
    }
  });
});
