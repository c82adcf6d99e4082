/**
 * A stand-in for the API's host store (client/host-store.ts HostStore): hosts in a map (a survey
 * line or none, a maintenance status, a count of proxies), every call counted and recorded, and a
 * refusal or failure on demand. The views are built by the real hostView and knownHostsOf.
 */
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { HostActionRequest, HostStatus, HostView } from '../../contracts/host.ts';
import { hostView, knownHostsOf, surveyOf } from '../../client/host-store.ts';
import type {
  HostAction,
  HostActionResult,
  HostRef,
  HostStore,
  HostSurveys,
  KnownHosts,
} from '../../client/host-store.ts';
import { schedulableHost } from '../../client/hosts.ts';

export interface FakeHost {
  status: HostStatus;
  /** Absent: a host never surveyed (known from its open maintenance workflow). */
  survey?: HostSurvey;
  proxies: number;
}

export const SURVEYED_AT = '2026-12-01T10:00:00.000Z';

export function fakeSurvey(entry: string, host: string, o: Partial<HostSurvey> = {}): HostSurvey {
  return {
    entry,
    host,
    weight: 1,
    reachable: true,
    memoryTotalMiB: 4096,
    memoryFreeMiB: 2048,
    cpus: 4,
    ...o,
  };
}

export class FakeHosts implements HostStore {
  readonly hosts = new Map<string, FakeHost>();
  readonly calls: Record<string, number> = {};
  readonly actions: { action: HostAction; entry: string; host: string; req: HostActionRequest; taskQueue: string }[] =
    [];
  /** Every call throws this when set. */
  failWith: Error | undefined;
  /** The next action is refused with this message when set. */
  refuseWith: string | undefined;
  /** No survey has answered: only hosts without a survey line but with a workflow are known. */
  noSurvey = false;

  #count(name: string): void {
    this.calls[name] = (this.calls[name] ?? 0) + 1;
    if (this.failWith !== undefined) throw this.failWith;
  }

  add(
    entry: string,
    host: string,
    o: { survey?: Partial<HostSurvey> | false; status?: Partial<HostStatus>; proxies?: number } = {},
  ): FakeHost {
    const h: FakeHost = {
      status: { ...schedulableHost(entry, host), ...o.status },
      proxies: o.proxies ?? 0,
      ...(o.survey === false ? {} : { survey: fakeSurvey(entry, host, o.survey) }),
    };
    this.hosts.set(`${entry}/${host}`, h);
    return h;
  }

  #surveys(): HostSurveys | undefined {
    if (this.noSurvey) return undefined;
    const surveyed = [...this.hosts.values()].flatMap((h) => (h.survey ? [h.survey] : []));
    const entries = [...new Set(surveyed.map((s) => s.entry))].map((entry) => ({
      entry,
      at: SURVEYED_AT,
      hosts: surveyed.filter((s) => s.entry === entry),
    }));
    return { at: SURVEYED_AT, entries };
  }

  #known(): KnownHosts {
    const open: HostRef[] = [...this.hosts.values()]
      .filter((h) => h.status.phase !== 'Schedulable')
      .map((h) => ({ entry: h.status.entry, host: h.status.host }));
    return knownHostsOf(this.#surveys(), open);
  }

  #view(ref: HostRef): HostView {
    const h = this.hosts.get(`${ref.entry}/${ref.host}`)!;
    return hostView(h.status, surveyOf(this.#surveys(), ref.entry, ref.host), h.proxies);
  }

  knownHosts(): Promise<KnownHosts> {
    this.#count('knownHosts');
    return Promise.resolve(this.#known());
  }

  listHosts(entry?: string): Promise<HostView[]> {
    this.#count('listHosts');
    return Promise.resolve(
      this.#known()
        .hosts.filter((h) => entry === undefined || h.entry === entry)
        .map((h) => this.#view(h)),
    );
  }

  getHost(entry: string, host: string): Promise<HostView | undefined> {
    this.#count('getHost');
    const known = this.#known().hosts.some((h) => h.entry === entry && h.host === host);
    return Promise.resolve(known ? this.#view({ entry, host }) : undefined);
  }

  act(
    action: HostAction,
    entry: string,
    host: string,
    req: HostActionRequest,
    taskQueue: string,
  ): Promise<HostActionResult> {
    this.#count('act');
    this.actions.push({ action, entry, host, req, taskQueue });
    if (this.refuseWith !== undefined) {
      const message = this.refuseWith;
      this.refuseWith = undefined;
      return Promise.resolve({ kind: 'refused', message });
    }
    const h = this.hosts.get(`${entry}/${host}`) ?? this.add(entry, host, { survey: false });
    const since = h.status.since ?? '2026-12-01T11:00:00.000Z';
    const reason = req.reason === undefined ? {} : { reason: req.reason };
    if (action === 'uncordon') h.status = schedulableHost(entry, host);
    else if (action === 'cordon' && h.status.phase === 'Schedulable') {
      h.status = { entry, host, phase: 'Cordoned', cordoned: true, since, ...reason };
    } else if (action === 'drain') {
      const phase = h.proxies === 0 ? 'Drained' : 'Draining';
      h.status = {
        entry,
        host,
        phase,
        cordoned: true,
        since,
        ...reason,
        drain: { startedAt: since, proxies: [], remaining: h.proxies },
      };
    }
    return Promise.resolve({ kind: 'done', status: h.status });
  }
}

/** A HostStore that asks whichever FakeHosts `current` returns (a test that makes a new one per case). */
export function hostsOf(current: () => FakeHosts): HostStore {
  return {
    knownHosts: () => current().knownHosts(),
    listHosts: (entry) => current().listHosts(entry),
    getHost: (entry, host) => current().getHost(entry, host),
    act: (action, entry, host, req, taskQueue) => current().act(action, entry, host, req, taskQueue),
  };
}
