// Pure transitions of a proxy's status: the initial status, condition changes, probe hysteresis,
// the address grace (H3), the marks of boot, recreation and deletion, and the checks the update
// handlers apply. No I/O, no workflow APIs: unit-tested on their own.
import type { ImageProgressSignal } from '../../contracts/image.ts';
import { MEMORY_MIB, VCPUS, inRange, rangeMessage } from '../../contracts/limits.ts';
import type {
  Condition,
  ConditionStatus,
  ProxyError,
  ProxySpec,
  ProxyState,
  ProxyStatus,
  ResolvedProxy,
  VmReading,
  VmSize,
} from '../../contracts/proxy.ts';

export function newCondition(status: ConditionStatus, reason: string, at: string, message?: string): Condition {
  return message === undefined ? { status, reason, since: at } : { status, reason, message, since: at };
}

/** Sets a condition; `since` moves only when the status changes. */
export function setCondition(
  current: Condition,
  status: ConditionStatus,
  reason: string,
  at: string,
  message?: string,
): Condition {
  const since = current.status === status ? current.since : at;
  return message === undefined ? { status, reason, since } : { status, reason, message, since };
}

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

/** One probe's outcome folded into the counters and the Healthy condition (hysteresis). */
export function applyProbe(
  st: ProxyStatus,
  outcome: { ok: true; latencyMs: number } | { ok: false; code: string; message: string },
  h: { healthyAfter: number; unhealthyAfter: number },
  at: string,
): ProxyStatus {
  const health = { ...st.health, lastProbeAt: at };
  let healthy = st.conditions.Healthy;
  if (outcome.ok) {
    health.consecutiveOk += 1;
    health.consecutiveFailed = 0;
    health.totalOk += 1;
    health.lastLatencyMs = outcome.latencyMs;
    if (health.consecutiveOk >= h.healthyAfter) healthy = setCondition(healthy, 'True', 'ProbePassed', at);
  } else {
    health.consecutiveFailed += 1;
    health.consecutiveOk = 0;
    health.totalFailed += 1;
    health.lastError = `${outcome.code}: ${outcome.message}`;
    if (health.consecutiveFailed >= h.unhealthyAfter) {
      healthy = setCondition(healthy, 'False', 'ProbeFailed', at, health.lastError);
    }
  }
  return { ...st, health, conditions: { ...st.conditions, Healthy: healthy } };
}

/**
 * One poll's address folded in (H3). A read address is taken at once. A poll without one (agent
 * restarting, VM briefly not running, or the read failing) keeps the previous IP and Healthy for
 * `gracePolls` polls; the next one demotes: no IP, AddressAssigned False, Healthy False.
 */
export function applyAddress(
  st: ProxyStatus,
  missedPolls: number,
  ip: string | undefined,
  gracePolls: number,
  at: string,
  why: string,
): { status: ProxyStatus; missedPolls: number } {
  if (ip !== undefined) {
    const AddressAssigned = setCondition(st.conditions.AddressAssigned, 'True', 'AddressRead', at);
    return { status: { ...st, ip, conditions: { ...st.conditions, AddressAssigned } }, missedPolls: 0 };
  }
  const missed = missedPolls + 1;
  if (st.ip !== undefined && missed <= gracePolls) return { status: st, missedPolls: missed };
  const conditions = {
    ...st.conditions,
    AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', 'NoAddress', at, why),
    Healthy:
      st.ip !== undefined
        ? setCondition(st.conditions.Healthy, 'False', 'AddressLost', at, why)
        : st.conditions.Healthy,
  };
  const health = st.ip !== undefined ? { ...st.health, consecutiveOk: 0 } : st.health;
  return { status: { ...st, ip: undefined, conditions, health }, missedPolls: missed };
}

/** libvirt runs the VM: VmRunning True. */
export function markVmRunning(st: ProxyStatus, at: string): ProxyStatus {
  return {
    ...st,
    conditions: { ...st.conditions, VmRunning: setCondition(st.conditions.VmRunning, 'True', 'Running', at) },
  };
}

/** A VM reading that means the VM is gone from under a Running proxy: it is recreated. */
export function vmLost(
  reading: VmReading | undefined,
): reading is VmReading & { state: 'Missing' | 'Failed' | 'Stopped' } {
  return (
    reading !== undefined && (reading.state === 'Missing' || reading.state === 'Failed' || reading.state === 'Stopped')
  );
}

/** The VM was lost (`vmState`) and is being recreated: counted, no address, every condition False. */
export function markRecreating(st: ProxyStatus, vmState: string, at: string): ProxyStatus {
  return {
    ...st,
    recreations: st.recreations + 1,
    ip: undefined,
    conditions: {
      VmRunning: setCondition(st.conditions.VmRunning, 'False', vmState, at),
      AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', 'Recreating', at),
      Healthy: setCondition(st.conditions.Healthy, 'False', 'Recreating', at),
    },
    health: { ...st.health, consecutiveOk: 0 },
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
  };
}

/** The one-line summary the Web UI shows as the workflow's current details. */
export function detailsLine(st: ProxyStatus): string {
  return (
    `**${st.state}** · proxy \`${st.name}\` · entry \`${st.entry}\` · host \`${st.host ?? '-'}\` · ` +
    `ip \`${st.ip ?? '-'}\` · Healthy ${st.conditions.Healthy.status}${st.reason ? ` · ${st.reason}` : ''}`
  );
}
