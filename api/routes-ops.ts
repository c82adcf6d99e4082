// Fleet and operations routes: provider health, discovery of healthy proxies (by pool with an
// ETag and a bounded long-poll), liveness, readiness and Prometheus metrics.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import { poolAddresses } from '../contracts/pool.ts';
import type { PoolStatus } from '../contracts/pool.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';
import { ApiError } from './errors.ts';
import { routeSchemas } from './schemas.ts';
import { listQuery } from './store.ts';
import type { PoolStore, ProxyStore, ProxySummary } from './store.ts';

export interface OpsRoutesOptions {
  store: ProxyStore;
  /** Discovery by pool (?pool=); unset: such a request is a 404. */
  pools?: PoolStore;
  taskQueue: string;
  registry: Registry;
  /** How often a held discovery request (`?wait=`) re-reads the pool, in ms (default 1000). */
  discoveryRecheckMs?: number;
}

/** A held discovery request re-reads its pool this often by default: one status query a second. */
export const DISCOVERY_RECHECK_MS = 1000;

/** Discovery reads at most this many healthy proxies (pages of 1000). */
const DISCOVERY_MAX = 10_000;
/** Status queries run at once while building the discovery list. */
const DISCOVERY_CONCURRENCY = 16;

export interface DiscoveredProxy {
  address: string;
  name: string;
  entry: string;
  host?: string;
  ageSeconds: number;
  /** When its Healthy condition last changed (absent in a pool's answer). */
  healthySince?: string;
  /** The address destinations see through it (health.egressIpUrl; in a pool's answer once its member status has it). */
  exitIp?: string;
}

/** A pool's discovery answer: its available members, the counts, and the ETag of the list. */
export interface PoolDiscovery {
  proxies: DiscoveredProxy[];
  skipped: 0;
  pool: string;
  ready: number;
  desired: number;
  etag: string;
}

/**
 * What discovery hands out for a pool (contracts/pool.ts poolAddresses: available members with an
 * address, and their exitIp once the pool's member status has it), sorted by name, and a weak ETag
 * over the list and the desired count: ageSeconds grows by itself and is not part of it (nor is
 * exitIp), so a client polling with If-None-Match gets a 304 until a member enters or leaves
 * discovery or the size changes.
 */
export function poolDiscovery(st: PoolStatus): PoolDiscovery {
  const age = new Map(st.members.map((m) => [m.name, m.ageMs]));
  const exit = new Map(st.members.map((m) => [m.name, m.exitIp]));
  const proxies = poolAddresses(st)
    .map((m) => {
      const exitIp = exit.get(m.name);
      return {
        address: m.address,
        name: m.name,
        entry: st.entry,
        ...(m.host === undefined ? {} : { host: m.host }),
        ageSeconds: Math.max(0, Math.floor((age.get(m.name) ?? 0) / 1000)),
        ...(exitIp === undefined ? {} : { exitIp }),
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
  const listed = proxies.map((p) => [p.name, p.address, p.host ?? '']);
  const hash = createHash('sha256')
    .update(JSON.stringify({ listed, desired: st.desired }))
    .digest('base64url')
    .slice(0, 27);
  return {
    proxies,
    skipped: 0,
    pool: `${st.entry}/${st.name}`,
    ready: proxies.length,
    desired: st.desired,
    etag: `W/"${hash}"`,
  };
}

/** Whether an If-None-Match header names `etag` (weak comparison, a list, or `*`). */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const bare = (t: string): string => t.trim().replace(/^W\//, '');
  return header.split(',').some((t) => t.trim() === '*' || bare(t) === bare(etag));
}

/**
 * A proxy clients may use, from its status: Healthy True, Running, with an address, and (a pool's
 * member) in its pool's discovery. The search
 * attributes that listed it may lag; the status query is the record.
 */
export function discovered(st: ProxyStatus, nowMs: number): DiscoveredProxy | undefined {
  if (st.state !== 'Running' || st.conditions.Healthy.status !== 'True' || st.ip === undefined) return undefined;
  // A pool's spare, or a member leaving its pool, is not handed out.
  if (st.pool !== undefined && !st.pool.serving) return undefined;
  const since = Date.parse(st.runningSince ?? st.createdAt);
  const out: DiscoveredProxy = {
    address: `${st.ip}:${st.port}`,
    name: st.name,
    entry: st.entry,
    ageSeconds: Number.isFinite(since) ? Math.max(0, Math.floor((nowMs - since) / 1000)) : 0,
    healthySince: st.conditions.Healthy.since,
  };
  if (st.host !== undefined) out.host = st.host;
  if (st.exitIp !== undefined) out.exitIp = st.exitIp;
  return out;
}

async function mapLimited<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]!);
  });
  await Promise.all(workers);
  return out;
}

/**
 * Reads `read` until its ETag differs from `ifNoneMatch`, `waitMs` has passed, or `signal` fires
 * (client gone, server closing): at most one read per `recheckMs`, so a held request costs one
 * query a second however long it waits. Answers the last read; undefined once the pool is gone.
 */
export async function discoveryAfterWait(
  read: () => Promise<PoolDiscovery | undefined>,
  first: PoolDiscovery,
  ifNoneMatch: string | undefined,
  waitMs: number,
  recheckMs: number,
  signal: AbortSignal,
): Promise<PoolDiscovery | undefined> {
  const deadline = Date.now() + waitMs;
  let last: PoolDiscovery | undefined = first;
  while (last !== undefined && etagMatches(ifNoneMatch, last.etag) && !signal.aborted) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    try {
      await sleep(Math.min(recheckMs, left), undefined, { signal });
    } catch {
      break; // aborted: answer what was last read
    }
    last = await read();
  }
  return last;
}

/**
 * `fn` shared by the callers of one key: a read in flight, or one that answered less than `freshMs`
 * ago, is handed to the next caller instead of asking again, so many clients holding requests on
 * one pool cost about one query per interval between them, not one each.
 */
function sharedReads<T>(freshMs: number): (key: string, fn: () => Promise<T>) => Promise<T> {
  const recent = new Map<string, { at: number; value: Promise<T> }>();
  return (key, fn) => {
    const now = Date.now();
    const hit = recent.get(key);
    if (hit !== undefined && now - hit.at < freshMs) return hit.value;
    for (const [k, v] of recent) if (now - v.at >= freshMs) recent.delete(k);
    const value = fn();
    recent.set(key, { at: now, value });
    value.catch(() => recent.delete(key));
    return value;
  };
}

/** An AbortController that fires when the client of `reply` goes away before the answer. */
function onClientGone(reply: FastifyReply): AbortController {
  const ac = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  return ac;
}

export function registerOpsRoutes(app: FastifyInstance, o: OpsRoutesOptions): void {
  const { store } = o;
  const recheckMs = o.discoveryRecheckMs ?? DISCOVERY_RECHECK_MS;
  // Held discovery requests: a closing server answers them at once instead of waiting them out.
  const held = new Set<AbortController>();
  // Re-reads of held requests, shared per pool for half an interval.
  const shared = sharedReads<PoolStatus | undefined>(recheckMs / 2);
  app.addHook('preClose', (done) => {
    for (const ac of held) ac.abort();
    done();
  });

  app.get('/v1/providers', { schema: routeSchemas.providers }, async () => {
    const view = await store.providerHealth();
    if (view === undefined) {
      throw new ApiError(
        'NO_PROVIDER_HEALTH',
        'no provider-health result yet: a worker creates the schedule at start-up (unless --no-schedules), it first ' +
          'runs after hostHealthIntervalMs, and a run answers once a worker polls its task queue',
      );
    }
    return view;
  });

  app.get<{ Querystring: { entry?: string; pool?: string; wait?: number } }>(
    '/v1/discovery',
    { schema: routeSchemas.discovery },
    async (request, reply) => {
      const { wait } = request.query;
      if (request.query.pool !== undefined) {
        const [entry = '', pool = ''] = request.query.pool.split('/');
        // Both filters hold: a pool of another entry is not in this one.
        const other = request.query.entry !== undefined && request.query.entry !== entry;
        const read = async (again = false): Promise<PoolDiscovery | undefined> => {
          const pools = o.pools;
          if (pools === undefined || other) return undefined;
          // The first read is the request's own; a held request's re-reads are shared.
          const st = await (again
            ? shared(`${entry}/${pool}`, () => pools.poolStatus(entry, pool))
            : pools.poolStatus(entry, pool));
          return st === undefined ? undefined : poolDiscovery(st);
        };
        const notFound = (): ApiError => {
          const where = other ? ` in entry ${request.query.entry}` : '';
          return new ApiError('NOT_FOUND', `no pool ${entry}/${pool}${where} (no workflow pool/${entry}/${pool})`);
        };
        let found = await read();
        if (found === undefined) throw notFound();
        const ifNoneMatch = request.headers['if-none-match'];
        if (wait !== undefined && wait > 0 && etagMatches(ifNoneMatch, found.etag)) {
          const ac = onClientGone(reply);
          held.add(ac);
          try {
            found = await discoveryAfterWait(() => read(true), found, ifNoneMatch, wait * 1000, recheckMs, ac.signal);
          } finally {
            held.delete(ac);
          }
          // Deleted while the request was held.
          if (found === undefined) throw notFound();
        }
        const { etag, ...body } = found;
        void reply.header('etag', etag).header('cache-control', 'no-cache');
        if (etagMatches(ifNoneMatch, etag)) return reply.code(304).send();
        return body;
      }
      // `wait` is ignored here: unfiltered discovery has no ETag to wait on, so it answers at once.
      const query = listQuery({ state: 'Running', healthy: true, entry: request.query.entry, openOnly: true });
      const listed: ProxySummary[] = [];
      let token: Uint8Array | undefined;
      do {
        const page = await store.list(query, 1000, token);
        listed.push(...page.items);
        token = page.nextPageToken;
      } while (token !== undefined && listed.length < DISCOVERY_MAX);
      let skipped = 0;
      const now = Date.now();
      const found = await mapLimited(listed, DISCOVERY_CONCURRENCY, async (p) => {
        try {
          return discovered(await store.status(p.entry, p.name), now);
        } catch (err) {
          request.log.warn({ err, workflowId: p.workflowId }, 'discovery: status query failed; proxy left out');
          skipped++;
          return undefined;
        }
      });
      const proxies = found.filter((p): p is DiscoveredProxy => p !== undefined);
      proxies.sort((a, b) => a.entry.localeCompare(b.entry) || a.name.localeCompare(b.name));
      return { proxies, skipped };
    },
  );

  app.get('/healthz', { config: { public: true }, schema: routeSchemas.healthz }, () => ({ status: 'ok' }));

  app.get('/readyz', { config: { public: true }, schema: routeSchemas.readyz }, async (request, reply) => {
    try {
      const pollers = await store.pollers(o.taskQueue);
      const ready = pollers.workflow > 0 && pollers.activity > 0;
      return reply.code(ready ? 200 : 503).send({
        ready,
        temporal: 'reachable',
        taskQueue: o.taskQueue,
        pollers,
        ...(ready ? {} : { reason: `no worker polls task queue ${o.taskQueue}` }),
      });
    } catch (err) {
      request.log.warn({ err }, 'readiness: Temporal unreachable');
      return reply.code(503).send({
        ready: false,
        temporal: 'unreachable',
        taskQueue: o.taskQueue,
        reason: 'Temporal is unavailable or did not answer in time',
      });
    }
  });

  app.get('/metrics', { schema: routeSchemas.metrics }, async (_request, reply) => {
    const text = await o.registry.metrics();
    return reply.type(o.registry.contentType).send(text);
  });
}
