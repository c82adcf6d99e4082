/**
 * Which way the health probe reaches a guest (`health.via`, docs/health.md "Probe path"): straight
 * over TCP from the worker (`direct`) or through the guest's host's SSH connection (`ssh`,
 * `direct-tcpip` to the guest). `auto` decides from the worker's own routing table, never by
 * trying a connection: direct only when the kernel's route lookup of the guest's address (`ip
 * route get`, which sends nothing) names an interface that carries no default route, i.e. the
 * operator routed the guest network to the worker (a routed or bridged libvirt network, a VPN, a
 * static route; the test hosts' veth). An address that would leave by a default route's
 * interface, an unroutable one, or any failure to look up goes through SSH. So `auto` cannot
 * send a probe out of the default route: a NAT guest's private address, which the worker could
 * only reach through its host, is never tried directly.
 */
import { execFile } from 'node:child_process';
import { isIP } from 'node:net';

/** The values of `health.via`. */
export const HEALTH_VIA = ['auto', 'direct', 'ssh'] as const;
export type HealthVia = (typeof HEALTH_VIA)[number];

/** The path one probe takes, and why (logged when it changes). */
export interface ProbePath {
  via: 'direct' | 'ssh';
  /** The interface the kernel picked for the guest's address, when it was looked up. */
  dev?: string;
  reason: string;
}

/** What the route lookup of one address found. */
export interface RouteAnswer {
  /** The interface `ip route get` named; undefined when there is no route or the lookup failed. */
  dev?: string;
  /** Interfaces of every default route (IPv4 and IPv6, all tables). */
  defaultDevs: readonly string[];
  /** Why `dev` is missing (no route, `ip` failed). */
  error?: string;
}

/** The probe path for `ip` under `via`, from the route lookup `route` (pure). */
export function chooseProbePath(via: HealthVia, ip: string, route: RouteAnswer | undefined): ProbePath {
  if (via === 'ssh') return { via: 'ssh', reason: 'health.via is ssh' };
  if (via === 'direct') {
    return route?.dev === undefined
      ? { via: 'direct', reason: 'health.via is direct' }
      : { via: 'direct', dev: route.dev, reason: 'health.via is direct' };
  }
  if (route === undefined) return { via: 'ssh', reason: `the route to ${ip} was not looked up` };
  const { dev, defaultDevs } = route;
  if (dev === undefined) {
    return { via: 'ssh', reason: `no route to ${ip} on the worker${route.error ? ` (${route.error})` : ''}` };
  }
  if (defaultDevs.includes(dev)) {
    return { via: 'ssh', dev, reason: `the route to ${ip} leaves by ${dev}, a default route's interface` };
  }
  return { via: 'direct', dev, reason: `the route to ${ip} goes through ${dev}, which carries no default route` };
}

/** The `dev` of `ip -j route get ADDR`'s answer (undefined if it names none). */
export function parseRouteGet(json: string): string | undefined {
  const parsed: unknown = JSON.parse(json);
  const first: unknown = Array.isArray(parsed) ? parsed[0] : undefined;
  const dev = (first as { dev?: unknown } | undefined)?.dev;
  return typeof dev === 'string' && dev !== '' ? dev : undefined;
}

/** The interfaces of the routes in `ip -j route show default table all`'s answer. */
export function parseDefaultRoutes(json: string): string[] {
  const parsed: unknown = JSON.parse(json);
  if (!Array.isArray(parsed)) return [];
  const devs = new Set<string>();
  for (const r of parsed as { dev?: unknown; nexthops?: { dev?: unknown }[] }[]) {
    if (typeof r.dev === 'string') devs.add(r.dev);
    // A multipath default route names its interfaces per next hop.
    for (const hop of Array.isArray(r.nexthops) ? r.nexthops : []) if (typeof hop.dev === 'string') devs.add(hop.dev);
  }
  return [...devs];
}

/** Runs `ip` with `args` and resolves with its standard output (rejects on failure or timeout). */
export type IpRunner = (args: readonly string[]) => Promise<string>;

/** How long a route lookup may take, in ms. */
export const ROUTE_LOOKUP_TIMEOUT_MS = 2_000;

const runIp: IpRunner = (args) =>
  new Promise((resolve, reject) => {
    execFile('ip', [...args], { timeout: ROUTE_LOOKUP_TIMEOUT_MS, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(' ')}: ${String(stderr).trim() || err.message}`));
      else resolve(String(stdout));
    });
  });

export interface RouteTableOptions {
  /** Runs `ip` (tests pass their own answers). */
  run?: IpRunner;
  /** How long one lookup is reused, in ms (default 30 s; routes change rarely, probes run every few seconds). */
  ttlMs?: number;
  now?: () => number;
}

/**
 * The worker's route lookups, each reused for `ttlMs` (default 30 s): the route to an address (one
 * `ip` run per address and TTL) and the default routes' interfaces (one run per TTL for all). A lookup that fails is an answer without `dev` (the probe then
 * goes through SSH), never an exception.
 */
export class RouteTable {
  readonly #run: IpRunner;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { at: number; answer: Promise<RouteAnswer> }>();
  /** The default routes' interfaces: one lookup for every address within the TTL. */
  #defaults: { at: number; devs: Promise<string[]> } | undefined;

  constructor(options: RouteTableOptions = {}) {
    this.#run = options.run ?? runIp;
    this.#ttlMs = options.ttlMs ?? 30_000;
    this.#now = options.now ?? Date.now;
  }

  /** The route to `ip` and the default routes' interfaces (cached). */
  lookup(ip: string): Promise<RouteAnswer> {
    if (isIP(ip) === 0)
      return Promise.resolve({ defaultDevs: [], error: `${JSON.stringify(ip)} is not an IP address` });
    const now = this.#now();
    const hit = this.#cache.get(ip);
    if (hit && now - hit.at < this.#ttlMs) return hit.answer;
    if (this.#cache.size > 4096) this.#cache.clear();
    const answer = this.#lookup(ip);
    this.#cache.set(ip, { at: now, answer });
    return answer;
  }

  /** The path of a probe to `ip` under `via` (the route is looked up only for `auto`). */
  async pathFor(via: HealthVia, ip: string): Promise<ProbePath> {
    return chooseProbePath(via, ip, via === 'auto' ? await this.lookup(ip) : undefined);
  }

  #defaultDevs(): Promise<string[]> {
    const now = this.#now();
    if (this.#defaults && now - this.#defaults.at < this.#ttlMs) return this.#defaults.devs;
    const devs = this.#run(['-j', 'route', 'show', 'default', 'table', 'all']).then(parseDefaultRoutes);
    // A failed read is not kept: the next lookup reads again.
    devs.catch(() => {
      if (this.#defaults?.devs === devs) this.#defaults = undefined;
    });
    this.#defaults = { at: now, devs };
    return devs;
  }

  async #lookup(ip: string): Promise<RouteAnswer> {
    let defaultDevs: string[];
    try {
      defaultDevs = await this.#defaultDevs();
    } catch (err) {
      return { defaultDevs: [], error: `the default routes could not be read: ${message(err)}` };
    }
    try {
      const dev = parseRouteGet(await this.#run(['-j', 'route', 'get', ip]));
      return dev === undefined ? { defaultDevs, error: 'the lookup named no interface' } : { dev, defaultDevs };
    } catch (err) {
      return { defaultDevs, error: message(err) };
    }
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Whether this machine reaches `ip` straight over TCP under the entry's `health.via` (`direct`: the
 * operator says so; otherwise the `auto` rule of {@link chooseProbePath}, even for `ssh`, which
 * is about the probe only): what `egressctl proxy up` asks before printing a `curl` line to run
 * here rather than on the host.
 */
export async function reachesDirectly(ip: string, via: string | undefined): Promise<boolean> {
  return (await new RouteTable().pathFor(via === 'direct' ? 'direct' : 'auto', ip)).via === 'direct';
}
