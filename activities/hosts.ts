// The worker's view of the fleet: the providers file, read once at start-up, and one HostLinks
// per configured host (pooled RPC link plus dedicated links), shared by every activity in the
// process. Activities never dial on their own: they ask this registry.
import type { SshSession } from '../lib/ssh/session.ts';
import { HostLinks } from '../lib/hostlink/pool.ts';
import type { Link } from '../lib/hostlink/pool.ts';
import type { HostConfig, ProviderEntry, ProvidersConfig } from '../lib/config/index.ts';
import { hostLinksOptions, hostTarget } from '../lib/kvm2/index.ts';
import type { LineLogger } from '../lib/log/line-logger.ts';
import { ProxySpecError } from './errors.ts';
import { meteringLogger, meterLinks } from './metrics.ts';
import type { WorkerMetrics } from './metrics.ts';

const SILENT: LineLogger = { info: () => undefined, warn: () => undefined };

export interface RegisteredHost {
  entry: ProviderEntry;
  host: HostConfig;
  links: HostLinks;
}

export class HostRegistry {
  readonly config: ProvidersConfig;
  readonly #hosts = new Map<string, RegisteredHost>();
  /** One long-lived health link per host for probes (SSH channels to guests). */
  readonly #probeLinks = new Map<string, Promise<Link>>();
  #closed = false;

  constructor(config: ProvidersConfig, logger?: LineLogger, metrics?: WorkerMetrics) {
    this.config = config;
    // With metrics, the links always get a logger: its one line per libvirt call feeds the RPC histogram.
    const linkLogger = metrics ? meteringLogger(logger ?? SILENT, metrics) : logger;
    for (const entry of config.providers) {
      for (const host of entry.hosts) {
        const links = new HostLinks(hostTarget(entry, host), hostLinksOptions(entry, host, linkLogger));
        if (logger) watchLinks(links, logger);
        if (metrics) meterLinks(links, metrics);
        this.#hosts.set(key(entry.name, host.name), { entry, host, links });
      }
    }
  }

  get ownerUid(): string {
    return this.config.ownerUid;
  }

  /** The entry named `name`, or a ProxySpecError naming the field and the known entries. */
  entry(name: string, field = 'entry'): ProviderEntry {
    const found = this.config.providers.find((p) => p.name === name);
    if (!found) {
      const known = this.config.providers.map((p) => p.name).join(', ');
      throw new ProxySpecError(
        field,
        `no provider entry ${JSON.stringify(name)} in the providers file (known: ${known})`,
      );
    }
    return found;
  }

  host(entry: string, host: string): RegisteredHost {
    const found = this.#hosts.get(key(entry, host));
    if (!found) {
      const known = this.entry(entry)
        .hosts.map((h) => h.name)
        .join(', ');
      throw new ProxySpecError('host', `entry ${entry} has no host ${JSON.stringify(host)} (known: ${known})`);
    }
    return found;
  }

  /** Every host of `entry`. */
  hosts(entry: string): RegisteredHost[] {
    return this.entry(entry).hosts.map((h) => this.host(entry, h.name));
  }

  /** The SSH session of the host's probe link, dialled on first use and again after it died. */
  async probeSession(entry: string, host: string, signal?: AbortSignal): Promise<SshSession> {
    const k = key(entry, host);
    const cached = this.#probeLinks.get(k);
    if (cached) {
      const link = await cached.catch(() => undefined);
      if (link && !link.isDead) return link.session;
      if (this.#probeLinks.get(k) === cached) this.#probeLinks.delete(k);
    }
    if (this.#closed) throw new Error('the host registry is closed');
    const dialing = this.host(entry, host).links.dedicated('health', signal);
    this.#probeLinks.set(k, dialing);
    dialing.catch(() => {
      if (this.#probeLinks.get(k) === dialing) this.#probeLinks.delete(k);
    });
    return (await dialing).session;
  }

  /** Kills every link at once (never waits on a polite close). */
  close(reason = new Error('the worker is shutting down')): void {
    this.#closed = true;
    for (const h of this.#hosts.values()) h.links.close(reason);
    this.#probeLinks.clear();
  }
}

/** Logs link churn: failed dials, deaths with their reason, redials (one JSON line each). */
function watchLinks(links: HostLinks, logger: LineLogger): void {
  const host = links.target.name;
  links.on('dial', (e) => {
    if (e.error)
      logger.warn({ host, link: e.purpose, durationMs: e.durationMs, err: e.error.message }, 'link dial failed');
  });
  links.on('death', (e) => {
    logger.warn({ host, link: e.purpose, ageMs: e.ageMs, reason: e.reason.message }, 'link died');
  });
  links.on('redial', (e) => {
    logger.info({ host, previousReason: e.previousReason.message }, 'redialling the pooled link');
  });
}

function key(entry: string, host: string): string {
  return `${entry}/${host}`;
}
