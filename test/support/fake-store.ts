/**
 * A stand-in for the API's Temporal store (client/store.ts ProxyStore): proxies in a map, every call
 * counted, and failures on demand. Lets unit tests drive the routes without a server, including
 * a Healthy proxy, which the empty test image never becomes. FakePools stands in for the pool store.
 */
import { TemporalUnavailableError } from '../../client/errors.ts';
import type { CatalogView, ProxyStore, ProxySummary, ResizeResult, StartResult } from '../../client/store.ts';
import type { Catalog } from '../../contracts/catalog.ts';
import type { ProxySpec, ProxyStatus, VmSize } from '../../contracts/proxy.ts';
import type {
  PoolDeleteResult,
  PoolStore,
  PoolSummary,
  PoolUpdate,
  PoolUpdateResult,
  StartPoolResult,
} from '../../client/pools.ts';
import { resolvePoolSpec } from '../../contracts/pool.ts';
import type { PoolMemberStatus, PoolSpec, PoolStatus } from '../../contracts/pool.ts';

export interface FakeProxy {
  spec: ProxySpec;
  summary: ProxySummary;
  status?: ProxyStatus;
}

export class FakeStore implements ProxyStore {
  readonly proxies = new Map<string, FakeProxy>();
  readonly calls: Record<string, number> = {};
  /** Every call throws this when set. */
  failWith: Error | undefined;

  #count(name: string): void {
    this.calls[name] = (this.calls[name] ?? 0) + 1;
    if (this.failWith !== undefined) throw this.failWith;
  }

  add(spec: ProxySpec, summary: Partial<ProxySummary> = {}, status?: ProxyStatus): FakeProxy {
    const p: FakeProxy = {
      spec,
      summary: {
        name: spec.name,
        entry: spec.entry,
        workflowId: `proxy/${spec.entry}/${spec.name}`,
        runId: `run-${spec.name}`,
        execution: 'RUNNING',
        startTime: '2026-01-01T00:00:00.000Z',
        ...summary,
      },
      status,
    };
    this.proxies.set(p.summary.workflowId, p);
    return p;
  }

  start(spec: ProxySpec): Promise<StartResult> {
    this.#count('start');
    const existing = this.proxies.get(`proxy/${spec.entry}/${spec.name}`);
    if (existing) return Promise.resolve({ started: false, proxy: existing.summary, spec: existing.spec });
    const p = this.add(spec, { state: 'Pending' });
    return Promise.resolve({ started: true, proxy: p.summary });
  }

  describe(entry: string, name: string): Promise<ProxySummary | undefined> {
    this.#count('describe');
    return Promise.resolve(this.proxies.get(`proxy/${entry}/${name}`)?.summary);
  }

  status(entry: string, name: string): Promise<ProxyStatus> {
    this.#count('status');
    const st = this.proxies.get(`proxy/${entry}/${name}`)?.status;
    return st ? Promise.resolve(st) : Promise.reject(new TemporalUnavailableError('no answer to the query'));
  }

  list(query: string, pageSize: number): Promise<{ items: ProxySummary[]; nextPageToken?: Uint8Array }> {
    this.#count('list');
    const items = [...this.proxies.values()].map((p) => p.summary);
    const mustBe = (sa: string, v: string | undefined): boolean =>
      !query.includes(`${sa} = `) || query.includes(`${sa} = ${v}`);
    const hit = items.filter(
      (s) =>
        mustBe('ProxyState', `'${s.state}'`) &&
        mustBe('ProviderEntry', `'${s.entry}'`) &&
        mustBe('ProxyHost', `'${s.host}'`) &&
        mustBe('ProxyHealthy', String(s.healthy === true)),
    );
    return Promise.resolve(
      hit.length > pageSize
        ? { items: hit.slice(0, pageSize), nextPageToken: Buffer.from('next-page') }
        : { items: hit },
    );
  }

  count(): Promise<number> {
    this.#count('count');
    return Promise.resolve(this.proxies.size);
  }

  requestDelete(entry: string, name: string) {
    this.#count('requestDelete');
    const p = this.proxies.get(`proxy/${entry}/${name}`);
    if (!p) return Promise.resolve(undefined);
    if (p.summary.execution !== 'RUNNING') return Promise.resolve({ kind: 'closed' as const, proxy: p.summary });
    return Promise.resolve({
      kind: 'accepted' as const,
      accepted: { accepted: true as const, fromState: (p.summary.state ?? 'Pending') as ProxyStatus['state'] },
    });
  }

  waitOutcome() {
    this.#count('waitOutcome');
    return Promise.resolve({ state: 'Deleted' as const });
  }

  providerHealth() {
    this.#count('providerHealth');
    return Promise.resolve(undefined);
  }

  pollers() {
    this.#count('pollers');
    return Promise.resolve({ workflow: 1, activity: 1 });
  }

  /** What resize() answers for a known proxy. */
  resizeAnswer: ResizeResult = { kind: 'pending' };

  resize(entry: string, name: string, size: VmSize) {
    this.#count('resize');
    const p = this.proxies.get(`proxy/${entry}/${name}`);
    if (p === undefined) return Promise.resolve(undefined);
    this.resized.push(size);
    return Promise.resolve(this.resizeAnswer);
  }
  readonly resized: VmSize[] = [];

  /** What catalog() answers: by default entries lab (image deb), e (i) and disc (i). */
  catalogView: CatalogView = {
    kind: 'ok',
    catalog: fakeCatalog({ lab: ['deb'], e: ['i'], disc: ['i'] }),
    publishers: ['w1'],
  };

  catalog() {
    this.#count('catalog');
    return Promise.resolve(this.catalogView);
  }
}

/** A catalog of `images` by entry, with the default VM and every Squid override allowed. */
export function fakeCatalog(images: Record<string, string[]>, digest = 'd1'): Catalog {
  return {
    digest,
    entries: Object.entries(images).map(([name, keys]) => ({
      name,
      images: keys,
      vm: { vcpus: 1, memoryMiB: 512, diskGiB: 10 },
      squidOverrides: ['allowedClientCidrs', 'port'],
      allowOpenProxy: false,
    })),
  };
}

/** A ProxyStatus with everything filled in; override what a test needs. */
export function fakeStatus(o: Partial<ProxyStatus> & Pick<ProxyStatus, 'name' | 'entry'>): ProxyStatus {
  const cond = { status: 'Unknown' as const, reason: 'NotYetChecked', since: '2026-01-01T00:00:00.000Z' };
  return {
    imageKey: 'img',
    state: 'Running',
    port: 3128,
    vm: { vcpus: 1, memoryMiB: 512, diskGiB: 10 },
    conditions: { VmRunning: cond, AddressAssigned: cond, Healthy: cond },
    health: { consecutiveOk: 0, consecutiveFailed: 0, totalOk: 0, totalFailed: 0 },
    recreations: 0,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    ...o,
  };
}

export interface FakePool {
  spec: PoolSpec;
  summary: PoolSummary;
  status: PoolStatus;
}

/**
 * A stand-in for the API's pool store (client/pools.ts PoolStore): pools in a map, each update
 * applied to its status as the workflow would (size, spec, pause, a template's new revision), a
 * refusal on demand (`refuse`), and every update recorded.
 */
export class FakePools implements PoolStore {
  readonly pools = new Map<string, FakePool>();
  readonly updates: PoolUpdate[] = [];
  /** The next update is refused with this reason (as a workflow validator would), then cleared. */
  refuse: string | undefined;
  /** What waitPoolDeleted answers: the last status (ended), or undefined (still deleting). */
  deleteEnds = true;

  add(spec: PoolSpec, o: Partial<PoolStatus> = {}): FakePool {
    const id = `pool/${spec.entry}/${spec.name}`;
    const p: FakePool = {
      spec,
      summary: {
        name: spec.name,
        entry: spec.entry,
        workflowId: id,
        runId: `run-${spec.name}`,
        execution: 'RUNNING',
        phase: 'Ready',
        desired: spec.size,
        startTime: '2026-01-01T00:00:00.000Z',
      },
      status: fakePoolStatus(spec, o),
    };
    this.pools.set(id, p);
    return p;
  }

  #get(entry: string, name: string): FakePool | undefined {
    return this.pools.get(`pool/${entry}/${name}`);
  }

  startPool(spec: PoolSpec): Promise<StartPoolResult> {
    const existing = this.#get(spec.entry, spec.name);
    if (existing) return Promise.resolve({ started: false, pool: existing.summary, spec: existing.spec });
    return Promise.resolve({ started: true, pool: this.add(spec).summary });
  }

  describePool(entry: string, name: string): Promise<PoolSummary | undefined> {
    return Promise.resolve(this.#get(entry, name)?.summary);
  }

  poolStatus(entry: string, name: string): Promise<PoolStatus | undefined> {
    return Promise.resolve(this.#get(entry, name)?.status);
  }

  listPools(query: string, pageSize: number): Promise<{ items: PoolSummary[]; nextPageToken?: Uint8Array }> {
    const items = [...this.pools.values()]
      .map((p) => p.summary)
      .filter((s) => !query.includes('ProviderEntry = ') || query.includes(`ProviderEntry = '${s.entry}'`));
    return Promise.resolve(
      items.length > pageSize
        ? { items: items.slice(0, pageSize), nextPageToken: Buffer.from('next-page') }
        : { items },
    );
  }

  updatePool(entry: string, name: string, u: PoolUpdate): Promise<PoolUpdateResult | undefined> {
    const p = this.#get(entry, name);
    if (p === undefined) return Promise.resolve(undefined);
    this.updates.push(u);
    if (this.refuse !== undefined) {
      const message = this.refuse;
      this.refuse = undefined;
      return Promise.resolve({ kind: 'refused', message });
    }
    const st = p.status;
    if (u.kind === 'scale') {
      st.spec = { ...st.spec, size: u.request.size, spares: u.request.spares ?? st.spec.spares };
      st.desired = u.request.size;
    } else if (u.kind === 'spec') {
      if (u.patch.template !== undefined) {
        st.revision += 1;
        st.history = [{ revision: st.revision, template: u.patch.template, at: st.updatedAt }, ...st.history];
      }
      st.spec = resolvePoolSpec({ ...st.spec, ...u.patch });
      st.desired = st.spec.size;
    } else if (u.kind === 'pause' || u.kind === 'resume') {
      st.paused = u.kind === 'pause';
      st.phase = st.paused ? 'Paused' : 'Ready';
    } else if (u.kind === 'replaceMember') {
      if (!st.members.some((m) => m.name === u.request.name)) {
        return Promise.resolve({ kind: 'refused', message: `no member ${u.request.name} in pool ${entry}/${name}` });
      }
      st.replacedOnRequest = (st.replacedOnRequest ?? 0) + 1;
    } else {
      if (st.history.length < 2) {
        return Promise.resolve({ kind: 'refused', message: 'the pool has only one revision: nothing to roll back to' });
      }
      st.revision = u.request.revision ?? st.history[1]!.revision;
    }
    return Promise.resolve({ kind: 'done', status: structuredClone(st) });
  }

  deletePool(entry: string, name: string): Promise<PoolDeleteResult | undefined> {
    const p = this.#get(entry, name);
    if (p === undefined) return Promise.resolve(undefined);
    if (p.summary.execution !== 'RUNNING') return Promise.resolve({ kind: 'closed', pool: p.summary });
    p.status.phase = 'Deleting';
    return Promise.resolve({ kind: 'done', status: structuredClone(p.status) });
  }

  waitPoolDeleted(entry: string, name: string): Promise<PoolStatus | undefined> {
    const p = this.#get(entry, name);
    if (p === undefined || !this.deleteEnds) return Promise.resolve(undefined);
    p.summary = { ...p.summary, execution: 'COMPLETED', phase: 'Deleted' };
    p.status = { ...p.status, phase: 'Deleted', members: [] };
    return Promise.resolve(structuredClone(p.status));
  }
}

/** A PoolStatus of `spec` at rest with no members; override what a test needs. */
export function fakePoolStatus(spec: PoolSpec, o: Partial<PoolStatus> = {}): PoolStatus {
  const at = '2026-01-01T00:00:00.000Z';
  return {
    entry: spec.entry,
    name: spec.name,
    phase: 'Ready',
    spec: resolvePoolSpec(spec),
    revision: 1,
    history: [{ revision: 1, template: spec.template, at }],
    desired: spec.size,
    spares: spec.spares ?? 0,
    healthy: 0,
    available: 0,
    updated: 0,
    replacements: 0,
    replacedOnRequest: 0,
    rollbacks: 0,
    paused: false,
    drainingHosts: [],
    members: [],
    createdAt: at,
    updatedAt: at,
    ...o,
  };
}

/** A pool member's status, available with an address unless overridden. */
export function fakeMember(o: Partial<PoolMemberStatus> & Pick<PoolMemberStatus, 'name'>): PoolMemberStatus {
  return {
    revision: 1,
    imageKey: 'deb',
    role: 'serving',
    state: 'Running',
    healthy: 'True',
    available: true,
    host: 'hv1',
    address: '10.0.0.1:3128',
    ageMs: 60_000,
    createdAt: '2026-01-01T00:00:00.000Z',
    ...o,
  };
}
