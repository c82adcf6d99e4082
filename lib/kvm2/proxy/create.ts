/**
 * Creating a proxy VM: the base's marker checked, debris under the proxy's volume names replaced
 * or refused (provenance.ts), pool-space precheck, qcow2 overlay on the base, cloud-init seed
 * volume, the owner record, domain definition with the owner mark, start. Every step looks before
 * it acts, so re-running after any partial failure converges on one domain and one set of
 * volumes, never duplicates, and never boots a disk this proxy's workflow did not make.
 */
import { Readable } from 'node:stream';
import { ErrorNumber } from '../../libvirt/constants.ts';
import { LibvirtError } from '../../libvirt/errors.ts';
import type { HostLinks } from '../../hostlink/pool.ts';
import type { ResolvedSquid } from '../../../contracts/squid.ts';
import { buildCloudInitSeed } from '../seed/cloud-config.ts';
import type { CloudInitSpec } from '../seed/cloud-config.ts';
import { buildDomainXml } from './domain-xml.ts';
import { buildVolumeXml } from '../volume-xml.ts';
import { InsufficientCapacity, Kvm2HostSetupError } from '../errors.ts';
import { lookupDomain, rpcOn } from '../rpc.ts';
import { ownDisks, verifyBase, writeOwnerRecord } from './provenance.ts';
import { assertOwned, readOwnerMark } from './adoption-guard.ts';
import { proxyObjectNames } from './object-names.ts';
import type { ProxyIdentity } from './object-names.ts';
import { buildSeedImage } from '../seed/seed-image.ts';
import { proxyVmState } from './vm-state.ts';

const GiB = 1024 ** 3;

export interface CreateProxyInput extends ProxyIdentity {
  links: HostLinks;
  pool: string;
  network: string;
  domainType: 'kvm' | 'qemu';
  vcpus: number;
  memoryMiB: number;
  diskGiB: number;
  /** The base image (from ensureImage): its path on the host and the format of its content. */
  base: { path: string; format: 'qcow2' | 'raw' };
  /** The proxy's resolved Squid settings: port, client blocks, destination policy, credentials. */
  squid: ResolvedSquid;
  /** RFC 3339 creation time recorded in the mark; the workflow passes a fixed value so retries agree. */
  createdAt: string;
  /** Free pool space kept beyond the seed and overlay headers, in bytes. Default 1 GiB. */
  reserveBytes?: number;
  /** Budget of each libvirt call (queue wait, dial and call), in ms. Default 30000 (DEFAULT_RPC_TIMEOUT_MS). */
  rpcTimeoutMs?: number;
  /** Ends the operation: the call in flight is aborted (its link killed) and the rest not made. */
  signal?: AbortSignal;
}

export interface CreatedProxy {
  domain: string;
  uuid: string;
  mac: string;
  overlayPath: string;
  seedPath: string;
  /** What this run did (false: the object was already there). */
  defined: boolean;
  started: boolean;
  /** Debris found under the proxy's volume names and replaced (`volume: why`); absent when none. */
  replaced?: string[];
}

/** What the proxy's seed says: its instance id and hostname, and its resolved Squid settings. */
export function proxySeedSpec(input: Pick<CreateProxyInput, 'ownerUid' | 'entry' | 'name' | 'squid'>): CloudInitSpec {
  return {
    instanceId: proxyObjectNames(input).uuid,
    hostname: input.name,
    squidPort: input.squid.port,
    allowedClientCidrs: input.squid.allowedClientCidrs,
    // Absent in runs recorded before the policy existed: the seed's safe default applies.
    ...(input.squid.egress ? { egress: input.squid.egress } : {}),
    ...(input.squid.auth ? { auth: input.squid.auth } : {}),
  };
}

/** Creates (or converges) the proxy's VM and starts it. */
export async function createProxy(input: CreateProxyInput): Promise<CreatedProxy> {
  const names = proxyObjectNames(input);
  const seed = buildSeedImage(buildCloudInitSeed(proxySeedSpec(input)));
  const rpc = rpcOn(input.links, input);

  // An existing domain of this name must be ours before anything else is touched.
  const existing = await lookupDomain(rpc, names.domain);
  const existingMark = existing
    ? assertOwned(names.domain, await rpc((c, call) => readOwnerMark(c, existing, call)), input.ownerUid, input.entry)
    : undefined;

  const pool = await rpc((c, call) => c.storagePoolLookupByName(input.pool, call)).catch((err: unknown) => {
    throw hostLacks(err, input.links, 'storage pool', input.pool, 'storagePool');
  });
  // Only an overlay and seed provably made by this run are reused; debris is replaced or refused.
  await verifyBase(rpc, pool, input.entry, input.base);
  const disks = await ownDisks(
    rpc,
    pool,
    names,
    {
      ownerUid: input.ownerUid,
      entry: input.entry,
      name: input.name,
      createdAt: input.createdAt,
      basePath: input.base.path,
      baseFormat: input.base.format,
    },
    existingMark?.createdAt === input.createdAt,
  );
  let overlay = disks.overlay;
  let seedVol = disks.seed;
  if (!overlay || !seedVol) {
    const info = await rpc((c, call) => c.storagePoolGetInfo(pool, call));
    const needed = (seedVol ? 0 : seed.length) + (overlay ? 0 : 4 * 1024 * 1024) + (input.reserveBytes ?? GiB);
    if (info.available < BigInt(needed)) throw new InsufficientCapacity(input.pool, needed, Number(info.available));
  }
  overlay ??= await rpc((c, call) =>
    c.storageVolCreateXml(
      pool,
      buildVolumeXml({
        name: names.overlayVolume,
        capacityBytes: input.diskGiB * GiB,
        format: 'qcow2',
        backingPath: input.base.path,
        backingFormat: input.base.format,
      }),
      0,
      call,
    ),
  );
  seedVol ??= await rpc((c, call) =>
    c.storageVolCreateXml(
      pool,
      buildVolumeXml({ name: names.seedVolume, capacityBytes: seed.length, format: 'raw' }),
      0,
      call,
    ),
  );
  // The record comes after the volumes it vouches for: a crash before it leaves debris, never a
  // record of volumes this run did not make.
  if (!disks.recorded) {
    await writeOwnerRecord(rpc, pool, names.ownerRecordVolume, {
      v: 1,
      ownerUid: input.ownerUid,
      entry: input.entry,
      name: input.name,
      createdAt: input.createdAt,
      basePath: input.base.path,
    });
  }
  // The seed is small and fully determined by the input: upload it every time, so a seed left
  // half-written by an earlier attempt is repaired.
  await rpc((c, call) =>
    c.storageVolUpload(seedVol, Readable.from([seed]), { ...call, finishTimeoutMs: call.timeoutMs }),
  );
  const overlayPath = await rpc((c, call) => c.storageVolGetPath(overlay, call));
  const seedPath = await rpc((c, call) => c.storageVolGetPath(seedVol, call));

  let dom = existing;
  let defined = false;
  if (!dom) {
    const xml = buildDomainXml({
      name: names.domain,
      uuid: names.uuid,
      domainType: input.domainType,
      vcpus: input.vcpus,
      memoryMiB: input.memoryMiB,
      overlayPath,
      seedPath,
      network: input.network,
      mac: names.mac,
      consoleLogPath: names.consoleLogPath,
      metadata: {
        ownerUid: input.ownerUid,
        proxyName: input.name,
        providerEntry: input.entry,
        createdAt: input.createdAt,
      },
    });
    dom = await rpc((c, call) => c.domainDefineXml(xml, 0, call));
    defined = true;
  }
  const domain = dom;
  let started = false;
  const { state, reason } = await rpc((c, call) => c.domainGetState(domain, call));
  if (proxyVmState(state, reason) !== 'Running') {
    try {
      // In one of the host's start slots: QEMU starting is the CPU-heavy step of a create.
      await input.links.start(() => rpc((c, call) => c.domainCreate(domain, 0, call)), { signal: input.signal });
      started = true;
    } catch (err) {
      // Started meanwhile (a concurrent retry): that is the state we want.
      if (!(err instanceof LibvirtError && err.libvirtCode === ErrorNumber.OPERATION_INVALID)) {
        throw hostLacks(err, input.links, 'network', input.network, 'network');
      }
    }
  }
  const out: CreatedProxy = {
    domain: names.domain,
    uuid: names.uuid,
    mac: names.mac,
    overlayPath,
    seedPath,
    defined,
    started,
  };
  if (disks.replaced.length > 0) out.replaced = disks.replaced;
  return out;
}

/**
 * A storage pool or network the entry names that the host does not have (libvirt's NO_STORAGE_POOL
 * or NO_NETWORK, NotFound in the error table, which is meant for deletes) becomes a Permanent
 * {@link Kvm2HostSetupError} naming the providers-file field; any other error passes through.
 */
function hostLacks(err: unknown, links: HostLinks, what: string, name: string, field: string): unknown {
  const code = err instanceof LibvirtError ? err.libvirtCode : undefined;
  if (code !== ErrorNumber.NO_STORAGE_POOL && code !== ErrorNumber.NO_NETWORK) return err;
  return new Kvm2HostSetupError(
    `host ${links.target.name} has no libvirt ${what} "${name}" (providers[].${field}): create it on the host ` +
      `(docs/operator-guide.md, "What a libvirt host needs") or name one it has`,
    { cause: err },
  );
}
