/**
 * Deleting a proxy: optional graceful shutdown within a bound, destroy, undefine with the flags
 * the host's libvirt supports, then the overlay and seed volumes. NotFound at any step counts as
 * done; the base image is never touched. A domain without our mark, or another owner's, is
 * refused (adoption guard) and nothing is deleted.
 */
import { DomainState, ErrorNumber, UndefineFlags } from '../../libvirt/constants.ts';
import type { LibvirtClient } from '../../libvirt/client.ts';
import { LibvirtError } from '../../libvirt/errors.ts';
import type { Domain, StoragePool } from '../../libvirt/protocol.ts';
import type { HostLinks } from '../../ssh/pool.ts';
import { assertOwned, readOwnerMark } from './adoption-guard.ts';
import { proxyObjectNames } from './object-names.ts';
import type { ProxyIdentity } from './object-names.ts';

export interface DeleteProxyInput extends ProxyIdentity {
  links: HostLinks;
  pool: string;
  /** Time given to a guest shutdown before the domain is destroyed, in ms. 0: destroy at once. */
  shutdownGraceMs?: number;
  rpcTimeoutMs?: number;
  signal?: AbortSignal;
}

export type Outcome = 'deleted' | 'absent';

export interface DeletedProxy {
  domain: Outcome;
  overlay: Outcome;
  seed: Outcome;
}

const isNotFound = (err: unknown): boolean => err instanceof LibvirtError && err.kind === 'NotFound';

/** libvirt ≥ 5.6 knows CHECKPOINTS_METADATA. */
const CHECKPOINTS_SINCE = 5_006_000n;

async function undefineFlags(c: LibvirtClient, call: object): Promise<number> {
  const base = UndefineFlags.MANAGED_SAVE | UndefineFlags.SNAPSHOTS_METADATA | UndefineFlags.NVRAM;
  return (await c.getLibVersion(call)) >= CHECKPOINTS_SINCE ? base | UndefineFlags.CHECKPOINTS_METADATA : base;
}

export async function deleteProxy(input: DeleteProxyInput): Promise<DeletedProxy> {
  const names = proxyObjectNames(input);
  const opts = { timeoutMs: input.rpcTimeoutMs ?? 30_000, signal: input.signal };
  const rpc = <T>(
    fn: (c: LibvirtClient, call: { timeoutMs?: number; signal?: AbortSignal }) => Promise<T>,
  ): Promise<T> => input.links.call(fn, opts);
  const absentOr = async (fn: () => Promise<unknown>): Promise<Outcome> => {
    try {
      await fn();
      return 'deleted';
    } catch (err) {
      if (isNotFound(err)) return 'absent';
      throw err;
    }
  };

  let dom: Domain | undefined;
  try {
    dom = await rpc((c, call) => c.domainLookupByName(names.domain, call));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  let domainOutcome: Outcome = 'absent';
  if (dom) {
    const d = dom;
    assertOwned(names.domain, await rpc((c, call) => readOwnerMark(c, d, call)), input.ownerUid, input.entry);
    const grace = input.shutdownGraceMs ?? 0;
    if (grace > 0) await shutdownWithin(input.links, d, grace, opts);
    await rpc(async (c, call) => {
      try {
        await c.domainDestroy(d, 0, call);
      } catch (err) {
        // Not running (OPERATION_INVALID) or already gone: nothing to destroy.
        if (!(isNotFound(err) || (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.OPERATION_INVALID)))
          throw err;
      }
    });
    domainOutcome = await absentOr(() =>
      rpc(async (c, call) => {
        const flags = await undefineFlags(c, call);
        try {
          await c.domainUndefine(d, flags, call);
        } catch (err) {
          // A daemon that does not know a flag or UNDEFINE_FLAGS itself: the plain call.
          if (
            err instanceof LibvirtError &&
            (err.libvirtCode === ErrorNumber.NO_SUPPORT || err.libvirtCode === ErrorNumber.INVALID_ARG)
          ) {
            await c.domainUndefine(d, 0, call);
          } else throw err;
        }
      }),
    );
  }
  // A missing pool means the volumes are gone with it.
  let pool: StoragePool | undefined;
  try {
    pool = await rpc((c, call) => c.storagePoolLookupByName(input.pool, call));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const volume = async (name: string): Promise<Outcome> => {
    if (!pool) return 'absent';
    const p = pool;
    return absentOr(() =>
      rpc(async (c, call) => c.storageVolDelete(await c.storageVolLookupByName(p, name, call), 0, call)),
    );
  };
  return { domain: domainOutcome, overlay: await volume(names.overlayVolume), seed: await volume(names.seedVolume) };
}

/** Asks the guest to shut down and polls its state until it is off or `graceMs` passed. */
async function shutdownWithin(
  links: HostLinks,
  dom: Domain,
  graceMs: number,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<void> {
  const deadline = Date.now() + graceMs;
  try {
    await links.call((c, call) => c.domainShutdown(dom, call), opts);
  } catch (err) {
    if (isNotFound(err) || (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.OPERATION_INVALID)) return;
    throw err;
  }
  for (let i = 0; i < 10_000 && Date.now() < deadline; i++) {
    const { state } = await links.call((c, call) => c.domainGetState(dom, call), opts);
    if (state === DomainState.SHUTOFF) return;
    await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, deadline - Date.now()))));
  }
}
