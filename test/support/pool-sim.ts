/**
 * A small simulator of a pool's members for the reconciler's unit tests: it plays what member
 * proxies would report (booting, Running and Healthy, Failed, Unhealthy, applying a role, deleted)
 * through `applyReport`, runs `reconcile` on every event or wake, and advances time from event to
 * event. Bounded in steps; each step may run checks (the tests' invariants). Hosts can go down
 * (`hostDown`: their members report it, and a deletion there waits) and come back (`hostUp`).
 */
import type { ConditionStatus, ProxyState } from '../../contracts/proxy.ts';
import type { MemberReport, PoolSpec } from '../../contracts/pool.ts';
import { poolAddresses, resolvePoolSpec } from '../../contracts/pool.ts';
import type { Plan, PoolAction } from '../../workflows/pool/plan.ts';
import type { PoolState } from '../../contracts/pool-state.ts';
import { applyReport, newPoolState, nextRandom, reconcile } from '../../workflows/pool/plan.ts';
import { poolStatus } from '../../workflows/pool/status.ts';

export const T0 = Date.parse('2026-01-01T00:00:00.000Z');
export const iso = (ms: number): string => new Date(ms).toISOString();

/** What a member does once booted: Healthy; ends Failed; Running but Unhealthy; never leaves Booting. */
export type Fate = 'healthy' | 'fail' | 'unhealthy' | 'hang';

export interface SimMember {
  name: string;
  revision: number;
  imageKey: string;
  index: number;
  state: ProxyState;
  health: ConditionStatus;
  healthSinceMs: number;
  serving: boolean;
  /** The times its serving value changed, as the member applied it. */
  servedAtMs: number[];
  host?: string;
  lastError?: string;
  /** Since when its host has not answered (what its reports say). */
  hostUnreachableSince?: number | undefined;
  deleted: boolean;
}

type Patch = Partial<Pick<SimMember, 'state' | 'health' | 'serving' | 'host' | 'lastError' | 'hostUnreachableSince'>>;

interface Pending {
  at: number;
  seq: number;
  name: string;
  patch: Patch;
}

/** A seeded random stream (the pool's own, over a holder of its state). */
export function seeded(seed: number): () => number {
  const holder = { rng: seed >>> 0 };
  return () => nextRandom(holder);
}

export interface LoggedAction {
  at: number;
  action: PoolAction;
}

export class PoolSim {
  now = T0;
  readonly state: PoolState;
  readonly members = new Map<string, SimMember>();
  readonly log: LoggedAction[] = [];
  /** Boot time of a member, its signal latency (serving applied), and its deletion time. */
  bootMs = 30_000;
  signalMs = 1_000;
  deleteMs = 2_000;
  fate: (m: SimMember) => Fate = () => 'healthy';
  /** The hosts a member may be placed on. */
  hosts = ['h1', 'h2', 'h3'];
  /** Where a member goes: h1 and h2 in turn, else the first host not to avoid (its create action's avoidHosts). */
  hostOf: (m: SimMember, avoid: readonly string[]) => string = (m, avoid) => {
    const turn = `h${(m.index % 2) + 1}`;
    return avoid.includes(turn) ? (this.hosts.find((h) => !avoid.includes(h)) ?? turn) : turn;
  };
  /** Hosts down (hostDown): their deletions wait until hostUp. */
  readonly down = new Set<string>();
  private stranded: string[] = [];
  /** Run after every pass; a check throws to fail the test. */
  readonly checks: ((sim: PoolSim) => void)[] = [];
  lastPlan: Plan = { actions: [] };
  steps = 0;
  private readonly random: () => number;
  private pending: Pending[] = [];
  private seq = 0;
  private created = 0;

  constructor(spec: PoolSpec, seed = 1) {
    this.state = newPoolState(resolvePoolSpec(spec), iso(T0));
    this.random = seeded(seed);
  }

  /** One reconciler pass at the current time; its actions are played (members created, told, deleted). */
  pass(): Plan {
    const plan = reconcile(this.state, this.now, this.random);
    this.lastPlan = plan;
    const w = plan.wakeAtMs;
    if (w !== undefined && w <= this.now) {
      throw new Error(`the plan asks to wake at ${iso(w)}, not after now (${iso(this.now)}): a busy loop`);
    }
    for (const action of plan.actions) {
      this.log.push({ at: this.now, action });
      if (action.kind === 'create') this.create(action.name, action.revision, action.avoidHosts ?? []);
      else if (action.kind === 'serve') this.later(this.signalMs, action.name, { serving: action.serving });
      else this.later(this.deleteMs, action.name, { state: 'Deleted', serving: false });
    }
    for (const check of this.checks) check(this);
    return plan;
  }

  /** Schedules a change of a member (it then reports); `ms` from now. */
  later(ms: number, name: string, patch: Patch): void {
    this.pending.push({ at: this.now + ms, seq: this.seq++, name, patch });
  }

  /** A change of a member at once (it reports), then a pass. */
  play(name: string, patch: Patch): Plan {
    this.change(name, patch);
    return this.pass();
  }

  /** Moves to the next event or wake (at most `untilMs`); returns false when nothing is due by then. */
  step(untilMs = Infinity): boolean {
    if (++this.steps > 2_000) throw new Error('the simulation took over 2000 steps');
    const nextEvent = Math.min(...this.pending.map((p) => p.at));
    const wake = this.lastPlan.wakeAtMs ?? Infinity;
    const next = Math.min(nextEvent, wake);
    if (next === Infinity || next > untilMs) {
      if (untilMs !== Infinity && untilMs > this.now) {
        this.now = untilMs;
        this.pass();
      }
      return false;
    }
    this.now = next;
    const due = this.pending.filter((p) => p.at <= this.now).sort((a, b) => a.at - b.at || a.seq - b.seq);
    this.pending = this.pending.filter((p) => p.at > this.now);
    for (const p of due) this.change(p.name, p.patch);
    this.pass();
    return true;
  }

  /** Steps until `pred` holds (bounded: by steps, and by `maxMs` of simulated time). */
  runUntil(pred: (sim: PoolSim) => boolean, what: string, maxMs = 6 * 3_600_000): void {
    const end = this.now + maxMs;
    while (!pred(this)) {
      if (!this.step(end)) {
        if (pred(this)) return;
        throw new Error(
          `${what}: not reached by ${iso(end)} (phase ${this.status().phase}, reason ${this.state.reason})`,
        );
      }
    }
  }

  /** Plays every event up to `ms` from now. */
  advance(ms: number): void {
    const end = this.now + ms;
    while (this.step(end));
  }

  status(): ReturnType<typeof poolStatus> {
    return poolStatus(this.state, this.now);
  }

  /** What discovery hands out (the pool's view): available members with an address. */
  discovery(): string[] {
    return poolAddresses(this.status()).map((a) => a.name);
  }

  /** Members that serve clients by their own account (applied serving, Running, Healthy, not deleted). */
  serving(): SimMember[] {
    return [...this.members.values()].filter((m) => m.serving && m.state === 'Running' && m.health === 'True');
  }

  /** Members whose VM is still there. */
  alive(): SimMember[] {
    return [...this.members.values()].filter((m) => !m.deleted && m.state !== 'Failed');
  }

  actions(kind: PoolAction['kind'], since = -Infinity): LoggedAction[] {
    return this.log.filter((l) => l.action.kind === kind && l.at >= since);
  }

  ready(): boolean {
    return this.status().phase === 'Ready';
  }

  /** The host stops answering: its members say so (and turn Unhealthy); their deletions wait. Then a pass. */
  hostDown(host: string): Plan {
    this.down.add(host);
    for (const m of this.alive().filter((x) => x.host === host)) {
      this.change(m.name, {
        hostUnreachableSince: this.now,
        health: 'False',
        lastError: 'HOST_UNREACHABLE: ssh timeout',
      });
    }
    return this.pass();
  }

  /** The host answers again: its members say so (Healthy again if Running), the deletions asked meanwhile go on. Then a pass. */
  hostUp(host: string): Plan {
    this.down.delete(host);
    for (const m of this.alive().filter((x) => x.host === host)) {
      const health = m.state === 'Running' ? 'True' : m.health;
      this.change(m.name, { hostUnreachableSince: undefined, health });
    }
    const waiting = this.stranded.filter((n) => this.members.get(n)?.host === host);
    this.stranded = this.stranded.filter((n) => !waiting.includes(n));
    for (const n of waiting) this.later(this.deleteMs, n, { state: 'Deleted', serving: false });
    return this.pass();
  }

  private create(name: string, revision: number, avoid: readonly string[]): void {
    const template = this.state.revisions.find((r) => r.revision === revision)!.template;
    const m: SimMember = {
      name,
      revision,
      imageKey: template.imageKey,
      index: this.created++,
      state: 'Provisioning',
      health: 'Unknown',
      healthSinceMs: this.now,
      serving: false,
      servedAtMs: [],
      deleted: false,
    };
    this.members.set(name, m);
    this.later(1, name, { state: 'Booting', host: this.hostOf(m, avoid) });
    const fate = this.fate(m);
    if (fate === 'healthy') this.later(this.bootMs, name, { state: 'Running', health: 'True' });
    if (fate === 'unhealthy') this.later(this.bootMs, name, { state: 'Running', health: 'False' });
    if (fate === 'fail') this.later(this.bootMs, name, { state: 'Failed', lastError: 'KVM2_BOOT_TIMEOUT: no address' });
  }

  private change(name: string, patch: Patch): void {
    const m = this.members.get(name);
    if (m === undefined || m.deleted || m.state === 'Failed') return; // a message to an ended member
    if (patch.state === 'Deleted' && m.host !== undefined && this.down.has(m.host)) {
      this.stranded.push(name); // its VM is deleted once the host answers
      return;
    }
    if (patch.health !== undefined && patch.health !== m.health) m.healthSinceMs = this.now;
    if (patch.serving !== undefined && patch.serving !== m.serving) m.servedAtMs.push(this.now);
    Object.assign(m, patch);
    if (m.state === 'Deleted') m.deleted = true;
    applyReport(this.state, this.report(m));
  }

  /** The member's report, as a proxy of a pool sends it. */
  report(m: SimMember): MemberReport {
    const r: MemberReport = {
      name: m.name,
      state: m.state,
      health: m.health,
      healthSince: iso(m.healthSinceMs),
      port: 3128,
      serving: m.serving,
      at: iso(this.now),
    };
    if (m.host !== undefined) r.host = m.host;
    if (m.state === 'Running') r.ip = `10.0.0.${m.index + 10}`;
    if (m.lastError !== undefined) r.lastError = m.lastError;
    if (m.hostUnreachableSince !== undefined) r.hostUnreachableSince = iso(m.hostUnreachableSince);
    return r;
  }
}
