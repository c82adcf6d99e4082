// The state a pool run carries into the next over continue-as-new, packed: each member one row of
// values in a fixed order (contracts/pool-state.ts PackedMembers), its creation as an offset from
// the carry's time and its other times from its creation, its booleans as bits, so no member
// repeats the field names. A full record was about 420 bytes, a row is about 120: at 1,100
// members (1,000 and 100 spares) the input stays far under the SDK's 512 KiB payload warning.
// Lossless: a field this layout does not know, or a value of a type its place does not hold, goes
// into the row's last value as it is, and a time not in the canonical form stays a string. Pure.
import type { MemberReport, MemberRole } from '../../contracts/pool.ts';
import type {
  CarriedPoolState,
  MemberRecord,
  PackedMember,
  PackedMembers,
  PoolState,
} from '../../contracts/pool-state.ts';

/** The row layout this file writes (and the one it reads). */
export const PACKED_MEMBERS_VERSION = 1;

const ROLES: readonly MemberRole[] = ['serving', 'spare', 'leaving'];

const MEMBER_FLAGS = ['sentServing', 'everReady', 'hadServed', 'deleteSent', 'starting'] as const;
/** A member's times in row order, after name, revision, role, flags, createdAtMs, report and condemned. */
const MEMBER_TIMES = ['startedAtMs', 'sentServingAtMs', 'expiresAtMs', 'leavingSinceMs', 'leftDiscoveryAtMs'] as const;
const MEMBER_KNOWN = new Set<string>([
  'name',
  'revision',
  'role',
  ...MEMBER_FLAGS,
  'createdAtMs',
  'report',
  'condemned',
  ...MEMBER_TIMES,
]);
const REPORT_FIELDS = ['state', 'health', 'healthSince', 'at', 'port'] as const;
const REPORT_OPTIONAL = ['host', 'ip', 'exitIp', 'lastError', 'hostUnreachableSince'] as const;
const REPORT_TIMES = new Set<string>(['healthSince', 'at', 'hostUnreachableSince']);
const REPORT_KNOWN = new Set<string>(['name', 'serving', 'probesFailing', ...REPORT_FIELDS, ...REPORT_OPTIONAL]);

type Value = string | number | boolean | null | PackedMember | Record<string, unknown>;

/** `v` as a row value: JSON has no undefined. */
const orNull = (v: unknown): Value => (v === undefined ? null : (v as Value));

/** A time held as RFC 3339 text: its offset from `atMs` when it is in the canonical form (toISOString), else the text. */
function packIso(s: unknown, atMs: number): Value {
  if (typeof s !== 'string') return null; // kept as an extra (packReport)
  const ms = Date.parse(s);
  return Number.isFinite(ms) && new Date(ms).toISOString() === s ? ms - atMs : s;
}
function unpackIso(v: unknown, atMs: number): unknown {
  return typeof v === 'number' ? new Date(atMs + v).toISOString() : (v ?? undefined);
}
const packMs = (v: unknown, atMs: number): Value => (typeof v === 'number' ? v - atMs : orNull(v));
const unpackMs = (v: unknown, atMs: number): unknown => (typeof v === 'number' ? atMs + v : (v ?? undefined));

/**
 * Booleans as bits: `keys[i]` true sets bit i, false bit i + 8, absent neither. A value of another
 * type goes into `odd` (kept as an extra).
 */
function packFlags(o: Record<string, unknown>, keys: readonly string[], odd: Record<string, unknown>): number {
  let flags = 0;
  keys.forEach((k, i) => {
    if (o[k] === true) flags |= 1 << i;
    else if (o[k] === false) flags |= 1 << (i + 8);
    else if (o[k] !== undefined) odd[k] = o[k];
  });
  return flags;
}
function unpackFlags(flags: unknown, keys: readonly string[], out: Record<string, unknown>): void {
  const f = typeof flags === 'number' ? flags : 0;
  keys.forEach((k, i) => {
    if ((f & (1 << i)) !== 0) out[k] = true;
    else if ((f & (1 << (i + 8))) !== 0) out[k] = false;
  });
}

/** Drops the trailing nulls of a row. */
function trimmed(row: Value[]): Value[] {
  let n = row.length;
  while (n > 0 && row[n - 1] === null) n--;
  return row.slice(0, n);
}

/** The fields of `o` not in `known` (and not undefined) with `more`, or null when there are none. */
function extraOf(o: object, known: ReadonlySet<string>, more: Record<string, unknown> = {}): Value {
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (!known.has(k) && v !== undefined) extra[k] = v;
  Object.assign(extra, more);
  return Object.keys(extra).length === 0 ? null : extra;
}

const REPORT_FLAGS = ['serving', 'probesFailing'] as const;

function packReport(r: MemberReport, name: string, atMs: number): PackedMember {
  const rec = r as unknown as Record<string, unknown>;
  const odd: Record<string, unknown> = {};
  // A report's name is its member's; another (never seen) is kept as an extra.
  if (r.name !== name) odd['name'] = r.name;
  // A time that is not text (a malformed signal: signals have no validator) would read back as an offset.
  for (const k of REPORT_TIMES) if (rec[k] !== undefined && typeof rec[k] !== 'string') odd[k] = rec[k];
  const flags = packFlags(rec, REPORT_FLAGS, odd);
  return trimmed([
    ...REPORT_FIELDS.map((k) => (REPORT_TIMES.has(k) ? packIso(r[k], atMs) : orNull(r[k]))),
    flags,
    ...REPORT_OPTIONAL.map((k) => (REPORT_TIMES.has(k) ? packIso(r[k], atMs) : orNull(r[k]))),
    extraOf(r, REPORT_KNOWN, odd),
  ]);
}

function unpackReport(row: PackedMember, name: string, atMs: number): MemberReport {
  const out: Record<string, unknown> = { name };
  REPORT_FIELDS.forEach((k, i) => {
    const v = REPORT_TIMES.has(k) ? unpackIso(row[i], atMs) : (row[i] ?? undefined);
    if (v !== undefined) out[k] = v;
  });
  unpackFlags(row[REPORT_FIELDS.length], REPORT_FLAGS, out);
  REPORT_OPTIONAL.forEach((k, i) => {
    const at = REPORT_FIELDS.length + 1 + i;
    const v = REPORT_TIMES.has(k) ? unpackIso(row[at], atMs) : (row[at] ?? undefined);
    if (v !== undefined) out[k] = v;
  });
  const extra = row[REPORT_FIELDS.length + 1 + REPORT_OPTIONAL.length];
  if (typeof extra === 'object' && extra !== null && !Array.isArray(extra)) Object.assign(out, extra);
  return out as unknown as MemberReport;
}

/** One member as a row. */
export function packMember(m: MemberRecord, atMs: number): PackedMember {
  const rec = m as unknown as Record<string, unknown>;
  const odd: Record<string, unknown> = {};
  const flags = packFlags(rec, MEMBER_FLAGS, odd);
  const role = ROLES.indexOf(m.role);
  const extra = extraOf(m, MEMBER_KNOWN, odd);
  // Its other times count from its creation: a few digits for most (started, told, reported soon after).
  const base = typeof m.createdAtMs === 'number' ? m.createdAtMs : atMs;
  return trimmed([
    m.name,
    orNull(m.revision),
    role >= 0 ? role : orNull(m.role),
    flags,
    packMs(m.createdAtMs, atMs),
    m.report === undefined ? 0 : packReport(m.report, m.name, base),
    orNull(m.condemned),
    ...MEMBER_TIMES.map((k) => packMs(rec[k], base)),
    extra,
  ]);
}

/** A row as the member it was packed from. */
export function unpackMember(row: PackedMember, atMs: number): MemberRecord {
  const name = row[0] as string;
  const flags = row[3];
  const createdAtMs = unpackMs(row[4], atMs);
  const base = typeof createdAtMs === 'number' ? createdAtMs : atMs;
  const out: Record<string, unknown> = {
    name,
    revision: row[1] ?? undefined,
    createdAtMs,
    role: typeof row[2] === 'number' ? ROLES[row[2]] : (row[2] ?? undefined),
  };
  unpackFlags(flags, MEMBER_FLAGS, out);
  if (Array.isArray(row[5])) out['report'] = unpackReport(row[5], name, base);
  if (row[6] !== undefined && row[6] !== null) out['condemned'] = row[6];
  MEMBER_TIMES.forEach((k, i) => {
    const v = unpackMs(row[7 + i], base);
    if (v !== undefined) out[k] = v;
  });
  const extra = row[7 + MEMBER_TIMES.length];
  if (typeof extra === 'object' && extra !== null && !Array.isArray(extra)) Object.assign(out, extra);
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out as unknown as MemberRecord;
}

/** The state as a run carries it at `atMs` (workflow time): its members packed. */
export function carriedState(state: PoolState, atMs: number): CarriedPoolState {
  const { members, ...rest } = state;
  const packedMembers: PackedMembers = {
    v: PACKED_MEMBERS_VERSION,
    atMs,
    rows: members.map((m) => packMember(m, atMs)),
  };
  return { ...rest, packedMembers };
}

/**
 * The state a run carried, in either shape: members packed (`packedMembers`) or, as builds before
 * the packed form carried them, as records (`members`). A layout newer than this build's is
 * refused (the run's task fails and is retried until a build that reads it takes it), never read
 * as no members: a pool that lost its members would start them all again.
 */
export function uncarried(carried: CarriedPoolState): PoolState {
  const { packedMembers, members, ...rest } = carried;
  if (packedMembers === undefined) return { ...rest, members: members ?? [] };
  if (packedMembers.v !== PACKED_MEMBERS_VERSION) {
    throw new Error(
      `the carried state's members are packed in layout ${String(packedMembers.v)}, this build reads layout ${PACKED_MEMBERS_VERSION}`,
    );
  }
  return { ...rest, members: packedMembers.rows.map((row) => unpackMember(row, packedMembers.atMs)) };
}
