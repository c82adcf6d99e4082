/**
 * Names and identities of one proxy's libvirt objects. `_` separates the parts because identifiers
 * (entry, proxy name) never contain it, so no two (entry, proxy) pairs build the same name. UUID
 * and MAC derive from (owner UID, entry, name): re-running a create defines the same domain.
 */
import { createHash } from 'node:crypto';
import { checkIdentifier } from '../identifier.ts';
import { isIdentifier } from '../../rules.ts';

export interface ProxyIdentity {
  /** Owner UID of this installation (the adoption guard's key). */
  ownerUid: string;
  /** Provider entry name (identifier). */
  entry: string;
  /** Proxy name (identifier; also the guest hostname). */
  name: string;
}

export interface ProxyObjectNames {
  domain: string;
  overlayVolume: string;
  seedVolume: string;
  /**
   * The owner record: a small raw volume of JSON, written by the create after it made the overlay
   * and seed, naming this installation, entry, proxy and the workflow's `createdAt`
   * (lib/kvm2/proxy/provenance.ts). An overlay or seed without it is debris.
   */
  ownerRecordVolume: string;
  uuid: string;
  mac: string;
  /** Serial console log on the host. */
  consoleLogPath: string;
  /** QEMU's own log of the domain (libvirt writes it through virtlogd). */
  qemuLogPath: string;
}

/** Where libvirt's QEMU driver and virtlogd keep the logs of domains. */
export const QEMU_LOG_DIR = '/var/log/libvirt/qemu';

/** Which of a proxy's volumes a name is. */
export type ProxyVolumeKind = 'overlay' | 'seed' | 'ownerRecord';

const VOLUME_SUFFIXES: readonly [string, ProxyVolumeKind][] = [
  ['.qcow2', 'overlay'],
  ['.seed.iso', 'seed'],
  ['.owner', 'ownerRecord'],
];

/**
 * The proxy and kind of a per-proxy volume of `entry` (`ep_<entry>_<name>.qcow2`, `.seed.iso`,
 * `.owner`), or undefined for any other name (bases, other entries' volumes, anything else).
 */
export function parseProxyVolumeName(
  entry: string,
  volume: string,
): { name: string; kind: ProxyVolumeKind } | undefined {
  const prefix = `ep_${checkIdentifier('entry', entry)}_`;
  if (!volume.startsWith(prefix)) return undefined;
  for (const [suffix, kind] of VOLUME_SUFFIXES) {
    if (!volume.endsWith(suffix)) continue;
    const name = volume.slice(prefix.length, volume.length - suffix.length);
    if (isIdentifier(name)) return { name, kind };
  }
  return undefined;
}

export function proxyObjectNames(id: ProxyIdentity): ProxyObjectNames {
  const entry = checkIdentifier('entry', id.entry);
  const name = checkIdentifier('proxy name', id.name);
  const base = `ep_${entry}_${name}`;
  const digest = createHash('sha256').update(`${id.ownerUid}\0${entry}\0${name}`).digest();
  const hex = digest.toString('hex');
  // RFC 9562 version 8 (custom) UUID with the variant bits set.
  const v = ((digest[6]! & 0x0f) | 0x80).toString(16).padStart(2, '0');
  const r = ((digest[8]! & 0x3f) | 0x80).toString(16).padStart(2, '0');
  const uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${v}${hex.slice(14, 16)}-${r}${hex.slice(18, 20)}-${hex.slice(20, 32)}`;
  // QEMU's locally administered OUI 52:54:00, then three derived bytes.
  const mac = `52:54:00:${hex.slice(32, 34)}:${hex.slice(34, 36)}:${hex.slice(36, 38)}`;
  return {
    domain: base,
    overlayVolume: `${base}.qcow2`,
    seedVolume: `${base}.seed.iso`,
    uuid,
    mac,
    ownerRecordVolume: `${base}.owner`,
    consoleLogPath: `${QEMU_LOG_DIR}/${base}.console.log`,
    qemuLogPath: `${QEMU_LOG_DIR}/${base}.log`,
  };
}
