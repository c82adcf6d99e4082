// Contracts of a host's maintenance workflow (docs/hosts.md): cordon (no new placements), drain
// (pool members replaced elsewhere within each pool's budget, standalone proxies moved, then the
// host is empty) and uncordon. One workflow per host, ID `host/<entry>/<host>`, open while the host
// is cordoned; placement reads its status, a host without one (or whose run ended) is schedulable.

/** Workflow type of a host's maintenance workflow (its exported function name). */
export const HOST_WORKFLOW_TYPE = 'hostWorkflow';
export const HOST_STATUS_QUERY = 'status';
export const HOST_CORDON_UPDATE = 'cordon';
export const HOST_DRAIN_UPDATE = 'drain';
export const HOST_UNCORDON_UPDATE = 'uncordon';
/** From a host workflow to a pool: members on `host` must move (draining) or may stay (not). */
export const POOL_HOST_DRAIN_SIGNAL = 'hostDrain';
/** Moves a Running standalone proxy to another host (its VM recreated there). */
export const PROXY_MOVE_UPDATE = 'move';

export function hostWorkflowId(entry: string, host: string): string {
  return `host/${entry}/${host}`;
}

/**
 * `Schedulable`: no maintenance (also what a host without a workflow reads as). `Cordoned`: no new
 * placements, proxies stay. `Draining`: cordoned, its proxies are moving. `Drained`: cordoned and
 * none of our proxies left on it.
 */
export type HostPhase = 'Schedulable' | 'Cordoned' | 'Draining' | 'Drained';

/** Body of cordon, drain and uncordon: why (shown in status, logs and the Web UI). */
export interface HostActionRequest {
  reason?: string;
  /**
   * Drain only: how long the drain may take, in ms from this request (a later drain request with
   * one sets it anew). Past it with proxies still on the host, the drain is `overdue` (its status,
   * a warning in the worker's log, `egress_host_drain_overdue`): it goes on asking every pass and
   * deletes nothing by force; the operator decides (docs/hosts.md).
   */
  deadlineMs?: number;
}

/** Bounds of a drain's `deadlineMs`: a second, and 30 days. */
export const MIN_DRAIN_DEADLINE_MS = 1_000;
export const MAX_DRAIN_DEADLINE_MS = 30 * 86_400_000;

/** One proxy a drain is moving off the host. */
export interface DrainedProxy {
  name: string;
  /** `<entry>/<pool>` of a pool member; absent for a standalone proxy. */
  pool?: string;
  /** `asked`: its pool or its move was told; `gone`: no longer on the host. */
  state: 'asked' | 'gone';
  /** `code: message` when asking failed (tried again on the next pass). */
  error?: string;
}

export interface HostDrain {
  /** RFC 3339 workflow times. */
  startedAt: string;
  finishedAt?: string;
  proxies: DrainedProxy[];
  /** Proxies still on the host at the last pass. */
  remaining: number;
  /** RFC 3339 workflow time the drain should be done by (a drain request's `deadlineMs`). */
  deadlineAt?: string;
  /**
   * True once a pass after `deadlineAt` still found proxies on the host (it stays true if the drain
   * ends later: `finishedAt` says when). The proxies still `asked` are the ones that did not move.
   */
  overdue?: boolean;
  /**
   * What the last pass could not read (`code: message`): the host's own domains (the pass then
   * counted visibility alone) or the whole listing (the pass was skipped). Absent when it read all.
   */
  lastError?: string;
}

/** A host still `Draining` past its drain's deadline with proxies left (the metric, the CLI's --wait). */
export function drainOverdue(s: Pick<HostStatus, 'phase' | 'drain'>): boolean {
  return s.phase === 'Draining' && s.drain?.overdue === true;
}

export interface HostStatus {
  entry: string;
  host: string;
  phase: HostPhase;
  cordoned: boolean;
  /** RFC 3339 time of the cordon (or drain) that made it unschedulable. */
  since?: string;
  reason?: string;
  drain?: HostDrain;
}

/** From a host workflow to a pool (POOL_HOST_DRAIN_SIGNAL). */
export interface HostDrainNotice {
  host: string;
  draining: boolean;
}

/** Body of a standalone proxy's move (PROXY_MOVE_UPDATE). */
export interface ProxyMoveRequest {
  /** Hosts the new VM must not go to (the drained host among them). */
  avoidHosts: string[];
  reason?: string;
}

/**
 * A host as the API shows it (`/v1/hosts`, the fleet page): its maintenance status beside the last
 * provider-health survey and the count of our open proxy workflows on it.
 */
export interface HostView extends HostStatus {
  /** From the last provider-health survey (absent before the first). */
  reachable?: boolean;
  surveyedAt?: string;
  memoryTotalMiB?: number;
  memoryFreeMiB?: number;
  cpus?: number;
  maxProxies?: number;
  error?: string;
  /** Open proxy workflows on the host (visibility: `ProxyHost`), pool members included. */
  proxies: number;
}

/** Interval between a drain's passes (list the host's proxies, ask, count), in ms. */
export const DEFAULT_DRAIN_POLL_MS = 10_000;
/** Longest `reason` a cordon, drain or uncordon takes, in characters. */
export const MAX_HOST_REASON_LENGTH = 500;

/** What a host workflow carries across continue-as-new. */
export interface HostCarried {
  phase: HostPhase;
  cordoned: boolean;
  since?: string;
  reason?: string;
  drain?: HostDrain;
  /** Pools (`<entry>/<pool>`) told the host drains: true once the signal went through. */
  poolsTold: Record<string, boolean>;
  /** The host was found in the providers file (checked once per workflow). */
  known: boolean;
}

/** Input of the host workflow (client/hosts.ts starts it with `{ entry, host }`). */
export interface HostWorkflowInput {
  entry: string;
  host: string;
  /** Interval between drain passes, in ms (default DEFAULT_DRAIN_POLL_MS). */
  drainPollMs?: number;
  /** Tests: continue as new after this many updates (cordon, drain, uncordon); unset: when the server suggests it. */
  continueAsNewAfterUpdates?: number;
  /** Set by the previous run on continue-as-new; clients leave it unset. */
  carried?: HostCarried;
}

/** A proxy found on a host by a drain pass: an open workflow (visibility), or a marked domain without one. */
export interface HostProxy {
  name: string;
  /** `<entry>/<pool>` of a pool member. */
  pool?: string;
  /** A marked domain on the host whose proxy has no open workflow (the orphan GC's to delete). */
  orphan?: boolean;
  /**
   * A marked domain on the host whose proxy's open workflow is listed on another host (a move
   * under way: its workflow deletes this VM); counted, not asked.
   */
  elsewhere?: boolean;
}

/** One drain pass's listing of a host. */
export interface HostProxyListing {
  proxies: HostProxy[];
  /** Why the host's own domains could not be listed (`code: message`); visibility alone then. */
  hostError?: string;
}
