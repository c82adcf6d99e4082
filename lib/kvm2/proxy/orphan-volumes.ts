/**
 * Per-proxy volumes left without a domain (a crash between the overlay and the define, a host that
 * came back after its proxies were failed over): listing and deleting them for the orphan GC.
 * Provably ours means both: the name pattern of this entry (`ep_<entry>_<name>.qcow2`, `.seed.iso`,
 * `.owner`) and an owner record (provenance.ts) naming this installation's owner UID, the entry
 * and the proxy. Volumes without such a record are never touched here; neither are bases, other
 * entries' volumes, or any volume a domain uses.
 */
import type { CallOptions } from '../../libvirt/connection.ts';
import type { StorageVol } from '../../libvirt/protocol.ts';
import { isNotFound } from '../../libvirt/errors.ts';
import type { HostLinks } from '../../hostlink/pool.ts';
import type { Rpc } from '../rpc.ts';
import { lookupDomain, lookupVol } from '../rpc.ts';
import { parseProxyVolumeName, proxyObjectNames } from './object-names.ts';
import { domainsUsing, readOwnerRecord } from './provenance.ts';

/** One proxy's volumes without a domain, with the owner record that proves them ours. */
export interface OrphanVolumes {
  /** Proxy name. */
  name: string;
  /** The run that made them (the owner record's `createdAt`), for the GC's minimum age. */
  createdAt: string;
  /** Volume names (overlay, seed, owner record; whichever exist). */
  volumes: string[];
}

interface Filter {
  entry: string;
  ownerUid: string;
  pool: string;
}

function rpcOf(links: HostLinks, options: CallOptions): Rpc {
  return (fn) => links.call(fn, options);
}

/** Volume sets of `entry` in `pool` that carry our owner record and have no domain of their name. */
export async function listOrphanVolumes(
  links: HostLinks,
  filter: Filter,
  options: CallOptions = {},
): Promise<OrphanVolumes[]> {
  const rpc = rpcOf(links, options);
  const pool = await rpc((c, o) => c.storagePoolLookupByName(filter.pool, o));
  const groups = new Map<string, { record?: StorageVol; volumes: string[] }>();
  for (const vol of await rpc((c, o) => c.storagePoolListAllVolumes(pool, o))) {
    const parsed = parseProxyVolumeName(filter.entry, vol.name);
    if (!parsed) continue;
    const g = groups.get(parsed.name) ?? { volumes: [] };
    g.volumes.push(vol.name);
    if (parsed.kind === 'ownerRecord') g.record = vol;
    groups.set(parsed.name, g);
  }
  const domains = new Set((await rpc((c, o) => c.listAllDomains(0, o))).map((d) => d.name));
  const out: OrphanVolumes[] = [];
  for (const [name, g] of groups) {
    if (!g.record) continue; // no owner evidence: never ours to collect
    const id = { ownerUid: filter.ownerUid, entry: filter.entry, name };
    if (domains.has(proxyObjectNames(id).domain)) continue; // the domain GC's, or in use
    const rec = await readOwnerRecord(rpc, g.record);
    if (typeof rec !== 'object' || rec.ownerUid !== id.ownerUid || rec.entry !== id.entry || rec.name !== name)
      continue;
    out.push({ name, createdAt: rec.createdAt, volumes: g.volumes.sort() });
  }
  return out;
}

/**
 * Deletes one proxy's orphaned volumes after checking again that they are ours and idle: no
 * domain of the proxy's name, the owner record still of run `createdAt`, and no domain on the
 * host using any of them. The record goes last, so an interrupted delete is found again.
 * Returns the names deleted; an empty list when the check no longer holds (nothing deleted).
 */
export async function deleteOrphanVolumes(
  links: HostLinks,
  filter: Filter & { name: string; createdAt: string },
  options: CallOptions = {},
): Promise<string[]> {
  const rpc = rpcOf(links, options);
  const id = { ownerUid: filter.ownerUid, entry: filter.entry, name: filter.name };
  const names = proxyObjectNames(id);
  if (await lookupDomain(rpc, names.domain)) return [];
  const pool = await rpc((c, o) => c.storagePoolLookupByName(filter.pool, o));
  const recordVol = await lookupVol(rpc, pool, names.ownerRecordVolume);
  if (!recordVol) return [];
  const rec = await readOwnerRecord(rpc, recordVol);
  if (typeof rec !== 'object' || rec.ownerUid !== id.ownerUid || rec.entry !== id.entry) return [];
  if (rec.name !== id.name || rec.createdAt !== filter.createdAt) return [];
  const vols: StorageVol[] = [];
  for (const n of [names.overlayVolume, names.seedVolume]) {
    const v = await lookupVol(rpc, pool, n);
    if (v) vols.push(v);
  }
  vols.push(recordVol);
  const paths = await Promise.all(vols.map((v) => rpc((c, o) => c.storageVolGetPath(v, o))));
  if ((await domainsUsing(rpc, paths)).length > 0) return [];
  const deleted: string[] = [];
  for (const v of vols) {
    try {
      await rpc((c, o) => c.storageVolDelete(v, 0, o));
      deleted.push(v.name);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
  return deleted;
}
