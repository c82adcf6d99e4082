// A proxy workflow's input and what one run carries into the next over continue-as-new: the one
// thing a run of one build hands a run of another (docs/temporal.md, "Versioning: the rule"), so a
// change here only adds optional fields. Plain JSON.
import type { MemberReport } from './pool.ts';
import type { ProxySpec, ProxyStatus, ResolvedProxy } from './proxy.ts';

/** What a run carries into the next one over continue-as-new. */
export interface CarriedProxy {
  resolved: ResolvedProxy;
  status: ProxyStatus;
  missedPolls: number;
  /** Workflow time (ms) the VM was last started; bounds the wait for a first address. */
  startedAtMs?: number;
  /** An address was read since the VM was last started. */
  addressedOnce: boolean;
  /** RFC 3339 time since when the host has not answered the VM's reads (host-reach.ts). */
  hostUnreachableSince?: string;
  /** A pool member's last report to its pool: the next run does not send it again. */
  report?: CarriedReport;
}

/** The report a member last sent its pool (workflows/proxy/pool-member.ts). */
export interface CarriedReport {
  /** Its key (the report without `at` and `lastError`). */
  key: string;
  sent: MemberReport;
  /** Its `at`, ms: each later report's is later. */
  lastAtMs: number;
}

export interface ProxyWorkflowInput extends ProxySpec {
  /** The installation's owner UID; checked against the worker's providers file when given. */
  ownerUid?: string;
  /** Continue-as-new after this many health polls (default: hourly, or when the server suggests it). */
  continueAsNewAfterPolls?: number;
  /**
   * The Running phase's loop: `monitor` (the default: one long-running activity that returns only
   * on a transition, docs/health.md) or `poll` (two activities and a timer per interval, from the
   * workflow; the steady-state benchmark's comparison).
   */
  healthLoop?: 'monitor' | 'poll';
  /** Set by a pool for its members (docs/pools.md); clients leave it unset. */
  pool?: PoolMembership;
  /** Set by the previous run on continue-as-new; clients leave it unset. */
  carried?: CarriedProxy;
}

/** What a pool tells a member it starts: where to report, whether it serves, where to go. */
export interface PoolMembership {
  /** The pool workflow's ID: the member reports its changes there. */
  workflowId: string;
  /** In discovery from the start (a pool starts its members as spares: false). */
  serving: boolean;
  /** Hosts the member must not be placed on. */
  avoidHosts?: string[];
  /** The pool's members that stay (not leaving or being replaced) per host: the fewest is preferred. */
  hostCounts?: Record<string, number>;
  /** Its place among the members a pool created at once: they take the hosts tied for fewest in turn. */
  spreadSlot?: number;
  /** The pool's members one host may hold (a host at the limit is not picked while another has room). */
  maxPerHost?: number;
}
