// The member predicates every rule reads and the pure changes messages make to the pool's state
// (contracts/pool-state.ts: what the workflow keeps and carries through continue-as-new). No
// Temporal imports.
import { canonicalJson } from '../../contracts/canonical-json.ts';
import type { HostDrainNotice } from '../../contracts/host.ts';
import { isIdentifier } from '../../contracts/limits.ts';
import type { MemberReport, ResolvedPoolSpec } from '../../contracts/pool.ts';
import type { MemberRecord, PoolState } from '../../contracts/pool-state.ts';

export type PoolAction =
  /** `avoidHosts`: where it must not be placed (the spec's, the draining hosts, hosts not answering). */
  | { kind: 'create'; name: string; revision: number; avoidHosts: string[] }
  | { kind: 'serve'; name: string; serving: boolean }
  | { kind: 'delete'; name: string };

export interface Plan {
  actions: PoolAction[];
  /** Workflow time (ms) at which the plan may change without any message; undefined: only a message changes it. */
  wakeAtMs?: number;
}

/**
 * Running and Healthy for the pool's minHealthyMs, on a host that answers. A member whose report
 * says its host does not answer (`hostUnreachableSince`) is not ready whatever its health says
 * (its Healthy condition lags: the probes' hysteresis): it leaves discovery at once and a spare
 * takes its place, long before the host rule replaces it (hostFailureGraceMs). Nor is one whose
 * last two probes failed (`probesFailing`): discovery never hands out such a member.
 */
export function isReady(m: MemberRecord, spec: ResolvedPoolSpec, nowMs: number): boolean {
  const r = m.report;
  if (r === undefined || r.state !== 'Running' || r.health !== 'True' || r.ip === undefined) return false;
  if (hostUnreachableSince(m) !== undefined) return false;
  if (r.probesFailing === true) return false;
  return nowMs - Date.parse(r.healthSince) >= spec.rollout.minHealthyMs;
}

/** Ready and in discovery: its role serves and the member said it applied that. `ready`: isReady, or a pass's memo of it. */
export function isAvailable(
  m: MemberRecord,
  spec: ResolvedPoolSpec,
  nowMs: number,
  ready: (m: MemberRecord) => boolean = (x) => isReady(x, spec, nowMs),
): boolean {
  return m.role === 'serving' && m.report?.serving === true && ready(m);
}

export const ended = (m: MemberRecord): boolean => m.report?.state === 'Deleted' || m.report?.state === 'Failed';

/** A member name `<pool>-<5 characters>` from `random` (in [0, 1)), unused in `taken`. */
export function memberName(pool: string, taken: ReadonlySet<string>, random: () => number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  for (;;) {
    let s = '';
    for (let i = 0; i < 5; i++) s += alphabet[Math.floor(random() * alphabet.length)];
    const name = `${pool}-${s}`;
    if (!taken.has(name)) return name;
  }
}

/**
 * The members an audit checks (audit, effects.ts): at least `minAgeMs` old, counted from their
 * creation, or with `started` (the `pool-audit-started` marker) from their start's success and
 * never while their start waits for a slot or is in flight (no workflow to find yet).
 */
export function auditable(members: MemberRecord[], nowMs: number, minAgeMs: number, started: boolean): MemberRecord[] {
  if (!started) return members.filter((m) => nowMs - m.createdAtMs >= minAgeMs);
  return members.filter((m) => m.starting !== true && nowMs - (m.startedAtMs ?? m.createdAtMs) >= minAgeMs);
}

/** Records a member's report (a stale one, older than the last, is ignored); returns whether it was taken. */
export function applyReport(state: PoolState, report: MemberReport): boolean {
  const m = state.members.find((x) => x.name === report.name);
  if (m === undefined) return false;
  if (m.report !== undefined && Date.parse(report.at) < Date.parse(m.report.at)) return false;
  // When it stopped serving (any role: a spare demoted long ago has drained already).
  if (report.serving) m.leftDiscoveryAtMs = undefined;
  else if (m.report?.serving === true) m.leftDiscoveryAtMs = Date.parse(report.at);
  m.report = report;
  return true;
}

/** Applies a host workflow's drain notice; returns whether the draining hosts changed (a malformed notice changes nothing). */
export function applyDrainNotice(state: PoolState, notice: HostDrainNotice): boolean {
  if (typeof notice !== 'object' || notice === null || !isIdentifier(notice.host)) return false;
  const before = state.drainingHosts ?? [];
  const others = before.filter((h) => h !== notice.host);
  const after = notice.draining === true ? [...others, notice.host].sort() : others;
  if (after.length === before.length && after.every((h, i) => h === before[i])) return false;
  state.drainingHosts = after;
  return true;
}

/** Whether a member's report says its host has not answered (since when), absent when it answers. */
export function hostUnreachableSince(m: MemberRecord): number | undefined {
  const since = m.report?.hostUnreachableSince;
  if (since === undefined) return undefined;
  const ms = Date.parse(since);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Hosts the pool's members must leave (replaced within the rollout budget): the spec's avoided hosts and the draining ones. */
export function hostsToLeave(state: PoolState): string[] {
  return [...new Set([...state.spec.placement.avoidHosts, ...(state.drainingHosts ?? [])])];
}

/** Where new members must not go: hostsToLeave, and the hosts members report not answering. */
export function hostsToAvoid(state: PoolState): string[] {
  const down = state.members.flatMap((m) =>
    hostUnreachableSince(m) !== undefined && m.report?.host !== undefined ? [m.report.host] : [],
  );
  return [...new Set([...hostsToLeave(state), ...down])].sort();
}

/** A new pool's state for `spec` (defaults filled in): revision 1, no members yet. */
export function newPoolState(spec: ResolvedPoolSpec, at: string, seed = 1): PoolState {
  return {
    rng: seed >>> 0,
    spec,
    revision: 1,
    revisions: [{ revision: 1, template: spec.template, at }],
    members: [],
    paused: false,
    failures: [],
    backoffs: 0,
    replacements: 0,
    replacedOnRequest: 0,
    replaceRequestsMs: [],
    rollbacks: 0,
    removedOld: 0,
    deleting: false,
    drainingHosts: [],
    createdAt: at,
  };
}

/**
 * Takes `next` as the pool's spec; a template unlike the current one becomes a new revision (its
 * members replace the others by the rollout's rules). Unlike as the API's same-spec test reads it
 * (canonicalJson: key order ignored), so a template resent with its keys reordered rolls nothing.
 * The last 10 revisions are kept, and the stable one whatever its age (the progress deadline rolls
 * back to it).
 */
export function applySpec(state: PoolState, next: ResolvedPoolSpec, at: string): void {
  if (canonicalJson(next.template) !== canonicalJson(state.spec.template)) {
    const revision = Math.max(...state.revisions.map((r) => r.revision)) + 1;
    const all = [...state.revisions, { revision, template: next.template, at }];
    state.revisions = all.filter((r, i) => i >= all.length - 10 || r.revision === state.stableRevision);
    state.revision = revision;
    state.removedOld = 0;
    state.reason = undefined;
  }
  state.spec = next;
}

/** The next number in [0, 1) of the pool's random stream (mulberry32 over `state.rng`). */
export function nextRandom(state: Pick<PoolState, 'rng'>): number {
  state.rng = (state.rng + 0x6d2b79f5) >>> 0;
  let t = state.rng;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** A 32-bit seed from a string (FNV-1a): the pool's first run ID seeds its stream. */
export function seedOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/**
 * Whether `m` must be told `serving`: it was told otherwise, or (told so already) it reported the
 * other value after it was told (a member that lost its role: it is told again).
 */
export function mustTell(m: MemberRecord, serving: boolean): boolean {
  if (m.report === undefined) return false;
  if (m.sentServing !== serving) return true;
  const told = m.sentServingAtMs;
  return told !== undefined && m.report.serving !== serving && Date.parse(m.report.at) > told;
}

/** Records that `m` is told `serving` now. */
export function told(m: MemberRecord, serving: boolean, nowMs: number): void {
  m.sentServing = serving;
  m.sentServingAtMs = nowMs;
}
