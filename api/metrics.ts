// Prometheus metrics of the API (prom-client, a registry of its own): proxies by state counted in
// Temporal's visibility store at scrape time, pools' counts from their memos, hosts' figures from
// the host store (the last survey, open maintenance workflows, proxies counted per host), plus what the API measures itself (requests by
// route and status with their latency, Temporal calls that failed, process figures). The
// worker-side figures (health probe latency, upload bytes, RPC latency by procedure, link deaths)
// are served by each worker (`--metrics-listen`, activities/metrics.ts).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HostStore } from '../client/host-store.ts';
import { drainOverdue } from '../contracts/host.ts';
import type { HostView } from '../contracts/host.ts';
import type { PoolStore, PoolSummary } from '../client/pools.ts';
import { poolListQuery } from '../client/pools.ts';
import type { ProxyStore } from './store.ts';
import { listQuery } from './store.ts';
import { PROXY_STATES } from './schemas.ts';

export interface ApiMetrics {
  registry: Registry;
  requests: Counter<'method' | 'route' | 'status'>;
  duration: Histogram<'method' | 'route'>;
  temporalErrors: Counter<'operation'>;
}

/** States whose proxies are still open workflows; Deleted and Failed are counted over retention. */
const OPEN_STATES = new Set<string>(PROXY_STATES.filter((s) => s !== 'Deleted' && s !== 'Failed'));

/** Pools read per scrape (pages of 1000 from visibility, the counts from each pool's memo). */
const POOLS_MAX = 10_000;

export function createMetrics(
  store: ProxyStore,
  options: { scrapeTimeoutMs?: number; pools?: PoolStore; hosts?: HostStore } = {},
): ApiMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'egress_api_' });
  const temporalErrors = new Counter({
    name: 'egress_api_temporal_errors_total',
    help: 'Temporal calls of the API that failed, by operation',
    labelNames: ['operation'] as const,
    registers: [registry],
  });
  // One visibility scrape feeds the three gauges below: prom-client collects them concurrently.
  const timeoutMs = options.scrapeTimeoutMs ?? 5_000;
  // A failed count is counted by egress_api_temporal_up's collect (operation count).
  const scrapeOnce = oncePerScrape(
    () => countAll(store),
    timeoutMs,
    () => undefined,
  );
  new Gauge({
    name: 'egress_api_temporal_up',
    help: '1 if the last scrape could count proxies in Temporal visibility, else 0',
    registers: [registry],
    async collect() {
      const counts = await scrapeOnce();
      this.set(counts === undefined ? 0 : 1);
      if (counts === undefined) temporalErrors.inc({ operation: 'count' });
    },
  });
  new Gauge({
    name: 'egress_proxies',
    help: 'Proxies by state (ProxyState search attribute); Deleted and Failed within the namespace retention',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const counts = await scrapeOnce();
      this.reset();
      for (const [state, n] of counts?.byState ?? []) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'egress_proxies_healthy',
    help: 'Open proxy workflows whose ProxyHealthy search attribute is true',
    registers: [registry],
    async collect() {
      const counts = await scrapeOnce();
      this.reset();
      if (counts !== undefined) this.set(counts.healthy);
    },
  });
  if (options.pools !== undefined) poolGauges(registry, options.pools, timeoutMs, temporalErrors);
  if (options.hosts !== undefined) hostGauges(registry, options.hosts, timeoutMs, temporalErrors);
  const requests = new Counter({
    name: 'egress_api_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'egress_api_request_duration_seconds',
    help: 'HTTP request latency, by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  return { registry, requests, duration, temporalErrors };
}

/**
 * Per-pool figures from the open pools' memos (what the pool workflow publishes when they
 * change): desired, healthy, available, spares, updated, and the replacements and rollbacks over
 * its life (counters in the pool: exported as gauges of their running totals).
 */
function poolGauges(registry: Registry, pools: PoolStore, timeoutMs: number, errors: Counter<'operation'>): void {
  const FIELDS = ['desired', 'healthy', 'available', 'spares', 'updated', 'replacements', 'rollbacks'] as const;
  const all = async (): Promise<PoolSummary[]> => {
    const out: PoolSummary[] = [];
    let token: Uint8Array | undefined;
    do {
      const page = await pools.listPools(poolListQuery({ openOnly: true }), 1000, token);
      out.push(...page.items);
      token = page.nextPageToken;
    } while (token !== undefined && out.length < POOLS_MAX);
    return out;
  };
  const listOnce = oncePerScrape(all, timeoutMs, () => errors.inc({ operation: 'pools' }));
  const help: Record<(typeof FIELDS)[number], string> = {
    desired: 'Members a pool keeps in discovery (its size)',
    healthy: 'Members of a pool whose Healthy condition is True (any role)',
    available: 'Members of a pool in discovery: Healthy for minHealthyMs and serving',
    spares: 'Spare members a pool keeps Healthy out of discovery (its spares setting)',
    updated: 'Members of a pool on its current template revision',
    replacements: 'Members a pool replaced (failed or unhealthy) over its life',
    rollbacks: 'Rollouts a pool rolled back over its life',
  };
  new Gauge({
    name: 'egress_pool_phase',
    help: "1 for each open pool's phase (Ready, Progressing, Paused, Degraded, Deleting): alert on Degraded",
    labelNames: ['entry', 'pool', 'phase'] as const,
    registers: [registry],
    async collect() {
      const list = await listOnce();
      this.reset();
      for (const p of list ?? [])
        if (p.phase !== undefined) this.set({ entry: p.entry, pool: p.name, phase: p.phase }, 1);
    },
  });
  for (const field of FIELDS) {
    new Gauge({
      name: `egress_pool_${field}`,
      help: help[field],
      labelNames: ['entry', 'pool'] as const,
      registers: [registry],
      async collect() {
        const list = await listOnce();
        this.reset();
        for (const p of list ?? []) {
          const v = p[field];
          if (typeof v === 'number') this.set({ entry: p.entry, pool: p.name }, v);
        }
      },
    });
  }
}

/**
 * Per-host figures from one host listing per scrape (the store's listHosts: the last survey, the
 * open host workflows, a status query per cordoned host and a count of open proxies per host):
 * open proxies, free memory and reachability from the survey (absent for a host never surveyed),
 * whether it is cordoned and whether its drain is past its deadline.
 */
function hostGauges(registry: Registry, hosts: HostStore, timeoutMs: number, errors: Counter<'operation'>): void {
  const listOnce = oncePerScrape(
    () => hosts.listHosts(),
    timeoutMs,
    () => errors.inc({ operation: 'hosts' }),
  );
  const gauge = (name: string, help: string, value: (h: HostView) => number | undefined): void => {
    new Gauge({
      name,
      help,
      labelNames: ['entry', 'host'] as const,
      registers: [registry],
      async collect() {
        const list = await listOnce();
        this.reset();
        for (const h of list ?? []) {
          const v = value(h);
          if (v !== undefined) this.set({ entry: h.entry, host: h.host }, v);
        }
      },
    });
  };
  const bool = (b: boolean | undefined): number | undefined => (b === undefined ? undefined : b ? 1 : 0);
  gauge('egress_host_proxies', 'Open proxy workflows on a host (ProxyHost), pool members included', (h) => h.proxies);
  gauge(
    'egress_host_memory_free_bytes',
    'Free memory of a host at the last provider-health survey (free + buffers + cache)',
    (h) => (h.memoryFreeMiB === undefined ? undefined : h.memoryFreeMiB * 1_048_576),
  );
  gauge('egress_host_cordoned', '1 if a host is cordoned (no new placements), else 0', (h) => bool(h.cordoned));
  gauge(
    'egress_host_drain_overdue',
    "1 while a host's drain is past its deadline with proxies left on it, else 0 (absent for a host without a drain deadline)",
    (h) => (h.drain?.deadlineAt === undefined ? undefined : bool(drainOverdue(h))),
  );
  gauge('egress_host_reachable', '1 if the last provider-health survey reached a host, else 0', (h) =>
    bool(h.reachable),
  );
}

interface Scrape {
  byState: (readonly [string, number])[];
  healthy: number;
}

async function countAll(store: ProxyStore): Promise<Scrape> {
  const [byState, healthy] = await Promise.all([
    Promise.all(
      PROXY_STATES.map(
        async (state) => [state, await store.count(listQuery({ state, openOnly: OPEN_STATES.has(state) }))] as const,
      ),
    ),
    store.count(listQuery({ healthy: true, openOnly: true })),
  ]);
  return { byState, healthy };
}

/**
 * `read` at most once a second, shared by the gauges one scrape collects concurrently, bounded by
 * `timeoutMs`; a failure is counted (`onError`) and reads as undefined (the gauges are then absent).
 */
function oncePerScrape<T>(
  read: () => Promise<T>,
  timeoutMs: number,
  onError: () => void,
): () => Promise<T | undefined> {
  let scrape: { at: number; result: Promise<T | undefined> } | undefined;
  return () => {
    if (scrape === undefined || Date.now() - scrape.at > 1_000) {
      scrape = {
        at: Date.now(),
        // A store that throws at once (not a rejected promise) is caught too: never a failed scrape.
        result: withTimeout(Promise.resolve().then(read), timeoutMs).catch(() => {
          onError();
          return undefined;
        }),
      };
    }
    return scrape.result;
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
