/**
 * Domain and volume XML, read back by libxml2 (`xmllint --xpath`) and validated against libvirt's
 * own RelaxNG schemas (`virt-xml-validate`); hostile values survive escaping as data; the owner
 * mark is read back from every form libvirt returns; the small XML reader and the escaper.
 * xmllint and virt-xml-validate missing: skipped locally, failed under CI=true (install:
 * libxml2-utils libvirt-clients).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  OWNER_METADATA_PREFIX,
  OWNER_METADATA_URI,
  buildDomainXml,
  buildOwnerMetadataElement,
  buildVolumeXml,
  parseOwnerMetadata,
  xpath,
} from '../support/kvm2-xml.ts';
import type { DomainSpec } from '../support/kvm2-xml.ts';
import { needTool } from '../support/tools.ts';
import { escapeXml, findElement, parseXml } from '../../lib/kvm2/xml.ts';
import { Kvm2BuildError, XmlSyntaxError } from '../../lib/kvm2/build-errors.ts';

const pexec = promisify(execFile);

const HOSTILE = `</name><evil/>&amp;"it's"<!--x-->]]>`;
const SPEC: DomainSpec = {
  name: 'ep-lab-a-p1',
  uuid: '4DEA22B3-1D52-D8F3-2516-782E98AB3FA0',
  domainType: 'kvm',
  vcpus: 2,
  memoryMiB: 768,
  overlayPath: '/var/lib/libvirt/images/ep-lab-a-p1.qcow2',
  seedPath: '/var/lib/libvirt/images/ep-lab-a-p1-seed.iso',
  network: 'default',
  mac: '52:54:00:AB:CD:EF',
  consoleLogPath: '/var/log/libvirt/qemu/ep-lab-a-p1-console.log',
  metadata: { ownerUid: 'uid-1234', proxyName: 'p1', providerEntry: 'lab-a', createdAt: '2026-01-02T03:04:05Z' },
};

// `virsh dumpxml` (libvirt 9.0.0) of a domain defined from buildDomainXml, trimmed to <metadata>.
const LIBVIRT_DUMP = `<domain type='qemu'>
  <name>ep-xmltest-a</name>
  <uuid>ac783e3b-b116-41a1-a7aa-dd052d9b0e27</uuid>
  <metadata>
    <ep:proxy xmlns:ep="https://egress-proxies.dev/xmlns/kvm2/1">
      <ep:owner>u-1&amp;2</ep:owner>
      <ep:name>&lt;p1&gt;</ep:name>
      <ep:entry>lab"a</ep:entry>
      <ep:created>2026-01-01T00:00:00Z</ep:created>
    </ep:proxy>
  </metadata>
  <memory unit='KiB'>262144</memory>
</domain>
`;
// `virsh metadata --uri https://egress-proxies.dev/xmlns/kvm2/1` of that domain (namespace stripped).
const LIBVIRT_GET_METADATA =
  '<proxy>\n  <owner>u-1&amp;2</owner>\n  <name>&lt;p1&gt;</name>\n  <entry>lab"a</entry>\n  <created>2026-01-01T00:00:00Z</created>\n</proxy>\n\n';

let dir = '';
let fileNo = 0;
async function toFile(xml: string): Promise<string> {
  const path = join(dir, `doc-${fileNo++}.xml`);
  await writeFile(path, xml);
  return path;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ep-domxml-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('buildDomainXml read back by xmllint', () => {
  it('carries every field of the spec', async (t) => {
    if (!(await needTool(t, 'xmllint', 'libxml2-utils'))) return;
    const doc = await toFile(buildDomainXml(SPEC));
    const checks: [string, string][] = [
      ['string(/domain/@type)', 'kvm'],
      ['string(/domain/name)', 'ep-lab-a-p1'],
      ['string(/domain/uuid)', '4dea22b3-1d52-d8f3-2516-782e98ab3fa0'],
      ['string(/domain/memory)', '768'],
      ['string(/domain/memory/@unit)', 'MiB'],
      ['string(/domain/currentMemory)', '768'],
      ['string(/domain/currentMemory/@unit)', 'MiB'],
      ['string(/domain/vcpu)', '2'],
      ['string(/domain/os/type)', 'hvm'],
      ['string(/domain/os/boot/@dev)', 'hd'],
      ['count(/domain/features/acpi)', '1'],
      ['count(/domain/features/apic)', '1'],
      ['string(/domain/cpu/@mode)', 'host-passthrough'],
      ['string(/domain/clock/@offset)', 'utc'],
      ['string(/domain/on_poweroff)', 'destroy'],
      ['string(/domain/on_reboot)', 'restart'],
      ['string(/domain/on_crash)', 'destroy'],
      ['count(/domain/devices/disk)', '2'],
      ["string(/domain/devices/disk[target/@dev='vda']/@device)", 'disk'],
      ["string(/domain/devices/disk[target/@dev='vda']/target/@bus)", 'virtio'],
      ["string(/domain/devices/disk[target/@dev='vda']/driver/@type)", 'qcow2'],
      ["string(/domain/devices/disk[target/@dev='vda']/source/@file)", SPEC.overlayPath],
      ["count(/domain/devices/disk[target/@dev='vda']/readonly)", '0'],
      ["string(/domain/devices/disk[target/@dev='vdb']/@device)", 'disk'],
      ["string(/domain/devices/disk[target/@dev='vdb']/target/@bus)", 'virtio'],
      ["string(/domain/devices/disk[target/@dev='vdb']/driver/@type)", 'raw'],
      ["string(/domain/devices/disk[target/@dev='vdb']/source/@file)", SPEC.seedPath],
      ["count(/domain/devices/disk[target/@dev='vdb']/readonly)", '1'],
      ["count(//disk[@device='cdrom'] | //target[@bus='sata'] | //target[@bus='ide'])", '0'],
      ['string(/domain/devices/interface/@type)', 'network'],
      ['string(/domain/devices/interface/source/@network)', 'default'],
      ['string(/domain/devices/interface/mac/@address)', '52:54:00:ab:cd:ef'],
      ['string(/domain/devices/interface/model/@type)', 'virtio'],
      ['string(/domain/devices/channel/@type)', 'unix'],
      ['string(/domain/devices/channel/target/@type)', 'virtio'],
      ['string(/domain/devices/channel/target/@name)', 'org.qemu.guest_agent.0'],
      ['string(/domain/devices/serial/@type)', 'file'],
      ['string(/domain/devices/serial/source/@path)', SPEC.consoleLogPath],
      ['string(/domain/devices/console/@type)', 'file'],
      ['string(/domain/devices/console/target/@type)', 'serial'],
      ['string(/domain/devices/rng/@model)', 'virtio'],
      ['string(/domain/devices/rng/backend/@model)', 'random'],
      ['string(/domain/devices/rng/backend)', '/dev/urandom'],
      ['count(/domain/devices/graphics | /domain/devices/video)', '0'],
      ['count(/domain/metadata/*)', '1'],
      ['namespace-uri(/domain/metadata/*)', OWNER_METADATA_URI],
      ['local-name(/domain/metadata/*)', 'proxy'],
      [`string(/domain/metadata/*[local-name()='proxy']/*[local-name()='owner'])`, 'uid-1234'],
      [`string(/domain/metadata/*[local-name()='proxy']/*[local-name()='name'])`, 'p1'],
      [`string(/domain/metadata/*[local-name()='proxy']/*[local-name()='entry'])`, 'lab-a'],
      [`string(/domain/metadata/*[local-name()='proxy']/*[local-name()='created'])`, '2026-01-02T03:04:05Z'],
      [`namespace-uri(/domain/metadata/*/*[local-name()='owner'])`, OWNER_METADATA_URI],
    ];
    for (const [expr, want] of checks) assert.equal(await xpath(doc, expr), want, expr);
  });

  it('leaves the CPU model to libvirt for qemu (TCG), and uuid and mac out when not given', async (t) => {
    if (!(await needTool(t, 'xmllint', 'libxml2-utils'))) return;
    const { uuid: _u, mac: _m, ...rest } = SPEC;
    const doc = await toFile(buildDomainXml({ ...rest, domainType: 'qemu' }));
    assert.equal(await xpath(doc, 'string(/domain/@type)'), 'qemu');
    assert.equal(await xpath(doc, 'count(/domain/cpu | /domain/uuid | //interface/mac)'), '0');
  });

  it('keeps hostile values as data: no element, attribute or comment is injected', async (t) => {
    if (!(await needTool(t, 'xmllint', 'libxml2-utils'))) return;
    const xml = buildDomainXml({
      ...SPEC,
      name: HOSTILE,
      overlayPath: `/a/${HOSTILE}`,
      seedPath: '/b/\'seed"',
      network: HOSTILE,
      consoleLogPath: '/c/<log>&',
      metadata: { ownerUid: HOSTILE, proxyName: HOSTILE, providerEntry: '"\'&<>', createdAt: 'tab\there\nnewline' },
    });
    const doc = await toFile(xml);
    assert.equal(await xpath(doc, 'count(//evil)'), '0');
    assert.equal(await xpath(doc, 'count(//comment())'), '0');
    const clean = await toFile(buildDomainXml(SPEC));
    for (const expr of ['count(//*)', 'count(//@*)'])
      assert.equal(await xpath(doc, expr), await xpath(clean, expr), expr);
    assert.equal(await xpath(doc, 'string(/domain/name)'), HOSTILE);
    assert.equal(await xpath(doc, "string(//disk[target/@dev='vda']/source/@file)"), `/a/${HOSTILE}`);
    assert.equal(await xpath(doc, "string(//disk[target/@dev='vdb']/source/@file)"), '/b/\'seed"');
    assert.equal(await xpath(doc, 'string(//interface/source/@network)'), HOSTILE);
    assert.equal(await xpath(doc, 'string(//serial/source/@path)'), '/c/<log>&');
    assert.equal(await xpath(doc, `string(//*[local-name()='owner'])`), HOSTILE);
    assert.equal(await xpath(doc, `string(//*[local-name()='entry'])`), '"\'&<>');
    assert.equal(await xpath(doc, `string(//*[local-name()='created'])`), 'tab\there\nnewline');
    assert.deepEqual(parseOwnerMetadata(xml), {
      ownerUid: HOSTILE,
      proxyName: HOSTILE,
      providerEntry: '"\'&<>',
      createdAt: 'tab\there\nnewline',
    });
  });
});

describe('libvirt schema (virt-xml-validate)', () => {
  it('accepts the domain for kvm and qemu, also with hostile values', async (t) => {
    if (!(await needTool(t, 'virt-xml-validate', 'libvirt-clients'))) return;
    if (!(await needTool(t, 'xmllint', 'libxml2-utils'))) return;
    const { uuid: _u, mac: _m, ...bare } = SPEC;
    const docs = [
      buildDomainXml(SPEC),
      buildDomainXml({ ...bare, domainType: 'qemu' }),
      buildDomainXml({ ...SPEC, metadata: { ...SPEC.metadata, proxyName: HOSTILE }, overlayPath: `/x/${HOSTILE}` }),
    ];
    for (const xml of docs) await pexec('virt-xml-validate', [await toFile(xml), 'domain'], { timeout: 20_000 });
  });

  it('accepts the volumes: qcow2 overlay with backing store, raw, qcow2', async (t) => {
    if (!(await needTool(t, 'virt-xml-validate', 'libvirt-clients'))) return;
    if (!(await needTool(t, 'xmllint', 'libxml2-utils'))) return;
    const vols = [
      buildVolumeXml({
        name: 'ep-p1.qcow2',
        capacityBytes: 10 * 2 ** 30,
        format: 'qcow2',
        backingPath: '/p/base-lab-a-d12.qcow2',
      }),
      buildVolumeXml({
        name: 'ep-p1.qcow2',
        capacityBytes: 10n * 2n ** 30n,
        format: 'qcow2',
        backingPath: '/p/b.raw',
        backingFormat: 'raw',
      }),
      buildVolumeXml({ name: 'ep-p1-seed.iso', capacityBytes: 65536, format: 'raw' }),
      buildVolumeXml({ name: 'base-lab-a-d12.qcow2', capacityBytes: 123456789, format: 'qcow2' }),
    ];
    for (const xml of vols) await pexec('virt-xml-validate', [await toFile(xml), 'storagevol'], { timeout: 20_000 });
  });
});

describe('buildDomainXml refuses what it cannot write', () => {
  const refuses = (patch: Partial<DomainSpec>, field: string) =>
    assert.throws(
      () => buildDomainXml({ ...SPEC, ...patch }),
      (err: unknown) => err instanceof Kvm2BuildError && err.field === field && err.code === 'KVM2_BUILD_INPUT',
      field,
    );
  it('names the bad field', () => {
    refuses({ name: '' }, 'name');
    refuses({ name: 'a\u0000b' }, 'name');
    refuses({ name: 'a\rb' }, 'name');
    refuses({ network: 'x\u001bY' }, 'network');
    refuses({ uuid: 'not-a-uuid' }, 'uuid');
    refuses({ mac: '52:54:00:ab:cd' }, 'mac');
    refuses({ mac: '01:00:5e:00:00:01' }, 'mac'); // multicast
    refuses({ vcpus: 0 }, 'vcpus');
    refuses({ vcpus: 1.5 }, 'vcpus');
    refuses({ memoryMiB: -1 }, 'memoryMiB');
    refuses({ overlayPath: 'relative.qcow2' }, 'overlayPath');
    refuses({ seedPath: '' }, 'seedPath');
    refuses({ consoleLogPath: 'log' }, 'consoleLogPath');
    refuses({ domainType: 'xen' as 'kvm' }, 'domainType');
    refuses({ metadata: { ...SPEC.metadata, ownerUid: ' ' } }, 'metadata.ownerUid');
    refuses({ metadata: { ...SPEC.metadata, createdAt: 'x\u0085' } }, 'metadata.createdAt');
  });
});

describe('buildVolumeXml', () => {
  it('writes name, capacity in bytes, format and the backing store', () => {
    const root = parseXml(
      buildVolumeXml({
        name: 'ov&.qcow2',
        capacityBytes: 2 ** 40,
        format: 'qcow2',
        backingPath: '/p/b<1>.raw',
        backingFormat: 'raw',
      }),
    );
    const get = (name: string) => findElement(root, (e) => e.name === name);
    assert.equal(get('name')?.text, 'ov&.qcow2');
    assert.equal(get('capacity')?.text, String(2 ** 40));
    assert.equal(get('capacity')?.attributes.get('unit'), 'bytes');
    assert.equal(findElement(root, (e) => e.name === 'target')?.children[0]?.attributes.get('type'), 'qcow2');
    const backing = get('backingStore')!;
    assert.equal(backing.children[0]?.text, '/p/b<1>.raw');
    assert.equal(backing.children[1]?.attributes.get('type'), 'raw');
    assert.equal(get('allocation'), undefined);
    const raw = parseXml(buildVolumeXml({ name: 's', capacityBytes: 1n, format: 'raw' }));
    assert.equal(findElement(raw, (e) => e.name === 'allocation')?.text, '0', 'raw volumes are sparse');
    assert.equal(
      findElement(raw, (e) => e.name === 'backingStore'),
      undefined,
    );
  });

  it('refuses bad capacities, formats and backing combinations', () => {
    const refuses = (spec: Parameters<typeof buildVolumeXml>[0], field: string) =>
      assert.throws(
        () => buildVolumeXml(spec),
        (err: unknown) => err instanceof Kvm2BuildError && err.field === field,
        field,
      );
    refuses({ name: 'v', capacityBytes: 0, format: 'raw' }, 'capacityBytes');
    refuses({ name: 'v', capacityBytes: 1.5, format: 'raw' }, 'capacityBytes');
    refuses({ name: 'v', capacityBytes: 2n ** 63n, format: 'raw' }, 'capacityBytes');
    refuses({ name: 'v', capacityBytes: 1, format: 'vmdk' as 'raw' }, 'format');
    refuses({ name: 'v', capacityBytes: 1, format: 'raw', backingPath: '/b' }, 'format');
    refuses({ name: 'v', capacityBytes: 1, format: 'qcow2', backingPath: 'b' }, 'backingPath');
    refuses({ name: 'v', capacityBytes: 1, format: 'qcow2', backingFormat: 'raw' }, 'backingFormat');
    refuses({ name: '', capacityBytes: 1, format: 'qcow2' }, 'name');
  });
});

describe('parseOwnerMetadata', () => {
  const META = { ownerUid: 'u-1&2', proxyName: '<p1>', providerEntry: 'lab"a', createdAt: '2026-01-01T00:00:00Z' };

  it('reads the mark from what libvirt returns: dumpxml and DOMAIN_GET_METADATA', () => {
    assert.deepEqual(parseOwnerMetadata(LIBVIRT_DUMP), META);
    assert.deepEqual(parseOwnerMetadata(LIBVIRT_GET_METADATA), META);
  });

  it('reads our own output back, whatever prefix or default namespace is used', () => {
    assert.deepEqual(parseOwnerMetadata(buildDomainXml(SPEC)), SPEC.metadata);
    assert.deepEqual(parseOwnerMetadata(buildOwnerMetadataElement(SPEC.metadata)), SPEC.metadata);
    const other = `<d><metadata><x:proxy xmlns:x="${OWNER_METADATA_URI}"><x:owner>o</x:owner><x:name>n</x:name><x:entry>e</x:entry><x:created>c</x:created></x:proxy></metadata></d>`;
    assert.deepEqual(parseOwnerMetadata(other), { ownerUid: 'o', proxyName: 'n', providerEntry: 'e', createdAt: 'c' });
    const dflt = `<proxy xmlns='${OWNER_METADATA_URI}'><owner>o</owner><name>n</name><entry>e</entry><created><![CDATA[c<]]></created></proxy>`;
    assert.deepEqual(parseOwnerMetadata(dflt), { ownerUid: 'o', proxyName: 'n', providerEntry: 'e', createdAt: 'c<' });
    // After DOMAIN_SET_METADATA libvirt namespaces only the root: children carry none.
    const setForm = `<domain><metadata><ep:proxy xmlns:ep="${OWNER_METADATA_URI}"><owner>o</owner><name>n</name><entry>e</entry><created>c</created></ep:proxy></metadata></domain>`;
    assert.deepEqual(parseOwnerMetadata(setForm), {
      ownerUid: 'o',
      proxyName: 'n',
      providerEntry: 'e',
      createdAt: 'c',
    });
    assert.equal(OWNER_METADATA_PREFIX, 'ep');
  });

  it('returns undefined when the mark is absent, foreign, incomplete or the XML is broken', () => {
    const cases = [
      '<domain type="kvm"><name>x</name></domain>',
      '<domain><metadata/></domain>',
      `<domain><metadata><o:proxy xmlns:o="https://other.example/ns"><o:owner>u</o:owner><o:name>n</o:name><o:entry>e</o:entry><o:created>c</o:created></o:proxy></metadata></domain>`,
      `<domain><metadata><ep:proxy xmlns:ep="${OWNER_METADATA_URI}"><ep:owner>u</ep:owner><ep:name>n</ep:name><ep:entry>e</ep:entry></ep:proxy></metadata></domain>`,
      `<domain><metadata><ep:proxy xmlns:ep="${OWNER_METADATA_URI}"><ep:owner> </ep:owner><ep:name>n</ep:name><ep:entry>e</ep:entry><ep:created>c</ep:created></ep:proxy></metadata></domain>`,
      `<domain><metadata><proxy><owner>u</owner><name>n</name><entry>e</entry><created>c</created></proxy></metadata></domain>`,
      LIBVIRT_DUMP.slice(0, 200),
      '',
      'not xml',
      '<proxy><owner>u</owner>',
    ];
    for (const xml of cases) assert.equal(parseOwnerMetadata(xml), undefined, xml);
  });
});

describe('escapeXml and parseXml', () => {
  it('escapes the five special characters and keeps tab, newline and non-ASCII', () => {
    assert.equal(escapeXml(`a&b<c>d"e'f`), 'a&amp;b&lt;c&gt;d&quot;e&apos;f');
    assert.equal(escapeXml('tab\tnl\nü😀'), 'tab\tnl\nü😀');
  });

  it('refuses control characters with the field and position', () => {
    for (const [bad, code] of [
      ['a\u0000', '0000'],
      ['\u0007', '0007'],
      ['x\r', '000D'],
      ['\u001f', '001F'],
      ['\u007f', '007F'],
      ['\u0085', '0085'],
      ['\ufffe', 'FFFE'],
      ['\ud800x', 'D800'],
    ] as const) {
      assert.throws(
        () => escapeXml(bad, 'metadata.proxyName'),
        (err: unknown) =>
          err instanceof Kvm2BuildError && err.field === 'metadata.proxyName' && err.message.includes(`U+${code}`),
        bad,
      );
    }
  });

  it('reads elements, attributes, entities, CDATA and skips comments and declarations', () => {
    const root = parseXml(
      `\ufeff<?xml version="1.0"?><!DOCTYPE a><!-- c --><a x='1&amp;2' y="&#x41;&#66;>"><b/>t&lt;<![CDATA[<raw>]]><c>z</c></a>\n`,
    );
    assert.equal(root.name, 'a');
    assert.equal(root.attributes.get('x'), '1&2');
    assert.equal(root.attributes.get('y'), 'AB>');
    assert.equal(root.text, 't<<raw>');
    assert.deepEqual(
      root.children.map((c) => c.name),
      ['b', 'c'],
    );
    assert.equal(root.children[1]!.text, 'z');
  });

  it('refuses malformed documents with XmlSyntaxError', () => {
    for (const bad of [
      '',
      '<a>',
      '<a></b>',
      '<a/><b/>',
      'text<a/>',
      '<a>&bogus;</a>',
      '<a>& b</a>',
      '<a x="1" x="2"/>',
      '<p:a/>',
      '<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>',
      '<a><!-- open</a>',
      `${'<a>'.repeat(65)}${'</a>'.repeat(65)}`,
      '<a x=1/>',
    ]) {
      assert.throws(
        () => parseXml(bad),
        (err: unknown) => err instanceof XmlSyntaxError && err.code === 'KVM2_XML_SYNTAX',
        bad,
      );
    }
  });
});
