// The run state of one proxy workflow, in one place: the status it reports and what the phases,
// handlers and cleanup share (the resolved spec, the address grace count, a pending resize, what
// may need deleting; the image waited on is the ImageWaiter's, image-join.ts). Plain data and small methods; the transitions of the status itself are
// the pure functions of status.ts.
import type { HostVerdict } from '../../contracts/host-monitor.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import type { ProxyStatus, ResolvedProxy } from '../../contracts/proxy.ts';
import type { CarriedProxy, ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { initialStatus, isEnding } from './status.ts';
import type { ResizeTarget } from './status.ts';

/**
 * A move of a standalone proxy's VM to another host (the `move` update), as far as it got:
 * `checking` (the update looks for a host to go to), `asked` (handed to the Running loop),
 * `deleting` (the VM on `from` is being deleted), `placing` (deleted; the new VM is being placed,
 * created and booted). Workflow state, so a run replayed on another worker goes on from there;
 * it never spans a continue-as-new (the loop does not continue as new while a move is pending).
 */
export interface PendingMove {
  phase: 'checking' | 'asked' | 'deleting' | 'placing';
  /** The host it leaves. */
  from: string;
  /** Hosts the new VM must not go to, `from` among them. */
  avoidHosts: string[];
  reason?: string;
  /** RFC 3339 workflow time the update was accepted. */
  at: string;
}

/** A watch of the host's monitor as the proxy run holds it: its verdicts arrive by signal (handlers.ts). */
export interface HostWatchRun {
  token: string;
  entry: string;
  host: string;
  /** The last verdict taken (each is taken once, in order). */
  lastSeq: number;
  /** Verdicts received and not yet handled by the Running loop. */
  verdicts: HostVerdict[];
}

/** A member's reporting: what it last sent, when, and the held report's timer. */
export interface ReportGate {
  sent?: MemberReport;
  sentAtMs: number;
  /** The `at` of the last report sent, ms (each report's is later). */
  lastAtMs: number;
  /** The timer that sends what is held (set while one is armed). */
  timer?: Promise<void>;
}

/** A permanent failure of the lifecycle: the proxy ends Failed with this reason. */
export class ProxyFailed extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** The lifecycle must wait for capacity (pool too small, no reachable host). */
export class NeedCapacity extends Error {}

export class ProxyRun {
  /** What the `status` query returns; replaced (never mutated) on every change. */
  status: ProxyStatus;
  /** The spec resolved against the providers file (undefined until resolveProxy answered). */
  resolved: ResolvedProxy | undefined;
  /** Consecutive health polls without an address (H3). */
  missedPolls: number;
  /** Workflow time (ms) the VM was last started. */
  startedAtMs: number | undefined;
  /** An address was read since the VM was last started. */
  addressedOnce: boolean;
  /** Since when the host has not answered the VM's reads (host-reach.ts); undefined while it answers. */
  hostUnreachableSince: string | undefined;
  /** A create was attempted on `status.host`: cleanup must delete what it may have left. */
  mayHaveCreated: boolean;
  /** The delete update was accepted (as opposed to a cancellation from outside). */
  deleteRequested = false;
  /** The move under way (PendingMove), if any. */
  move: PendingMove | undefined;
  /** A resize the update handler asked for and the health loop has not applied yet. */
  pendingResize: ResizeTarget | undefined;
  private resizeError: string | undefined;
  /** Health polls done in this run (the monitor's checkpoint counts them; not carried). */
  polls = 0;
  /** What the last publish upserted (publishedKey): the monitor loop upserts only when it changes. */
  published: string | undefined;
  /** What the member last reported to its pool (reportKey). */
  reported: string | undefined;
  /** A member's reporting (pool-member.ts); set at its first report, or carried. */
  reportGate: ReportGate | undefined;
  /** The watch of the host's monitor this run waits on (`health.monitor: host`, monitor-loop.ts), if any. */
  hostWatch: HostWatchRun | undefined;
  /** Watches this run started (the next watch's token is `<runId>/<n>`). */
  watches = 0;
  /** The last report's signal: awaited before the workflow ends (the server drops a signal its sender outlived). */
  lastReport: Promise<void> | undefined;

  readonly input: ProxyWorkflowInput;

  constructor(input: ProxyWorkflowInput, at: string) {
    this.input = input;
    const carried = input.carried;
    this.status = carried?.status ?? initialStatus(input, at);
    if (input.pool !== undefined && this.status.pool === undefined) {
      this.status = { ...this.status, pool: { workflowId: input.pool.workflowId, serving: input.pool.serving } };
    }
    this.resolved = carried?.resolved;
    this.missedPolls = carried?.missedPolls ?? 0;
    this.startedAtMs = carried?.startedAtMs;
    this.addressedOnce = carried?.addressedOnce ?? false;
    this.hostUnreachableSince = carried?.hostUnreachableSince;
    const report = carried?.report;
    this.reported = report?.key;
    this.reportGate = report && { sent: report.sent, sentAtMs: Date.now(), lastAtMs: report.lastAtMs };
    const st = this.status;
    this.mayHaveCreated = st.host !== undefined && st.state !== 'Pending' && st.state !== 'WaitingForCapacity';
  }

  /** Deleting, Deleted or Failed. */
  ending(): boolean {
    return isEnding(this.status.state);
  }

  /** Asks the health loop to apply `want`; clears the previous resize's error. */
  requestResize(want: ResizeTarget): void {
    this.resizeError = undefined;
    this.pendingResize = want;
  }

  /** The health loop is done with the pending resize; `error` when it failed. */
  resizeDone(error?: string): void {
    if (error !== undefined) this.resizeError = error;
    this.pendingResize = undefined;
  }

  /** Why the last resize failed (read through a method: a caller's narrowing does not survive its awaits). */
  lastResizeError(): string | undefined {
    return this.resizeError;
  }

  /** What the next run starts from after continue-as-new. */
  carried(resolved: ResolvedProxy): CarriedProxy {
    const { status, missedPolls, startedAtMs, addressedOnce, hostUnreachableSince } = this;
    const c: CarriedProxy = { resolved, status, missedPolls, startedAtMs, addressedOnce };
    if (hostUnreachableSince !== undefined) c.hostUnreachableSince = hostUnreachableSince;
    const gate = this.reportGate;
    if (this.reported !== undefined && gate?.sent !== undefined) {
      c.report = { key: this.reported, sent: gate.sent, lastAtMs: gate.lastAtMs };
    }
    return c;
  }
}
