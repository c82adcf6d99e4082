/**
 * Libvirt XML for a proxy VM: the domain, with the owner mark in `<metadata>` (storage volumes
 * are in ../volume-xml.ts). Pure. Every value is escaped; numbers, UUIDs and MACs are
 * validated. The seed is a read-only virtio disk, not a SATA CD-ROM: Debian's cloud kernel has no
 * AHCI driver, so a CD-ROM seed is invisible to cloud-init (docs/design.md).
 */
import { Kvm2BuildError } from '../build-errors.ts';
import { absolute, escapeXml, findElement, nonEmpty, parseXml } from '../xml.ts';
import type { XmlElement } from '../xml.ts';

/** The namespace of our `<metadata>` element (the `uri` of DOMAIN_GET/SET_METADATA). */
export const OWNER_METADATA_URI = 'https://egress-proxies.dev/xmlns/kvm2/1';
/** The prefix of that namespace (the `key` of DOMAIN_SET_METADATA). */
export const OWNER_METADATA_PREFIX = 'ep';

/** The mark that says which controller owns a domain and what it is. */
export interface OwnerMetadata {
  /** The UID of the owning installation: a domain with another UID is never adopted. */
  ownerUid: string;
  proxyName: string;
  /** The provider entry (`providers[].name`) the proxy belongs to. */
  providerEntry: string;
  /** When the proxy was created, RFC 3339. */
  createdAt: string;
}

/** What {@link buildDomainXml} describes. */
export interface DomainSpec {
  name: string;
  /** Optional fixed UUID (8-4-4-4-12 hex); libvirt generates one when absent. */
  uuid?: string;
  domainType: 'kvm' | 'qemu';
  vcpus: number;
  memoryMiB: number;
  /** Absolute path of the qcow2 overlay volume (vda). */
  overlayPath: string;
  /** Absolute path of the raw seed image volume (vdb, read-only). */
  seedPath: string;
  /** The libvirt network the NIC joins. */
  network: string;
  /** Optional fixed MAC (unicast, `52:54:00:12:34:56`); libvirt generates one when absent. */
  mac?: string;
  /** Absolute path of the file the serial console is written to (appended across boots). */
  consoleLogPath: string;
  metadata: OwnerMetadata;
}

const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const MAC_RE = /^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/;

/** The domain XML for DOMAIN_DEFINE_XML(_FLAGS). */
export function buildDomainXml(spec: DomainSpec): string {
  const e = (v: string, field: string) => escapeXml(nonEmpty(v, field), field);
  if (spec.domainType !== 'kvm' && spec.domainType !== 'qemu') {
    throw new Kvm2BuildError('domainType', `must be "kvm" or "qemu", got ${JSON.stringify(spec.domainType)}`);
  }
  const vcpus = positiveInt(spec.vcpus, 'vcpus');
  const memoryMiB = positiveInt(spec.memoryMiB, 'memoryMiB');
  if (spec.uuid !== undefined && !UUID_RE.test(spec.uuid)) {
    throw new Kvm2BuildError(
      'uuid',
      `must be a UUID like 4dea22b3-1d52-d8f3-2516-782e98ab3fa0, got ${JSON.stringify(spec.uuid)}`,
    );
  }
  const mac = spec.mac?.toLowerCase();
  if (mac !== undefined && (!MAC_RE.test(mac) || parseInt(mac.slice(0, 2), 16) % 2 === 1)) {
    throw new Kvm2BuildError('mac', `must be a unicast MAC like 52:54:00:12:34:56, got ${JSON.stringify(spec.mac)}`);
  }
  const overlay = e(absolute(spec.overlayPath, 'overlayPath'), 'overlayPath');
  const seed = e(absolute(spec.seedPath, 'seedPath'), 'seedPath');
  const consoleLog = e(absolute(spec.consoleLogPath, 'consoleLogPath'), 'consoleLogPath');
  return [
    `<domain type='${spec.domainType}'>`,
    `  <name>${e(spec.name, 'name')}</name>`,
    ...(spec.uuid === undefined ? [] : [`  <uuid>${spec.uuid.toLowerCase()}</uuid>`]),
    '  <metadata>',
    ownerElement(spec.metadata, true, '    '),
    '  </metadata>',
    `  <memory unit='MiB'>${memoryMiB}</memory>`,
    `  <currentMemory unit='MiB'>${memoryMiB}</currentMemory>`,
    `  <vcpu placement='static'>${vcpus}</vcpu>`,
    '  <os>',
    '    <type>hvm</type>',
    "    <boot dev='hd'/>",
    '  </os>',
    '  <features>',
    '    <acpi/>',
    '    <apic/>',
    '  </features>',
    ...(spec.domainType === 'kvm' ? ["  <cpu mode='host-passthrough'/>"] : []),
    "  <clock offset='utc'/>",
    '  <on_poweroff>destroy</on_poweroff>',
    '  <on_reboot>restart</on_reboot>',
    '  <on_crash>destroy</on_crash>',
    '  <devices>',
    "    <disk type='file' device='disk'>",
    "      <driver name='qemu' type='qcow2' discard='unmap'/>",
    `      <source file='${overlay}'/>`,
    "      <target dev='vda' bus='virtio'/>",
    '    </disk>',
    "    <disk type='file' device='disk'>",
    "      <driver name='qemu' type='raw'/>",
    `      <source file='${seed}'/>`,
    "      <target dev='vdb' bus='virtio'/>",
    '      <readonly/>',
    '    </disk>',
    "    <interface type='network'>",
    `      <source network='${e(spec.network, 'network')}'/>`,
    ...(mac === undefined ? [] : [`      <mac address='${mac}'/>`]),
    "      <model type='virtio'/>",
    '    </interface>',
    "    <channel type='unix'>",
    "      <source mode='bind'/>",
    "      <target type='virtio' name='org.qemu.guest_agent.0'/>",
    '    </channel>',
    "    <serial type='file'>",
    `      <source path='${consoleLog}' append='on'/>`,
    "      <target port='0'/>",
    '    </serial>',
    "    <console type='file'>",
    `      <source path='${consoleLog}' append='on'/>`,
    "      <target type='serial' port='0'/>",
    '    </console>',
    "    <rng model='virtio'>",
    "      <backend model='random'>/dev/urandom</backend>",
    '    </rng>',
    // No USB controller and no balloon, which libvirt would otherwise add: nothing in a proxy
    // uses them, and each is a device the guest's kernel and udev probe at every boot.
    "    <controller type='usb' model='none'/>",
    "    <memballoon model='none'/>",
    '  </devices>',
    '</domain>',
    '',
  ].join('\n');
}

/**
 * The bare owner element for DOMAIN_SET_METADATA (type ELEMENT, key {@link OWNER_METADATA_PREFIX},
 * uri {@link OWNER_METADATA_URI}): libvirt puts the root element into the namespace itself.
 */
export function buildOwnerMetadataElement(meta: OwnerMetadata): string {
  return ownerElement(meta, false);
}

/**
 * The owner mark read from a full domain XML (the `<metadata>` child in our namespace, any
 * prefix) or from the element DOMAIN_GET_METADATA returns for our URI (libvirt strips the
 * namespace there: a bare `<proxy>` root is accepted). Undefined when the mark is absent,
 * incomplete or the text is not well-formed XML: such a domain is not ours.
 */
export function parseOwnerMetadata(xml: string): OwnerMetadata | undefined {
  let root: XmlElement;
  try {
    root = parseXml(xml);
  } catch {
    return undefined;
  }
  // DOMAIN_GET_METADATA (asked by our URI) returns the element with its namespace stripped.
  const bare = root.localName === 'proxy' && root.namespace === undefined;
  const mark = bare ? root : findElement(root, (el) => el.localName === 'proxy' && el.namespace === OWNER_METADATA_URI);
  if (!mark) return undefined;
  // Children are in our namespace when we defined the domain, in none after DOMAIN_SET_METADATA.
  const field = (local: string) => {
    const el = mark.children.find(
      (c) => c.localName === local && (c.namespace === OWNER_METADATA_URI || c.namespace === undefined),
    );
    const text = el?.text.trim();
    return text === '' ? undefined : text;
  };
  const ownerUid = field('owner');
  const proxyName = field('name');
  const providerEntry = field('entry');
  const createdAt = field('created');
  if (ownerUid === undefined || proxyName === undefined || providerEntry === undefined || createdAt === undefined) {
    return undefined;
  }
  return { ownerUid, proxyName, providerEntry, createdAt };
}

/** The mark; `indent` goes before each tag only, never into a value (which may hold newlines). */
function ownerElement(meta: OwnerMetadata, prefixed: boolean, indent = ''): string {
  const p = prefixed ? `${OWNER_METADATA_PREFIX}:` : '';
  const xmlns = prefixed ? ` xmlns:${OWNER_METADATA_PREFIX}='${OWNER_METADATA_URI}'` : '';
  const leaf = (tag: string, value: string, field: string) =>
    `${indent}  <${p}${tag}>${escapeXml(nonEmpty(value, field), field)}</${p}${tag}>`;
  return [
    `${indent}<${p}proxy${xmlns}>`,
    leaf('owner', meta.ownerUid, 'metadata.ownerUid'),
    leaf('name', meta.proxyName, 'metadata.proxyName'),
    leaf('entry', meta.providerEntry, 'metadata.providerEntry'),
    leaf('created', meta.createdAt, 'metadata.createdAt'),
    `${indent}</${p}proxy>`,
  ].join('\n');
}

function positiveInt(n: number, field: string): number {
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Kvm2BuildError(field, `must be a positive integer, got ${String(n)}`);
  return n;
}
