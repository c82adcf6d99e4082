// The pool workflow's contract with its clients (API, CLI, tests) and with its members: the
// workflow ID, the spec and its defaults, the status the `status` query returns, the summary a
// member sends the pool on every change, and the names of the pool's messages (their define*
// objects are in messages.ts). Plain JSON, constants and pure checks: workflows, activities and
// clients all import this file.
import { isIdentifier, IDENTIFIER_RULE, MAX_IDENTIFIER_LENGTH, inRange, rangeMessage, VM_LIMITS } from './limits.ts';
import type { ConditionStatus, ProxyState, SquidOverrides, VmSize } from './proxy.ts';

/** Workflow type of a pool (its exported function name). */
export const POOL_WORKFLOW_TYPE = 'poolWorkflow';
export const POOL_STATUS_QUERY = 'status';
/** Updates (each with a validator): the request is refused before it enters the history. */
export const POOL_SCALE_UPDATE = 'scale';
export const POOL_SPEC_UPDATE = 'updateSpec';
export const POOL_PAUSE_UPDATE = 'pause';
export const POOL_RESUME_UPDATE = 'resume';
export const POOL_ROLLBACK_UPDATE = 'rollback';
export const POOL_DELETE_UPDATE = 'delete';
/** Replaces one member on request (a banned exit): refused past `replacement.requestedPerHour`. */
export const POOL_REPLACE_MEMBER_UPDATE = 'replaceMember';
/** Member → pool: its summary changed. */
export const POOL_MEMBER_SIGNAL = 'member';
/** The pool's door → pool: its address and its exits as HAProxy sees them, on every change. */
export const POOL_DOOR_SIGNAL = 'door';
/** Pool → member: whether it is in discovery (a spare, or a member leaving, is not). */
export const MEMBER_SERVING_SIGNAL = 'serving';

/** The workflow ID of a pool. */
export function poolWorkflowId(entry: string, pool: string): string {
  return `pool/${entry}/${pool}`;
}

/** Longest pool name: a member's name is `<pool>-<5 characters>` and must stay an identifier. */
export const MAX_POOL_NAME_LENGTH = MAX_IDENTIFIER_LENGTH - 6;
/** Largest pool (members in discovery). */
export const POOL_SIZE = { min: 0, max: 1000 } as const;
export const POOL_SPARES = { min: 0, max: 100 } as const;

export type ScaleDownPolicy = 'random' | 'oldest' | 'newest';
export const SCALE_DOWN_POLICIES: readonly ScaleDownPolicy[] = ['random', 'oldest', 'newest'];

/** What one pool's members are made from: a new template rolls through the members. */
export interface PoolTemplate {
  imageKey: string;
  vm?: VmSize;
  squid?: SquidOverrides;
}

export interface PoolPlacement {
  /** At most this many members on one host (default: no limit beyond spreading). */
  maxPerHost?: number;
  /** Hosts members are never placed on. */
  avoidHosts?: string[];
}

export interface PoolRollout {
  /** Members above size + spares while replacing (default 1). */
  maxSurge?: number;
  /** Members in discovery may drop this far below size while replacing (default 0). */
  maxUnavailable?: number;
  /** A member counts as available once Healthy this long (default 10 s). */
  minHealthyMs?: number;
  /** A rollout without progress this long rolls back to the last fully healthy template (default 10 min). */
  progressDeadlineMs?: number;
}

export interface PoolReplacement {
  /** An Unhealthy member is replaced after this long (default 60 s); a Failed one at once. */
  unhealthyGraceMs?: number;
  /**
   * A member that has never been Healthy (still booting: its Squid may not answer yet) is not
   * replaced as Unhealthy before it is this old (default 5 min; its own bootMs fails it sooner
   * when it gets no address).
   */
  startupGraceMs?: number;
  /**
   * A member whose report says its host has not answered for this long is replaced on another
   * host (default 60 s). Meanwhile it is not replaced as Unhealthy: a dead host is not a bad member.
   */
  hostFailureGraceMs?: number;
  /** The loop guard: this many members that never became available within `windowMs`... (default 3) */
  maxFailures?: number;
  /** ...stop creation for `backoffMs` (default 10 min, doubling to 1 h) and report Degraded. */
  windowMs?: number;
  backoffMs?: number;
  /**
   * Members replaced on request (the `replaceMember` update: an operator or a client reporting a
   * banned exit) in any sliding hour; requests past it are refused (default 6; 0 refuses every
   * request), so a broken scraper cannot churn the pool.
   */
  requestedPerHour?: number;
}

export interface PoolRotation {
  /** Members older than this are replaced one at a time, oldest first (default: never). */
  maxAgeMs?: number;
  /** Each member's age limit is shortened by up to this fraction at random (default 0.1). */
  jitter?: number;
}

/** A pool's spec: what an operator asks for. */
export interface PoolSpec {
  entry: string;
  /** Pool name: an identifier of at most MAX_POOL_NAME_LENGTH characters, unique within the entry. */
  name: string;
  /** Members in discovery. */
  size: number;
  /** Extra members kept Healthy out of discovery, promoted first on a replacement or scale-up. */
  spares?: number;
  template: PoolTemplate;
  placement?: PoolPlacement;
  rollout?: PoolRollout;
  replacement?: PoolReplacement;
  rotation?: PoolRotation;
  scaleDownPolicy?: ScaleDownPolicy;
  /** A member leaving discovery waits this long before it is deleted, so open connections finish (default 10 s). */
  drainDelayMs?: number;
}

/** The spec with every default filled in (what the workflow works with and reports). */
export interface ResolvedPoolSpec {
  entry: string;
  name: string;
  size: number;
  spares: number;
  template: PoolTemplate;
  placement: { maxPerHost?: number; avoidHosts: string[] };
  rollout: Required<PoolRollout>;
  replacement: Required<PoolReplacement>;
  rotation: { maxAgeMs?: number; jitter: number };
  scaleDownPolicy: ScaleDownPolicy;
  drainDelayMs: number;
}

export const POOL_DEFAULTS = {
  spares: 0,
  maxSurge: 1,
  maxUnavailable: 0,
  minHealthyMs: 10_000,
  progressDeadlineMs: 600_000,
  unhealthyGraceMs: 60_000,
  startupGraceMs: 300_000,
  hostFailureGraceMs: 60_000,
  maxFailures: 3,
  windowMs: 1_800_000,
  backoffMs: 600_000,
  requestedPerHour: 6,
  maxBackoffMs: 3_600_000,
  jitter: 0.1,
  scaleDownPolicy: 'random' as ScaleDownPolicy,
  drainDelayMs: 10_000,
} as const;

/** Fills in the defaults of `spec` (assumed valid: see poolSpecProblems). */
export function resolvePoolSpec(spec: PoolSpec): ResolvedPoolSpec {
  const d = POOL_DEFAULTS;
  const out: ResolvedPoolSpec = {
    entry: spec.entry,
    name: spec.name,
    size: spec.size,
    spares: spec.spares ?? d.spares,
    template: spec.template,
    placement: { avoidHosts: spec.placement?.avoidHosts ?? [] },
    rollout: {
      maxSurge: spec.rollout?.maxSurge ?? d.maxSurge,
      maxUnavailable: spec.rollout?.maxUnavailable ?? d.maxUnavailable,
      minHealthyMs: spec.rollout?.minHealthyMs ?? d.minHealthyMs,
      progressDeadlineMs: spec.rollout?.progressDeadlineMs ?? d.progressDeadlineMs,
    },
    replacement: {
      unhealthyGraceMs: spec.replacement?.unhealthyGraceMs ?? d.unhealthyGraceMs,
      startupGraceMs: spec.replacement?.startupGraceMs ?? d.startupGraceMs,
      hostFailureGraceMs: spec.replacement?.hostFailureGraceMs ?? d.hostFailureGraceMs,
      maxFailures: spec.replacement?.maxFailures ?? d.maxFailures,
      windowMs: spec.replacement?.windowMs ?? d.windowMs,
      backoffMs: spec.replacement?.backoffMs ?? d.backoffMs,
      requestedPerHour: spec.replacement?.requestedPerHour ?? d.requestedPerHour,
    },
    rotation: { jitter: spec.rotation?.jitter ?? d.jitter },
    scaleDownPolicy: spec.scaleDownPolicy ?? d.scaleDownPolicy,
    drainDelayMs: spec.drainDelayMs ?? d.drainDelayMs,
  };
  if (spec.placement?.maxPerHost !== undefined) out.placement.maxPerHost = spec.placement.maxPerHost;
  if (spec.rotation?.maxAgeMs !== undefined) out.rotation.maxAgeMs = spec.rotation.maxAgeMs;
  return out;
}

const DURATION = { min: 0, max: 30 * 86_400_000 } as const;
/** Limits of `replacement.requestedPerHour` (0: replacement on request refused). */
export const REQUESTED_PER_HOUR = { min: 0, max: 100 } as const;

/**
 * What is wrong with `spec`, each naming its field and the fix (empty: nothing). The API's schema,
 * the pool workflow's validators and egressctl all apply it.
 */
export function poolSpecProblems(spec: PoolSpec): string[] {
  const out: string[] = [];
  if (!isIdentifier(spec.entry)) out.push(`entry ${IDENTIFIER_RULE}, got ${JSON.stringify(spec.entry)}`);
  if (!isIdentifier(spec.name) || spec.name.length > MAX_POOL_NAME_LENGTH) {
    out.push(
      `name ${IDENTIFIER_RULE} and at most ${MAX_POOL_NAME_LENGTH} characters (members are named <pool>-<suffix>), got ${JSON.stringify(spec.name)}`,
    );
  }
  out.push(...scaleProblems(spec.size, spec.spares));
  if (typeof spec.template !== 'object' || spec.template === null) out.push('template must be an object with imageKey');
  else out.push(...templateProblems(spec.template));
  const whole = (field: string, v: unknown, range: { min: number; max: number }): void => {
    if (v !== undefined && !inRange(v, range)) out.push(rangeMessage(field, range, v));
  };
  whole('placement.maxPerHost', spec.placement?.maxPerHost, { min: 1, max: POOL_SIZE.max + POOL_SPARES.max });
  for (const h of spec.placement?.avoidHosts ?? []) {
    if (!isIdentifier(h)) out.push(`placement.avoidHosts: each host ${IDENTIFIER_RULE}, got ${JSON.stringify(h)}`);
  }
  whole('rollout.maxSurge', spec.rollout?.maxSurge, { min: 0, max: POOL_SIZE.max });
  whole('rollout.maxUnavailable', spec.rollout?.maxUnavailable, { min: 0, max: POOL_SIZE.max });
  if ((spec.rollout?.maxSurge ?? POOL_DEFAULTS.maxSurge) === 0 && (spec.rollout?.maxUnavailable ?? 0) === 0) {
    out.push(
      'rollout.maxSurge and rollout.maxUnavailable are both 0: a rollout could never replace a member; set one of them to 1 or more',
    );
  }
  whole('rollout.minHealthyMs', spec.rollout?.minHealthyMs, DURATION);
  whole('rollout.progressDeadlineMs', spec.rollout?.progressDeadlineMs, { min: 10_000, max: DURATION.max });
  whole('replacement.unhealthyGraceMs', spec.replacement?.unhealthyGraceMs, DURATION);
  whole('replacement.startupGraceMs', spec.replacement?.startupGraceMs, DURATION);
  whole('replacement.hostFailureGraceMs', spec.replacement?.hostFailureGraceMs, DURATION);
  whole('replacement.maxFailures', spec.replacement?.maxFailures, { min: 1, max: 100 });
  whole('replacement.windowMs', spec.replacement?.windowMs, { min: 1000, max: DURATION.max });
  whole('replacement.backoffMs', spec.replacement?.backoffMs, { min: 1000, max: DURATION.max });
  whole('replacement.requestedPerHour', spec.replacement?.requestedPerHour, REQUESTED_PER_HOUR);
  whole('rotation.maxAgeMs', spec.rotation?.maxAgeMs, { min: 60_000, max: 365 * 86_400_000 });
  const j = spec.rotation?.jitter;
  if (j !== undefined && !(typeof j === 'number' && j >= 0 && j <= 0.5)) {
    out.push(`rotation.jitter must be a number from 0 to 0.5, got ${String(j)}`);
  }
  if (spec.scaleDownPolicy !== undefined && !SCALE_DOWN_POLICIES.includes(spec.scaleDownPolicy)) {
    out.push(
      `scaleDownPolicy must be one of ${SCALE_DOWN_POLICIES.join(', ')}, got ${JSON.stringify(spec.scaleDownPolicy)}`,
    );
  }
  whole('drainDelayMs', spec.drainDelayMs, { min: 0, max: 3_600_000 });
  return out;
}

/** What is wrong with a size and spare count. */
export function scaleProblems(size: unknown, spares?: unknown): string[] {
  const out: string[] = [];
  if (!inRange(size, POOL_SIZE)) out.push(rangeMessage('size', POOL_SIZE, size));
  if (spares !== undefined && !inRange(spares, POOL_SPARES)) out.push(rangeMessage('spares', POOL_SPARES, spares));
  return out;
}

/** What is wrong with a template (the entry's limits are the worker's to check). */
export function templateProblems(t: PoolTemplate): string[] {
  const out: string[] = [];
  if (!isIdentifier(t.imageKey)) out.push(`template.imageKey ${IDENTIFIER_RULE}, got ${JSON.stringify(t.imageKey)}`);
  for (const [field, range] of Object.entries(VM_LIMITS)) {
    const v = (t.vm as Record<string, unknown> | undefined)?.[field];
    if (v !== undefined && !inRange(v, range)) out.push(rangeMessage(`template.vm.${field}`, range, v));
  }
  return out;
}

/** The `scale` update's argument. */
export interface ScaleRequest {
  size: number;
  spares?: number;
}

/** The `updateSpec` update's argument: the fields to change (a new `template` starts a rollout). */
export type PoolSpecPatch = Partial<Omit<PoolSpec, 'entry' | 'name'>>;

/** The `rollback` update's argument: a revision, or (none) the last stable one. */
export interface RollbackRequest {
  revision?: number;
}

/** Longest reason of a `replaceMember` request (it is kept in the member's `condemned`). */
export const MAX_REPLACE_REASON_LENGTH = 200;

/** The `replaceMember` update's argument: the member to replace and why (1-200 characters). */
export interface ReplaceMemberRequest {
  name: string;
  reason: string;
}

/** The pool's overall state. */
export type PoolPhase =
  /** Every member is on the current template and `size` of them are in discovery. */
  | 'Ready'
  /** Creating, replacing or removing members toward the spec. */
  | 'Progressing'
  /** A rollout is paused (replacement of failed members goes on). */
  | 'Paused'
  /** The loop guard stopped creation: members kept failing (see `degraded`). */
  | 'Degraded'
  | 'Deleting'
  | 'Deleted';

/** A member's role: in discovery when available, a spare, or leaving (draining, then deleted). */
export type MemberRole = 'serving' | 'spare' | 'leaving';

/** What a member proxy tells its pool (POOL_MEMBER_SIGNAL) on every change of these values. */
export interface MemberReport {
  name: string;
  state: ProxyState;
  health: ConditionStatus;
  /** RFC 3339 time the Healthy condition last changed. */
  healthSince: string;
  host?: string;
  ip?: string;
  /** The address destinations see through it (its status's `exitIp`; reported by runs with the `member-exit-ip` marker). */
  exitIp?: string;
  port: number;
  /** The role the member last applied (what its own status says; discovery reads it). */
  serving: boolean;
  /** `code: message` of its last error. */
  lastError?: string;
  /**
   * RFC 3339 time since when the member's host has not answered (its VM could not be read for
   * that reason); absent while it answers. The pool replaces it past `hostFailureGraceMs`.
   */
  hostUnreachableSince?: string;
  /**
   * Its last two probes or more failed (contracts/health.ts `probesFailing`): out of discovery at
   * once, whatever its Healthy says. Absent otherwise.
   */
  probesFailing?: true;
  /** RFC 3339 workflow time of the report. */
  at: string;
}

export interface PoolMemberStatus {
  name: string;
  /** The template revision the member was made from. */
  revision: number;
  imageKey: string;
  role: MemberRole;
  /** Why it is being replaced or removed, if it is. */
  condemned?: string;
  state: ProxyState | 'Starting';
  healthy: ConditionStatus;
  /** Healthy for the pool's minHealthyMs and in discovery. */
  available: boolean;
  host?: string;
  address?: string;
  /** The address destinations see through it, from its report (docs/health.md#exit-ip). */
  exitIp?: string;
  ageMs: number;
  createdAt: string;
  lastError?: string;
  /** From its report: since when its host has not answered (replaced past `hostFailureGraceMs`). */
  hostUnreachableSince?: string;
}

export interface PoolFailure {
  member: string;
  at: string;
  reason: string;
  /** A host failure: its members count once for the loop guard, however many there were. */
  host?: string;
}

/** What the `status` query returns. */
/**
 * What a pool's updates answer: its status without the members (a member adds about 250 bytes, and
 * every update's answer is kept in the pool's history); the members are read by query.
 */
export type PoolBrief = Omit<PoolStatus, 'members'> & { memberCount: number };

export interface PoolStatus {
  entry: string;
  name: string;
  phase: PoolPhase;
  reason?: string;
  spec: ResolvedPoolSpec;
  /** The current template's revision (1 for the first); members of other revisions are replaced. */
  revision: number;
  /** The last revision that was fully rolled out and healthy (rollback's target). */
  stableRevision?: number;
  /** Revisions a rollback may go to (newest first). */
  history: { revision: number; template: PoolTemplate; at: string }[];
  desired: number;
  spares: number;
  /** Members Healthy (any role). */
  healthy: number;
  /** Members available in discovery. */
  available: number;
  /** Members on the current revision (not leaving). */
  updated: number;
  replacements: number;
  /** Members replaced on request (`replaceMember`), counted apart from `replacements`. */
  replacedOnRequest: number;
  rollbacks: number;
  paused: boolean;
  /** Hosts being drained (their members replaced elsewhere; new members avoid them), sorted. */
  drainingHosts: string[];
  degraded?: { since: string; until: string; failures: PoolFailure[] };
  rollout?: { revision: number; startedAt: string; lastProgressAt: string; step: string };
  /** The pool's front door, as its service last reported it (docs/door.md); absent without a door. */
  door?: DoorReport;
  members: PoolMemberStatus[];
  createdAt: string;
  updatedAt: string;
}

/**
 * What a pool's door service tells the pool (POOL_DOOR_SIGNAL) when its door starts and whenever
 * an exit joins, leaves or changes state: nothing at rest. An exit `up: false` is one the door has
 * taken out of rotation itself (its connects failed or its checks did).
 */
export interface DoorReport {
  /** Where clients connect: `host:port`. */
  listen: string;
  exits: { name: string; role: 'serving' | 'draining'; up: boolean }[];
  /** RFC 3339 time of the report (the door service's clock). */
  at: string;
}

/** Most exits one door report carries (a pool's members and spares at most, with room for draining ones). */
export const DOOR_REPORT_MAX_EXITS = 2 * (POOL_SIZE.max + POOL_SPARES.max);

/**
 * A door report as the pool keeps it, or undefined when `x` is not one (a signal has no validator:
 * a malformed report is dropped, never let into the state). Exits past DOOR_REPORT_MAX_EXITS are cut.
 */
export function doorReportOf(x: unknown): DoorReport | undefined {
  const r = x as Partial<DoorReport> | null;
  if (typeof r?.listen !== 'string' || typeof r.at !== 'string' || !Array.isArray(r.exits)) return undefined;
  if (r.listen.length > 300 || r.at.length > 40) return undefined;
  const exits = r.exits
    .filter((e) => typeof e?.name === 'string' && isIdentifier(e.name) && typeof e.up === 'boolean')
    .slice(0, DOOR_REPORT_MAX_EXITS)
    .map((e) => ({
      name: e.name,
      role: e.role === 'draining' ? ('draining' as const) : ('serving' as const),
      up: e.up,
    }));
  return { listen: r.listen, exits, at: r.at };
}

/** The members discovery hands out for a pool: available, in discovery, with an address. */
export function poolAddresses(st: PoolStatus): { name: string; address: string; host?: string }[] {
  return st.members
    .filter((m) => m.available && m.address !== undefined)
    .map((m) => ({ name: m.name, address: m.address!, ...(m.host === undefined ? {} : { host: m.host }) }));
}
