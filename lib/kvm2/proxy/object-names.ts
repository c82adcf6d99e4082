/**
 * Names and identities of one proxy's libvirt objects. `_` separates the parts because identifiers
 * (entry, proxy name) never contain it, so no two (entry, proxy) pairs build the same name. UUID
 * and MAC derive from (owner UID, entry, name): re-running a create defines the same domain.
 */
import { createHash } from 'node:crypto';
import { checkIdentifier } from '../identifier.ts';

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
  uuid: string;
  mac: string;
  /** Serial console log on the host. */
  consoleLogPath: string;
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
    consoleLogPath: `/var/log/libvirt/qemu/${base}.console.log`,
  };
}
