/**
 * The parts of bench/failover.ts that read what a round left: the prober's samples (when the
 * first CONNECT through a lost member failed, when discovery stopped listing it, when discovery
 * listed N again that all answered), a member's boot from its workflow history, and the table.
 */
import type { Client } from '@temporalio/client';
import type { MonitorResult } from '../../contracts/health.ts';
import { proxyWorkflowId } from '../../contracts/proxy.ts';
import { fmtRange, spread } from './stats.ts';

/** One line of bench/lib/failover-prober.ts (times in ms since the epoch). */
export interface Sample {
  at: number;
  listedAt?: number;
  listed?: { name: string; address: string }[];
  failed?: { name: string; error: string }[];
  doneAt?: number;
  error?: string;
}

/** One round: the times are ms from the black hole (t0). */
export interface Round {
  phase: 'a' | 'b';
  round: number;
  spares: number;
  host: string;
  lost: string[];
  load: number;
  graceMs: number;
  /** The start of the prober's first sample whose CONNECT through a lost member failed. */
  firstFailMs?: number;
  firstFailError?: string;
  /** The pool's `hostUnreachableSince` for a lost member (the product's first silent read). */
  unreachableMs?: number;
  /** The first sample whose discovery list named no lost member. */
  outMs?: number;
  /** The first sample (from outMs on) that listed N members, none lost, every CONNECT answered. */
  restoredMs?: number;
  /** (b) The spare that took the lost member's place. */
  promoted?: string;
  /** The member created for the lost one (a) or as the new spare (b): its workflow start and boot. */
  replacement?: string;
  replacementStartMs?: number;
  /** The replacement's workflow start to its Healthy (the monitor's fold), from its history. */
  bootMs?: number;
  /** From the route's removal until the lost members and their domains were gone. */
  cleanupMs?: number;
  /** Members of the other host that the pool showed with hostUnreachableSince during the round (none expected). */
  spurious?: string[];
  samples: number;
  /** Samples after t0 in which a CONNECT through a listed member failed. */
  failedSamples: number;
}

/** Reads a round's figures from the prober's samples (those from `t0` on). */
export function readSamples(samples: readonly Sample[], t0: number, lost: readonly string[], size: number) {
  const after = samples.filter((s) => s.at >= t0 && s.listed !== undefined);
  const rel = (t: number | undefined): number | undefined => (t === undefined ? undefined : t - t0);
  const firstFail = after.find((s) => s.failed!.some((f) => lost.includes(f.name)));
  const out = after.find((s) => !s.listed!.some((a) => lost.includes(a.name)));
  const restored =
    out === undefined
      ? undefined
      : after.find(
          (s) =>
            s.at >= out.at &&
            s.listed!.length >= size &&
            s.failed!.length === 0 &&
            !s.listed!.some((a) => lost.includes(a.name)),
        );
  return {
    firstFailMs: rel(firstFail?.at),
    firstFailError: firstFail?.failed!.find((f) => lost.includes(f.name))?.error,
    outMs: rel(out?.listedAt),
    restoredMs: rel(restored?.listedAt),
    restored,
    samples: after.length,
    failedSamples: after.filter((s) => s.failed!.length > 0).length,
  };
}

type HistoryEvent = NonNullable<
  Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']
>[number];
const msOf = (t: HistoryEvent['eventTime']): number => {
  if (t == null) return NaN;
  const sec = t.seconds as unknown as { toNumber?: () => number } | number | string | null | undefined;
  const n = typeof sec === 'object' && sec !== null && sec.toNumber ? sec.toNumber() : Number(sec ?? 0);
  return n * 1000 + (t.nanos ?? 0) / 1e6;
};

/**
 * A member's workflow start and its Healthy time (the `since` of the first monitor return that
 * says Healthy True), ms since the epoch, from its history.
 */
export async function bootOf(
  client: Client,
  entry: string,
  name: string,
): Promise<{ startAt: number; healthyAt?: number }> {
  const h = await client.workflow.getHandle(proxyWorkflowId(entry, name)).fetchHistory();
  const events = h.events ?? [];
  const startAt = msOf(events[0]?.eventTime);
  const monitors = new Set<string>();
  for (const e of events) {
    const sch = e.activityTaskScheduledEventAttributes;
    if (sch?.activityType?.name === 'monitorProxy') monitors.add(String(e.eventId));
    const done = e.activityTaskCompletedEventAttributes;
    if (!done || !monitors.has(String(done.scheduledEventId))) continue;
    const data = done.result?.payloads?.[0]?.data;
    if (data == null) continue;
    const r = JSON.parse(Buffer.from(data).toString('utf8')) as MonitorResult;
    const healthy = r.state.status?.conditions.Healthy;
    if (healthy?.status === 'True') return { startAt, healthyAt: Date.parse(healthy.since) };
  }
  return { startAt };
}

const s1 = (ms: number | undefined): string => (ms === undefined ? '—' : (ms / 1000).toFixed(1));

/** The goals of issue 41 for one round: [out within 10 s of the first failed CONNECT, N restored within its bound]. */
export function goals(r: Round): { outOk: boolean; restoreBoundMs?: number; restoreOk: boolean } {
  const outOk = r.outMs !== undefined && r.firstFailMs !== undefined && r.outMs - r.firstFailMs <= 10_000;
  const restoreBoundMs = r.spares > 0 ? 10_000 : r.bootMs === undefined ? undefined : r.graceMs + r.bootMs + 15_000;
  const restoreOk = r.restoredMs !== undefined && restoreBoundMs !== undefined && r.restoredMs <= restoreBoundMs;
  return { outOk, ...(restoreBoundMs === undefined ? {} : { restoreBoundMs }), restoreOk };
}

/** One line per round: its timeline in seconds from the black hole. */
export function roundLine(r: Round): string {
  const g = goals(r);
  return (
    `${r.phase}${r.round} ${r.host} lost ${r.lost.join(',')}: first failed CONNECT ${s1(r.firstFailMs)}, ` +
    `hostUnreachableSince ${s1(r.unreachableMs)}, out of discovery ${s1(r.outMs)} ` +
    `(${s1(r.outMs === undefined || r.firstFailMs === undefined ? undefined : r.outMs - r.firstFailMs)} after the failed CONNECT: ${g.outOk ? 'met' : 'NOT met'}), ` +
    (r.promoted ? `spare ${r.promoted} promoted, ` : '') +
    `replacement ${r.replacement ?? '—'} started ${s1(r.replacementStartMs)}, boot ${s1(r.bootMs)}, ` +
    `N restored ${s1(r.restoredMs)} (bound ${s1(g.restoreBoundMs)}: ${g.restoreOk ? 'met' : 'NOT met'}); ` +
    `cleanup ${s1(r.cleanupMs)} after the route went; ${r.failedSamples}/${r.samples} samples with a failed CONNECT; load ${r.load.toFixed(2)}` +
    (r.spurious?.length ? `; reported silent on the answering host: ${r.spurious.join(', ')}` : '') +
    (r.firstFailError ? `; first failure: ${r.firstFailError}` : '')
  );
}

/** The table: medians (min-max) per phase, in seconds from the black hole. */
export function table(rounds: readonly Round[]): string[] {
  const rows: [string, (r: Round) => number | undefined][] = [
    ['first failed CONNECT (prober)', (r) => r.firstFailMs],
    ['hostUnreachableSince (pool)', (r) => r.unreachableMs],
    ['out of discovery', (r) => r.outMs],
    ['out of discovery − first failed CONNECT (goal ≤ 10)', (r) => (r.outMs ?? NaN) - (r.firstFailMs ?? NaN)],
    ['out of discovery − hostUnreachableSince', (r) => (r.outMs ?? NaN) - (r.unreachableMs ?? NaN)],
    ['replacement started', (r) => r.replacementStartMs],
    ['replacement started − hostUnreachableSince', (r) => (r.replacementStartMs ?? NaN) - (r.unreachableMs ?? NaN)],
    ['replacement boot (history)', (r) => r.bootMs],
    ['N restored (discovery lists N, all answer)', (r) => r.restoredMs],
    ['N restored − bound (goal ≤ 0)', (r) => (r.restoredMs ?? NaN) - (goals(r).restoreBoundMs ?? NaN)],
    ['N restored − hostUnreachableSince', (r) => (r.restoredMs ?? NaN) - (r.unreachableMs ?? NaN)],
    ['stranded cleanup after the route returned', (r) => r.cleanupMs],
  ];
  const phases = (['a', 'b'] as const).filter((p) => rounds.some((r) => r.phase === p));
  const out = [
    `| seconds from the black hole | ${phases.map((p) => `(${p}) spares ${p === 'a' ? 0 : 1}`).join(' | ')} |`,
  ];
  out.push(`|---|${phases.map(() => '---').join('|')}|`);
  const cell = (xs: (number | undefined)[]): string => {
    const v = xs.filter((x): x is number => x !== undefined && !Number.isNaN(x));
    return v.length === 0 ? '—' : `${fmtRange(spread(v.map((x) => x / 1000)), 1)} n=${v.length}`;
  };
  for (const [label, f] of rows) {
    out.push(`| ${label} | ${phases.map((p) => cell(rounds.filter((r) => r.phase === p).map(f))).join(' | ')} |`);
  }
  for (const p of phases) {
    const rs = rounds.filter((r) => r.phase === p);
    out.push(
      `goals (${p}): out of discovery ≤ 10 s after the first failed CONNECT in ${rs.filter((r) => goals(r).outOk).length}/${rs.length} rounds; N restored within ${p === 'a' ? 'hostFailureGraceMs + boot + 15 s' : '10 s'} of the black hole in ${rs.filter((r) => goals(r).restoreOk).length}/${rs.length}`,
    );
  }
  return out;
}
