/**
 * A stand-in for the API's Temporal store (client/store.ts ProxyStore): proxies in a map, every call
 * counted, and failures on demand. Lets unit tests drive the routes without a server, including
 * a Healthy proxy, which the empty test image never becomes.
 */
import { TemporalUnavailableError } from '../../client/errors.ts';
import type { CatalogView, ProxyStore, ProxySummary, ResizeResult, StartResult } from '../../client/store.ts';
import type { Catalog } from '../../contracts/catalog.ts';
import type { ProxySpec, ProxyStatus, VmSize } from '../../contracts/proxy.ts';

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
