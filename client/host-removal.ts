// The worker's start-up guard against a host removed from the providers file while proxies live on
// it: the open proxy workflows of the worker's task queue (visibility: their ProviderEntry and
// ProxyHost search attributes) compared with the hosts the file has. A proxy whose host is gone
// would fail every call its workflow makes to it (health probes, recreation, delete), so the
// worker refuses to start and names them; the fix is a drain first (docs/operator-guide.md,
// "Removing a host"). The comparison is a pure function; the listing runs under client/
// connection.ts withDeadline, page by page, with a bound on how many proxies are read.
import type { Client } from '@temporalio/client';
import { DEFAULT_CALL_TIMEOUT_MS } from './connection.ts';
import { listQuery, temporalStore, visibilityLiteral } from './store.ts';

/** A provider entry of the providers file and the names of its hosts. */
export interface ConfiguredEntry {
  entry: string;
  hosts: readonly string[];
}

/** An open proxy workflow and the host its search attributes name. */
export interface PlacedProxy {
  entry: string;
  name: string;
  host: string;
}

/** A host the file no longer has, with the open proxies on it (sorted by name). */
export interface StrandedHost {
  entry: string;
  host: string;
  /** The whole entry is gone from the file, not only the host. */
  entryRemoved: boolean;
  proxies: string[];
}

/** Proxy names a message lists per host before "(and K more)". */
export const STRANDED_NAMES_SHOWN = 5;
/** Open proxies read at most (pages of 1000); past it the check says it is partial. */
export const STRANDED_READ_MAX = 100_000;
const PAGE_SIZE = 1000;

/**
 * The hosts of `proxies` that `configured` does not have (or whose entry it does not have),
 * sorted by entry then host, each with its proxies sorted by name. Proxies without a host (not
 * placed yet) are not passed in: they are placed on the hosts the file has.
 */
export function strandedHosts(configured: readonly ConfiguredEntry[], proxies: readonly PlacedProxy[]): StrandedHost[] {
  const known = new Map(configured.map((e) => [e.entry, new Set(e.hosts)]));
  const out = new Map<string, StrandedHost>();
  for (const p of proxies) {
    const hosts = known.get(p.entry);
    if (hosts?.has(p.host)) continue;
    const key = `${p.entry}/${p.host}`;
    let s = out.get(key);
    if (s === undefined)
      out.set(key, (s = { entry: p.entry, host: p.host, entryRemoved: hosts === undefined, proxies: [] }));
    s.proxies.push(p.name);
  }
  for (const s of out.values()) s.proxies.sort();
  return [...out.values()].sort((a, b) => a.entry.localeCompare(b.entry) || a.host.localeCompare(b.host));
}

/** `items` joined, the first `shown` of them, then "(and K more)" when there are more. */
function listed(items: readonly string[], shown: number): string {
  const head = items.slice(0, shown).join(', ');
  return items.length > shown ? `${head} (and ${items.length - shown} more)` : head;
}

/**
 * What the worker says when it refuses: each host (entry/host), up to `shown` proxy names per host
 * with "(and K more)", and the fix. `file` is the providers file's path.
 */
export function hostRemovalMessage(
  stranded: readonly StrandedHost[],
  file: string,
  shown = STRANDED_NAMES_SHOWN,
): string {
  const total = stranded.reduce((n, s) => n + s.proxies.length, 0);
  const hosts = stranded.map((s) => {
    const where = s.entryRemoved
      ? `${s.entry}/${s.host} (entry ${s.entry} is not in the file)`
      : `${s.entry}/${s.host}`;
    const n = s.proxies.length;
    return `${where}: ${n} ${n === 1 ? 'proxy' : 'proxies'} ${listed(s.proxies, shown)}`;
  });
  const first = stranded[0];
  const drain = first === undefined ? 'ENTRY/HOST' : `${first.entry}/${first.host}`;
  return (
    `${file} no longer has ${stranded.length === 1 ? 'a host' : `${stranded.length} hosts`} that ${total} open ` +
    `${total === 1 ? 'proxy lives' : 'proxies live'} on: ${listed(hosts, shown)}. Their workflows would fail ` +
    `every call to the host (health checks, recreation, delete). Drain first: put the host back in ${file}, ` +
    `start the worker, run egressctl host drain ${drain} (pool members are replaced on other hosts, standalone ` +
    `proxies moved), and remove the host once it has no proxies; or delete those proxies (egressctl proxy delete). ` +
    `--allow-removed-hosts starts the worker anyway.`
  );
}

/** The worker refused to start: `stranded` are the hosts the providers file lost while proxies live on them. */
export class HostRemovedError extends Error {
  override readonly name = 'HostRemovedError';
  readonly code = 'HOSTS_REMOVED_WITH_PROXIES';
  readonly stranded: StrandedHost[];
  constructor(stranded: StrandedHost[], file: string) {
    super(hostRemovalMessage(stranded, file));
    this.stranded = stranded;
  }
}

/** The visibility query of the open proxy workflows of `taskQueue`. */
export function openProxiesQuery(taskQueue: string): string {
  return `${listQuery({ openOnly: true })} AND TaskQueue = ${visibilityLiteral(taskQueue)}`;
}

export interface StrandedCheck {
  stranded: StrandedHost[];
  /** Open proxies read. */
  read: number;
  /** More than `STRANDED_READ_MAX` were open: the rest were not compared. */
  partial: boolean;
}

/**
 * The open proxy workflows of `taskQueue` (the ones this worker would run) whose host or entry
 * `configured` does not have. Each page is one visibility call under `callTimeoutMs`; a server
 * that does not answer is a TemporalUnavailableError. Visibility can lag a workflow's own upsert
 * (about a second on Elasticsearch; the dev server's SQLite at once), so a proxy placed in the
 * last moment by another worker may be missed: cordon a host before removing it.
 */
export async function findStrandedProxies(
  client: Client,
  taskQueue: string,
  configured: readonly ConfiguredEntry[],
  o: { callTimeoutMs?: number; readMax?: number } = {},
): Promise<StrandedCheck> {
  const store = temporalStore(client, { callTimeoutMs: o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS });
  const readMax = o.readMax ?? STRANDED_READ_MAX;
  const query = openProxiesQuery(taskQueue);
  const placed: PlacedProxy[] = [];
  let read = 0;
  let token: Uint8Array | undefined;
  do {
    const page = await store.list(query, Math.min(PAGE_SIZE, readMax), token);
    read += page.items.length;
    for (const p of page.items) if (p.host !== undefined) placed.push({ entry: p.entry, name: p.name, host: p.host });
    token = page.nextPageToken;
  } while (token !== undefined && read < readMax);
  return { stranded: strandedHosts(configured, placed), read, partial: token !== undefined };
}
