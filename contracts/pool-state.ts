// A pool workflow's input and the state one run carries into the next over continue-as-new: the
// one thing a run of one build hands a run of another (docs/temporal.md, "Versioning: the rule"),
// so a change here only adds optional fields. Plain JSON; the reconciler's rules are
// workflows/pool/plan.ts.
import type {
  DoorReport,
  MemberReport,
  MemberRole,
  PoolFailure,
  PoolSpec,
  PoolTemplate,
  ResolvedPoolSpec,
} from './pool.ts';

export interface PoolWorkflowInput {
  spec: PoolSpec;
  /** The installation's owner UID, handed to members. */
  ownerUid?: string;
  /** Continue-as-new after this many passes of the reconciler (default 500, or when the server suggests it). */
  continueAsNewAfterPasses?: number;
  /** Member starts in flight at once (default POOL_START_WINDOW). */
  startWindow?: number;
  /** Set by the previous run on continue-as-new; clients leave it unset. */
  carried?: CarriedPoolState;
}

/**
 * The state as one run hands it to the next: its members packed (`packedMembers`, rows of
 * workflows/pool/carry.ts), or as records (`members`) in states carried by builds before the
 * packed form. A build reads both shapes; it writes the packed one.
 */
export type CarriedPoolState = Omit<PoolState, 'members'> & {
  members?: MemberRecord[];
  packedMembers?: PackedMembers;
};

/** One member's values in a fixed order (workflows/pool/carry.ts); its report is a nested row. */
export type PackedMember = (string | number | boolean | null | PackedMember | Record<string, unknown>)[];

/** The pool's members, packed: about a third of their records' JSON, so a pool of 1,100 stays far under the payload warning. */
export interface PackedMembers {
  /** The row layout (1). A build refuses a layout it does not know rather than read it as no members. */
  v: number;
  /** Workflow time (ms) the rows' times count from. */
  atMs: number;
  rows: PackedMember[];
}

/** One member as the pool keeps it. */
export interface MemberRecord {
  name: string;
  revision: number;
  createdAtMs: number;
  /** Rotation: replaced once the time passes (createdAt + maxAgeMs, shortened by jitter). */
  expiresAtMs?: number;
  role: MemberRole;
  /** The serving value last sent to the member (it acknowledges through its report). */
  sentServing: boolean;
  /** When it was sent (workflow time): a later report that disagrees means the member lost it. */
  sentServingAtMs?: number;
  /** Role `leaving`: when it started, and whether it had served; when the member last acknowledged leaving discovery. */
  leavingSinceMs?: number;
  leftDiscoveryAtMs?: number;
  hadServed?: boolean;
  deleteSent?: boolean;
  /** Its start is in flight: it is not deleted before the start settles (else the start could follow the delete). */
  starting?: boolean;
  /** When its start went through (workflow time): the audit counts a member's age from then. */
  startedAtMs?: number;
  /** Why the member is to be replaced (recomputed on every pass). */
  condemned?: string;
  /** The member was ever available (Healthy for minHealthyMs). */
  everReady: boolean;
  report?: MemberReport;
}

export interface RolloutState {
  revision: number;
  startedAtMs: number;
  lastProgressAtMs: number;
  /** Progress is measured by this count going up: updated members ready, plus old ones removed. */
  progress: number;
}

export interface PoolState {
  spec: ResolvedPoolSpec;
  revision: number;
  /** Every revision's template, newest last (a rollback goes back to one of them). */
  revisions: { revision: number; template: PoolTemplate; at: string }[];
  stableRevision?: number;
  members: MemberRecord[];
  paused: boolean;
  failures: PoolFailure[];
  degradedSinceMs?: number;
  degradedUntilMs?: number;
  backoffs: number;
  rollout?: RolloutState;
  replacements: number;
  /** Members replaced on request (`replaceMember`). Absent in states carried from runs before it: 0. */
  replacedOnRequest?: number;
  /**
   * Workflow times (ms) of the `replaceMember` requests accepted in the last hour, oldest first: the
   * sliding hour of `replacement.requestedPerHour`. Absent in states carried from runs before it.
   */
  replaceRequestsMs?: number[];
  /** The door's last report (poolDoorSignal); absent without a door. */
  door?: DoorReport;
  rollbacks: number;
  /** Members removed since the rollout started (for its progress). */
  removedOld: number;
  deleting: boolean;
  /**
   * Hosts a host workflow is draining (poolHostDrainSignal): treated as avoided hosts until told
   * otherwise. Sorted. Absent in states carried from runs before drains existed.
   */
  drainingHosts?: string[];
  reason?: string;
  createdAt: string;
  /**
   * The pool's own random stream (names, scale-down choices, rotation jitter), kept in the state
   * so continue-as-new carries it: the workflow's Math.random is shared with interceptors (the
   * tracing plugin draws span IDs from it), and what they draw must not change the pool's commands.
   */
  rng: number;
}
