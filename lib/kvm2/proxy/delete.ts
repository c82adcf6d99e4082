/**
 * Deleting a proxy: optional graceful shutdown within a bound, destroy, undefine with the flags
 * the host's libvirt supports, then the overlay, seed and owner record volumes, then the console
 * and QEMU log files (over SSH). NotFound at any step counts as done; the base image is never touched. A domain without our mark, or another owner's, is
 * refused (adoption guard) and nothing is deleted.
 */
import { DomainState, ErrorNumber, UndefineFlags } from '../../libvirt/constants.ts';
import type { LibvirtClient } from '../../libvirt/client.ts';
import { isNotFound, LibvirtError, unlessNotFound } from '../../libvirt/errors.ts';
import type { Domain } from '../../libvirt/protocol.ts';
import type { HostLinks } from '../../hostlink/pool.ts';
import type { Link } from '../../hostlink/pool.ts';
import type { SshSession } from '../../ssh/session.ts';
import { DEFAULT_RPC_TIMEOUT_MS, lookupDomain, rpcOn } from '../rpc.ts';
import { removeProxyLogs } from './console.ts';
import type { Rpc } from '../rpc.ts';
import { assertOwned, readOwnerMark } from './adoption-guard.ts';
import { proxyObjectNames } from './object-names.ts';
import type { ProxyIdentity } from './object-names.ts';

export interface DeleteProxyInput extends ProxyIdentity {
  links: HostLinks;
  pool: string;
  /** Time given to a guest shutdown before the domain is destroyed, in ms. 0: destroy at once. */
  shutdownGraceMs?: number;
  /** Budget of each libvirt call (queue wait, dial and call), in ms. Default 30000 (DEFAULT_RPC_TIMEOUT_MS). */
  rpcTimeoutMs?: number;
  /** Ends the operation: the call in flight is aborted (its link killed) and the rest not made. */
  signal?: AbortSignal;
  /**
   * The host's SSH session to remove the proxy's log files over (console.ts). Unset: a dedicated
   * link is dialed for it and closed after. `false`: the logs are left.
   */
  logSession?: SshSession | false;
}

export type Outcome = 'deleted' | 'absent';

export interface DeletedProxy {
  domain: Outcome;
  overlay: Outcome;
  seed: Outcome;
  /** The owner record volume (provenance.ts); absent in results recorded before it existed. */
  ownerRecord?: Outcome;
  /** The console and QEMU log files: `failed` when they could not be removed (the delete still succeeds). */
  logs?: Outcome | 'failed';
}

/** The domain is not running (OPERATION_INVALID) or no longer exists: nothing to stop. */
const notRunningOrGone = (err: unknown): boolean =>
  isNotFound(err) || (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.OPERATION_INVALID);

/** libvirt ≥ 5.6 knows CHECKPOINTS_METADATA. */
const CHECKPOINTS_SINCE = 5_006_000n;

async function undefineFlags(c: LibvirtClient, call: object): Promise<number> {
  const base = UndefineFlags.MANAGED_SAVE | UndefineFlags.SNAPSHOTS_METADATA | UndefineFlags.NVRAM;
  return (await c.getLibVersion(call)) >= CHECKPOINTS_SINCE ? base | UndefineFlags.CHECKPOINTS_METADATA : base;
}

export async function deleteProxy(input: DeleteProxyInput): Promise<DeletedProxy> {
  const names = proxyObjectNames(input);
  const rpc = rpcOn(input.links, input);
  const absentOr = async (fn: () => Promise<unknown>): Promise<Outcome> =>
    (await unlessNotFound(fn().then(() => 'deleted' as const))) ?? 'absent';

  const dom = await lookupDomain(rpc, names.domain);
  let domainOutcome: Outcome = 'absent';
  if (dom) {
    const d = dom;
    assertOwned(names.domain, await rpc((c, call) => readOwnerMark(c, d, call)), input.ownerUid, input.entry);
    const grace = input.shutdownGraceMs ?? 0;
    if (grace > 0) await shutdownWithin(rpc, d, grace);
    await destroyIfRunning(rpc, d);
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
  const pool = await rpc((c, call) => unlessNotFound(c.storagePoolLookupByName(input.pool, call)));
  const volume = async (name: string): Promise<Outcome> => {
    if (!pool) return 'absent';
    const p = pool;
    return absentOr(() =>
      rpc(async (c, call) => c.storageVolDelete(await c.storageVolLookupByName(p, name, call), 0, call)),
    );
  };
  const overlay = await volume(names.overlayVolume);
  const seed = await volume(names.seedVolume);
  const ownerRecord = await volume(names.ownerRecordVolume);
  const logs = input.logSession === false ? undefined : await removeLogs(input);
  return { domain: domainOutcome, overlay, seed, ownerRecord, ...(logs ? { logs } : {}) };
}

/** Removes the proxy's log files over SSH; a failure is reported, not thrown (the VM is gone). */
async function removeLogs(input: DeleteProxyInput): Promise<Outcome | 'failed'> {
  const id = { ownerUid: input.ownerUid, entry: input.entry, name: input.name };
  const options = { timeoutMs: input.rpcTimeoutMs ?? DEFAULT_RPC_TIMEOUT_MS, signal: input.signal };
  let link: Link | undefined;
  try {
    const session =
      (input.logSession || undefined) ?? (link = await input.links.dedicated('bulk', input.signal)).session;
    const { removed, failed } = await removeProxyLogs(session, id, options);
    return failed ? 'failed' : removed.length > 0 ? 'deleted' : 'absent';
  } catch (err) {
    if (input.signal?.aborted === true) throw err;
    return 'failed';
  } finally {
    await link?.close().catch(() => {});
  }
}

/** Destroys (powers off) the domain; one not running, or already gone, is left as it is. */
export async function destroyIfRunning(rpc: Rpc, dom: Domain): Promise<void> {
  await rpc(async (c, call) => {
    try {
      await c.domainDestroy(dom, 0, call);
    } catch (err) {
      if (!notRunningOrGone(err)) throw err;
    }
  });
}

/** Asks the guest to shut down and polls its state until it is off or `graceMs` passed. */
export async function shutdownWithin(rpc: Rpc, dom: Domain, graceMs: number): Promise<void> {
  const deadline = Date.now() + graceMs;
  try {
    await rpc((c, call) => c.domainShutdown(dom, call));
  } catch (err) {
    if (notRunningOrGone(err)) return;
    throw err;
  }
  for (let i = 0; i < 10_000 && Date.now() < deadline; i++) {
    const { state } = await rpc((c, call) => c.domainGetState(dom, call));
    if (state === DomainState.SHUTOFF) return;
    await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, deadline - Date.now()))));
  }
}
