/**
 * Resizing a proxy VM (memory and vCPUs): the persistent definition is read back, its
 * `<memory>`, `<currentMemory>` and `<vcpu>` values are replaced, the guest is shut down (within
 * the grace, then destroyed), the new definition is defined and the domain started again. The
 * disk is not resized. The adoption guard applies: only our own domain is changed.
 */
import { DomainXmlFlags } from '../../libvirt/constants.ts';
import type { HostLinks } from '../../hostlink/pool.ts';
import { Kvm2ResizeError } from '../errors.ts';
import { rpcOn } from '../rpc.ts';
import { assertOwned, readOwnerMark } from './adoption-guard.ts';
import { destroyIfRunning, shutdownWithin } from './delete.ts';
import { proxyObjectNames } from './object-names.ts';
import type { ProxyIdentity } from './object-names.ts';

export interface ResizeProxyInput extends ProxyIdentity {
  links: HostLinks;
  vcpus: number;
  memoryMiB: number;
  /** Time given to a guest shutdown before the domain is destroyed, in ms. 0: destroy at once. */
  shutdownGraceMs?: number;
  /** Budget of each libvirt call (queue wait, dial and call), in ms. Default 30000. */
  rpcTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface ResizedProxy {
  /** False when the definition already had this size (nothing was restarted). */
  changed: boolean;
}

/** Replaces the text of the one element `tag` (any attributes) with `value`, or refuses. */
function replaceOne(xml: string, tag: string, attrs: string, value: string): string {
  const re = new RegExp(`<${tag}(\\s[^>]*)?>[^<]*</${tag}>`, 'g');
  const found = xml.match(re)?.length ?? 0;
  if (found !== 1) {
    throw new Kvm2ResizeError(`the domain definition has ${found} <${tag}> elements, not one; resize it with virsh`);
  }
  return xml.replace(re, `<${tag}${attrs}>${value}</${tag}>`);
}

/** Applies `memoryMiB` and `vcpus` to the proxy's domain, with a restart when they change. */
export async function resizeProxy(input: ResizeProxyInput): Promise<ResizedProxy> {
  const names = proxyObjectNames(input);
  const rpc = rpcOn(input.links, input);
  const dom = await rpc((c, call) => c.domainLookupByName(names.domain, call));
  assertOwned(names.domain, await rpc((c, call) => readOwnerMark(c, dom, call)), input.ownerUid, input.entry);
  const before = await rpc((c, call) => c.domainGetXmlDesc(dom, DomainXmlFlags.INACTIVE, call));
  const kib = String(input.memoryMiB * 1024);
  let after = replaceOne(before, 'memory', " unit='KiB'", kib);
  after = replaceOne(after, 'currentMemory', " unit='KiB'", kib);
  const vcpu = /<vcpu(\s[^>]*)?>/.exec(after)?.[1] ?? '';
  after = replaceOne(after, 'vcpu', vcpu, String(input.vcpus));
  if (after === before) return { changed: false };
  const grace = input.shutdownGraceMs ?? 0;
  if (grace > 0) await shutdownWithin(rpc, dom, grace);
  await destroyIfRunning(rpc, dom);
  const redefined = await rpc((c, call) => c.domainDefineXml(after, 0, call));
  await input.links.start(() => rpc((c, call) => c.domainCreate(redefined, 0, call)), { signal: input.signal });
  return { changed: true };
}
