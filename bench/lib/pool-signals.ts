/**
 * What a pool's history says about its members' reports (bench/pool.ts): the signals it
 * received over every run of the pool workflow (continue-as-new followed), split by event time
 * into the bench's phases, and for each member report which of its fields changed since that
 * member's previous one (a report's reason to be sent).
 */
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type { MemberReport } from '../../contracts/pool.ts';
import { POOL_MEMBER_SIGNAL } from '../../contracts/pool.ts';

export interface SignalTally {
  /** Signals of any name the pool received in the range. */
  signals: number;
  /** Member reports among them. */
  reports: number;
  /** Pool history events in the range (every run). */
  events: number;
  /** Members that reported in the range. */
  members: number;
  /** For each report field, how many reports changed it (a report can change several; `first` is a member's first report). */
  changed: Record<string, number>;
  /** Reports by the step of (state/health/serving) they carried, `from→to`. */
  steps: Record<string, number>;
}

const FIELDS: (keyof MemberReport)[] = [
  'state',
  'health',
  'healthSince',
  'host',
  'ip',
  'port',
  'exitIp',
  'serving',
  'lastError',
  'hostUnreachableSince',
];

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

function decode(p: { data?: Uint8Array | null } | undefined): unknown {
  if (p?.data == null) return undefined;
  return JSON.parse(Buffer.from(p.data).toString('utf8'));
}

/** An event's time in ms since the epoch (0 when it has none). */
export function eventMs(e: HistoryEvent): number {
  const t = e.eventTime;
  return t == null ? 0 : Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

/** Every event of every run of `workflowId` from `firstRunId`, following continue-as-new (at most 200 runs). */
export async function chainEvents(client: Client, workflowId: string, firstRunId: string): Promise<HistoryEvent[]> {
  const out: HistoryEvent[] = [];
  let runId: string | undefined = firstRunId;
  for (let i = 0; runId !== undefined && i < 200; i++) {
    const h: temporal.api.history.v1.IHistory = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events: HistoryEvent[] = h.events ?? [];
    out.push(...events);
    runId = events[events.length - 1]?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return out;
}

const step = (r: MemberReport): string => `${r.state}/${r.health}/${r.serving ? 'serving' : '-'}`;

/**
 * Tallies `events` (a pool's, chainEvents) in the time ranges [boundsMs[i], boundsMs[i+1]) (the
 * last range open-ended; events before boundsMs[0] only seed each member's previous report).
 */
export function tallyPoolSignals(events: readonly HistoryEvent[], boundsMs: readonly number[]): SignalTally[] {
  const tallies: SignalTally[] = boundsMs.map(() => ({
    signals: 0,
    reports: 0,
    events: 0,
    members: 0,
    changed: {},
    steps: {},
  }));
  const seen = tallies.map(() => new Set<string>());
  const last = new Map<string, MemberReport>();
  for (const e of events) {
    const ms = eventMs(e);
    let k = -1;
    for (let i = 0; i < boundsMs.length; i++) if (ms >= boundsMs[i]!) k = i;
    const t = k >= 0 ? tallies[k] : undefined;
    if (t !== undefined) t.events++;
    const sig = e.workflowExecutionSignaledEventAttributes;
    if (sig == null) continue;
    if (t !== undefined) t.signals++;
    if (sig.signalName !== POOL_MEMBER_SIGNAL) continue;
    const r = decode(sig.input?.payloads?.[0]) as MemberReport | undefined;
    if (r === undefined) continue;
    const prev = last.get(r.name);
    last.set(r.name, r);
    if (t === undefined) continue;
    t.reports++;
    seen[k]!.add(r.name);
    const bump = (to: Record<string, number>, f: string): void => {
      to[f] = (to[f] ?? 0) + 1;
    };
    bump(t.steps, `${prev === undefined ? '' : step(prev)}→${step(r)}`);
    if (prev === undefined) {
      bump(t.changed, 'first');
      continue;
    }
    for (const f of FIELDS) if (JSON.stringify(prev[f]) !== JSON.stringify(r[f])) bump(t.changed, f);
  }
  tallies.forEach((t, i) => (t.members = seen[i]!.size));
  return tallies;
}

/** How the pool's role signals went (`tellTimes`), in ms. */
export interface TellTimes {
  /** `serving` signals the pool initiated. */
  tells: number;
  /** Initiated → the server's confirmation in the pool's history, per signal. */
  deliveryMs: number[];
  /**
   * Per member told to serve: its first report of Healthy received → the pool's first
   * `serving: true` to it initiated. Includes `minHealthyMs`, which the pool waits on purpose.
   */
  promotionMs: number[];
}

/**
 * The pool's role signals in `events` (chainEvents: runs in order, each from event 1): when each
 * was initiated and confirmed, and how long after a member's first Healthy report it was told to
 * serve.
 */
export function tellTimes(events: readonly HistoryEvent[]): TellTimes {
  const out: TellTimes = { tells: 0, deliveryMs: [], promotionMs: [] };
  let run = 0;
  const initiated = new Map<string, number>(); // `${run}:${eventId}` → ms
  const healthyAt = new Map<string, number>(); // member name → its first Healthy report
  const promoted = new Set<string>();
  for (const e of events) {
    if (String(e.eventId) === '1') run++;
    const ms = eventMs(e);
    const sig = e.workflowExecutionSignaledEventAttributes;
    if (sig != null && sig.signalName === POOL_MEMBER_SIGNAL) {
      const r = decode(sig.input?.payloads?.[0]) as MemberReport | undefined;
      if (r !== undefined && r.health === 'True' && !healthyAt.has(r.name)) healthyAt.set(r.name, ms);
      continue;
    }
    const init = e.signalExternalWorkflowExecutionInitiatedEventAttributes;
    if (init != null) {
      out.tells++;
      initiated.set(`${run}:${String(e.eventId)}`, ms);
      const told = decode(init.input?.payloads?.[0]) as { serving?: boolean } | undefined;
      const name = init.workflowExecution?.workflowId?.split('/').pop();
      if (told?.serving === true && name !== undefined && !promoted.has(name)) {
        promoted.add(name);
        const h = healthyAt.get(name);
        if (h !== undefined) out.promotionMs.push(ms - h);
      }
      continue;
    }
    const done = e.externalWorkflowExecutionSignaledEventAttributes;
    if (done != null) {
      const t = initiated.get(`${run}:${String(done.initiatedEventId)}`);
      if (t !== undefined) out.deliveryMs.push(ms - t);
    }
  }
  return out;
}
