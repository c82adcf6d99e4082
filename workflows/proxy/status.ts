// Pure transitions of a proxy's status: the initial status, condition changes, probe hysteresis,
// the address grace (H3), the marks of boot, recreation and deletion, and the checks the update
// handlers apply. No I/O, no workflow APIs: unit-tested on their own.
import type { ImageProgressSignal } from '../../contracts/image.ts';
import { MEMORY_MIB, VCPUS, inRange, rangeMessage } from '../../contracts/limits.ts';
import { exitIpDueAgain } from '../../contracts/exit-ip.ts';
import { BOOTING, newCondition, setCondition } from '../../contracts/health.ts';
import type { ProxyError, ProxySpec, ProxyState, ProxyStatus, ResolvedProxy, VmSize } from '../../contracts/proxy.ts';

// The health folds live in contracts/health.ts (the monitor activity shares them).
export { applyAddress, applyProbe, newCondition, setCondition, vmLost } from '../../contracts/health.ts';

export function initialStatus(spec: ProxySpec, at: string): ProxyStatus {
  return {
    name: spec.name,
    entry: spec.entry,
    imageKey: spec.imageKey,
    state: 'Pending',
    port: spec.squid?.port ?? 0,
    vm: { vcpus: spec.vm?.vcpus ?? 0, memoryMiB: spec.vm?.memoryMiB ?? 0, diskGiB: spec.vm?.diskGiB ?? 0 },
    conditions: {
      VmRunning: newCondition('Unknown', 'NotCreated', at),
      AddressAssigned: newCondition('Unknown', 'NotCreated', at),
      Healthy: newCondition('Unknown', 'NotProbed', at),
    },
    health: { consecutiveOk: 0, consecutiveFailed: 0, totalOk: 0, totalFailed: 0 },
    recreations: 0,
    createdAt: at,
    updatedAt: at,
  };
}

/** Applies the resolved spec's sizes and port to a status. */
export function withResolved(st: ProxyStatus, r: ResolvedProxy): ProxyStatus {
  return { ...st, port: r.squid.port, vm: { ...r.vm } };
}

/** libvirt runs the VM: VmRunning True. */
export function markVmRunning(st: ProxyStatus, at: string): ProxyStatus {
  return {
    ...st,
    conditions: { ...st.conditions, VmRunning: setCondition(st.conditions.VmRunning, 'True', 'Running', at) },
  };
}

/**
 * The VM was started at `at` (and libvirt runs it): `Healthy` is Unknown with reason Booting until
 * its first passing probe, or until `bootMs` after `at` (contracts/health.ts stillBooting), never
 * False from the failures of a Squid still starting.
 */
export function markBooting(st: ProxyStatus, at: string): ProxyStatus {
  const Healthy = newCondition('Unknown', BOOTING, at, 'waiting for the first passing probe');
  return { ...st, conditions: { ...st.conditions, Healthy } };
}

/** The VM was lost (`vmState`) and is being recreated: counted, no address, every condition False. */
export function markRecreating(st: ProxyStatus, vmState: string, at: string): ProxyStatus {
  return { ...vmDown(st, vmState, 'Recreating', at), recreations: st.recreations + 1 };
}

/** The VM is being moved to another host (its old one deleted first): not counted as a recreation. */
export function markMoving(st: ProxyStatus, at: string): ProxyStatus {
  return vmDown(st, 'Moving', 'Moving', at);
}

/** No VM serving while it is made again: no address, every condition False. */
function vmDown(st: ProxyStatus, vmReason: string, reason: string, at: string): ProxyStatus {
  const down = exitIpDueAgain(st);
  return {
    ...down,
    ip: undefined,
    conditions: {
      VmRunning: setCondition(st.conditions.VmRunning, 'False', vmReason, at),
      AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', reason, at),
      Healthy: setCondition(st.conditions.Healthy, 'False', reason, at),
    },
    health: { ...down.health, consecutiveOk: 0 },
  };
}

/** The VM is deleted: no address, every condition False with reason Deleted. */
export function markDeleted(st: ProxyStatus, at: string): ProxyStatus {
  return {
    ...st,
    ip: undefined,
    deletedAt: at,
    conditions: {
      VmRunning: setCondition(st.conditions.VmRunning, 'False', 'Deleted', at),
      AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', 'Deleted', at),
      Healthy: setCondition(st.conditions.Healthy, 'False', 'Deleted', at),
    },
  };
}

/** Upload progress of the base the proxy waits on. */
export function withImageProgress(st: ProxyStatus, p: ImageProgressSignal): ProxyStatus {
  return {
    ...st,
    image: { workflowId: p.workflowId, bytes: p.bytes, totalBytes: p.totalBytes, bytesPerSecond: p.bytesPerSecond },
  };
}

/** The error that failed the proxy, not an older one it recovered from (kept when it is the same code). */
export function failedError(last: ProxyError | undefined, code: string, message: string, at: string): ProxyError {
  return last?.code === code ? last : { kind: 'Permanent', code, message, at };
}

/** Deleting, Deleted or Failed: the proxy is on its way out, nothing more to change. */
export function isEnding(state: ProxyState): boolean {
  return state === 'Deleting' || state === 'Deleted' || state === 'Failed';
}

/** Why a delete is refused in `state`, or undefined when it is accepted. */
export function deleteProblem(state: ProxyState): string | undefined {
  return state === 'Deleted' || state === 'Failed' ? `the proxy is already ${state}` : undefined;
}

/** Why a resize to `size` is refused in `state`, or undefined when it is accepted. */
export function resizeProblem(size: VmSize, state: ProxyState): string | undefined {
  if (size.diskGiB !== undefined) return 'vm.diskGiB cannot be changed by a resize (memoryMiB and vcpus can)';
  if (size.vcpus !== undefined && !inRange(size.vcpus, VCPUS)) return rangeMessage('vm.vcpus', VCPUS, size.vcpus);
  if (size.memoryMiB !== undefined && !inRange(size.memoryMiB, MEMORY_MIB)) {
    return rangeMessage('vm.memoryMiB', MEMORY_MIB, size.memoryMiB);
  }
  if (size.vcpus === undefined && size.memoryMiB === undefined) return 'give vm.vcpus, vm.memoryMiB or both';
  if (isEnding(state)) return `the proxy is ${state}: nothing to resize`;
  return undefined;
}

/** At most this many hosts in a move's `avoidHosts`. */
export const MOVE_AVOID_MAX = 100;

/**
 * Why a move (`req`) is refused for a proxy with `st`, or undefined when it is accepted: a pool
 * member (`pool`: its pool's ID) is moved by its pool; only a Running proxy (healthy or not) with
 * no move under way (`moving`: the host it is leaving) moves.
 */
export function moveProblem(
  req: unknown,
  st: ProxyStatus,
  pool: string | undefined,
  moving: string | undefined,
): string | undefined {
  const body = req as { avoidHosts?: unknown; reason?: unknown } | null | undefined;
  const avoid = body?.avoidHosts;
  if (!Array.isArray(avoid) || avoid.some((h) => typeof h !== 'string' || h.length === 0)) {
    return 'avoidHosts must be a list of host names (give [] to move off the current host only)';
  }
  if (avoid.length > MOVE_AVOID_MAX) return `avoidHosts lists ${avoid.length} hosts; at most ${MOVE_AVOID_MAX}`;
  if (body?.reason !== undefined && typeof body.reason !== 'string') return 'reason must be a string when given';
  if (pool !== undefined) {
    return `the proxy is a member of pool ${pool}: its pool moves it (drain the host and the pool replaces its members there)`;
  }
  if (moving !== undefined) return `a move off ${moving} is already under way; wait for it to finish`;
  if (st.state !== 'Running') return `the proxy is ${st.state}: only a Running proxy (healthy or not) can be moved`;
  return undefined;
}

/** The size a resize asks for: the given fields over the current ones. */
export type ResizeTarget = Required<Pick<VmSize, 'vcpus' | 'memoryMiB'>>;

export function resizeTarget(size: VmSize, current: Required<VmSize>): ResizeTarget {
  return { vcpus: size.vcpus ?? current.vcpus, memoryMiB: size.memoryMiB ?? current.memoryMiB };
}

/** What the proxy's memo records (the API lists proxies from it without a query). */
export function memoOf(st: ProxyStatus): Record<string, unknown> {
  return {
    proxy: st.name,
    entry: st.entry,
    host: st.host ?? null,
    ip: st.ip ?? null,
    port: st.port,
    runningSince: st.runningSince ?? null,
    // Only once read: the memo of runs without an exit IP stays what it was.
    ...(st.exitIp === undefined ? {} : { exitIp: st.exitIp }),
  };
}

/**
 * What the search attributes and the memo are made of: the status without its counters, times and
 * last errors (which change on every poll and go to the status query, not to history).
 */
export function publishedKey(st: ProxyStatus): string {
  const c = st.conditions;
  const { health: _h, updatedAt: _u, lastError: _e, image: _i, conditions: _c, ...rest } = st;
  return JSON.stringify([rest, c.VmRunning.status, c.AddressAssigned.status, c.Healthy.status]);
}

/** The one-line summary the Web UI shows as the workflow's current details. */
export function detailsLine(st: ProxyStatus): string {
  return (
    `**${st.state}** · proxy \`${st.name}\` · entry \`${st.entry}\` · host \`${st.host ?? '-'}\` · ` +
    `ip \`${st.ip ?? '-'}\`${st.exitIp === undefined ? '' : ` · exit \`${st.exitIp}\``} · ` +
    `Healthy ${healthWord(st)}${st.reason ? ` · ${st.reason}` : ''}` +
    imageLine(st)
  );
}

/** `True`, `False`, `Unknown`, or `Unknown (Booting)`. */
function healthWord(st: ProxyStatus): string {
  const h = st.conditions.Healthy;
  return h.status === 'Unknown' && h.reason === BOOTING ? `Unknown (${BOOTING})` : h.status;
}

/** The base upload's progress, while the proxy waits on it ('' when it does not). */
function imageLine(st: ProxyStatus): string {
  const p = st.image;
  if (p === undefined || p.totalBytes <= 0) return '';
  const pct = Math.floor((100 * p.bytes) / p.totalBytes);
  return ` · image ${pct} % (${(p.bytes / 2 ** 20).toFixed(0)} of ${(p.totalBytes / 2 ** 20).toFixed(0)} MiB, ${(p.bytesPerSecond / 2 ** 20).toFixed(1)} MiB/s)`;
}
