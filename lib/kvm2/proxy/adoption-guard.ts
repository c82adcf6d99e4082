/**
 * The adoption guard: the provider acts only on domains that carry its mark with this
 * installation's owner UID and the expected provider entry. A domain without the mark, or with
 * another owner, is refused with a Permanent error and left untouched.
 */
import { DomainAffect, ErrorNumber, MetadataType } from '../../libvirt/constants.ts';
import type { CallOptions } from '../../libvirt/connection.ts';
import type { LibvirtClient } from '../../libvirt/client.ts';
import { LibvirtError } from '../../libvirt/errors.ts';
import type { Domain } from '../../libvirt/protocol.ts';
import { OWNER_METADATA_URI, parseOwnerMetadata } from './domain-xml.ts';
import type { OwnerMetadata } from './domain-xml.ts';
import { Kvm2AdoptionRefusedError } from '../errors.ts';

/**
 * The owner mark of a domain (persistent config), or undefined if it has none. A transient domain
 * (started with `virsh create`) has no persistent config, so libvirt answers OPERATION_INVALID: it
 * is never ours (proxies are always defined), so it has no mark rather than failing the caller
 * (a host survey or the GC listing would otherwise report the whole host as failing).
 */
export async function readOwnerMark(
  client: LibvirtClient,
  dom: Domain,
  call?: CallOptions,
): Promise<OwnerMetadata | undefined> {
  try {
    const xml = await client.domainGetMetadata(
      dom,
      { type: MetadataType.ELEMENT, uri: OWNER_METADATA_URI, flags: DomainAffect.CONFIG },
      call,
    );
    return parseOwnerMetadata(xml);
  } catch (err) {
    if (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.NO_DOMAIN_METADATA) return undefined;
    if (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.OPERATION_INVALID) return undefined;
    throw err;
  }
}

/** Throws Kvm2AdoptionRefusedError unless `mark` names `ownerUid` and `entry`. */
export function assertOwned(
  domain: string,
  mark: OwnerMetadata | undefined,
  ownerUid: string,
  entry: string,
): OwnerMetadata {
  if (mark === undefined) {
    throw new Kvm2AdoptionRefusedError(
      `domain ${domain} exists but lacks the egress-proxies mark (${OWNER_METADATA_URI}); it is not ours and is left untouched: rename the proxy, or remove the domain by hand if it is debris`,
    );
  }
  if (mark.ownerUid !== ownerUid) {
    throw new Kvm2AdoptionRefusedError(
      `domain ${domain} belongs to owner ${mark.ownerUid}, not to this installation (${ownerUid}); it is left untouched`,
    );
  }
  if (mark.providerEntry !== entry) {
    throw new Kvm2AdoptionRefusedError(
      `domain ${domain} belongs to provider entry ${mark.providerEntry}, not ${entry}; it is left untouched`,
    );
  }
  return mark;
}
