// Plain-JSON results of the fleet-wide workflows (orphan GC, provider health) and the IDs of the
// Temporal Schedules that run them.

export const GC_WORKFLOW_TYPE = 'orphanGcWorkflow';
export const HEALTH_WORKFLOW_TYPE = 'providerHealthWorkflow';
/** Schedule IDs the worker creates (or updates) at start-up. */
export const GC_SCHEDULE_ID = 'egress-proxies-orphan-gc';
export const HEALTH_SCHEDULE_ID = 'egress-proxies-provider-health';
/** Query name both fleet workflows answer with their result so far. */
export const FLEET_RESULT_QUERY = 'result';

/** Default `memoryOvercommit` of a host: no overcommit (a guest that touches all its memory gets it). */
export const DEFAULT_MEMORY_OVERCOMMIT = 1;
/**
 * Default `cpuOvercommit` of a host: vCPUs are time-shared and a proxy's Squid mostly waits on the
 * network, so 4 vCPUs per CPU (OpenStack's initial CPU allocation ratio, as 1.0 is its RAM one).
 */
export const DEFAULT_CPU_OVERCOMMIT = 4;
/**
 * Domain starts at once on a host whose `maxConcurrentStarts` is not set while its CPU count cannot
 * be read (it is read before the first start; the default is one start per CPU, docs/benchmarks.md
 * "Domain starts at once").
 */
export const FALLBACK_MAX_CONCURRENT_STARTS = 1;

/** One host as seen by a health survey (placement and the provider-health schedule). */
export interface HostSurvey {
  entry: string;
  host: string;
  weight: number;
  reachable: boolean;
  /** Round trip of a trivial libvirt call, in ms. */
  rttMs?: number;
  libvirtVersion?: string;
  hypervisorVersion?: string;
  poolAvailableBytes?: number;
  poolCapacityBytes?: number;
  /** Domains carrying this installation's mark for the entry. */
  proxies?: number;
  /**
   * Capacity (absent in surveys recorded before placement read it; a missing figure never keeps
   * a proxy off a host). Memory from NODE_GET_INFO, free memory (free + buffers + cache) from
   * NODE_GET_MEMORY_STATS, committed = the maximum memory and vCPUs of every active domain on the
   * host, ours and others'.
   */
  memoryTotalMiB?: number;
  memoryFreeMiB?: number;
  memoryCommittedMiB?: number;
  cpus?: number;
  vcpusCommitted?: number;
  /** The host's limits from the providers file: committed + need ≤ total × overcommit. */
  memoryOvercommit?: number;
  cpuOvercommit?: number;
  /** At most this many of our proxies on the host (absent: no limit). */
  maxProxies?: number;
  /** The host is cordoned (its maintenance workflow says so): placement never picks it. */
  cordoned?: boolean;
  /** Why the host is unreachable: `code: message`. */
  error?: string;
}

export interface ProviderHealthResult {
  /** RFC 3339 time the survey was taken (workflow time). */
  at: string;
  entries: { entry: string; ready: number; total: number; hosts: HostSurvey[] }[];
}

export interface GcHostResult {
  entry: string;
  host: string;
  /** Domains kept: their proxy's workflow is open, or they are younger than the minimum age. */
  kept: string[];
  deleted: string[];
  /** Domains the adoption guard refused (should not happen: listing filters by mark). */
  refused: string[];
  /**
   * Per-proxy volumes without a domain (overlay, seed, owner record), by proxy: kept (young, or
   * the proxy's workflow is open) and deleted. Absent in runs before the GC collected volumes.
   */
  volumes?: { kept: string[]; deleted: string[] };
  error?: string;
}

/** One proxy's volumes left without a domain, carrying our owner record (the GC's listing). */
export interface OrphanVolumeSet {
  name: string;
  /** The owner record's `createdAt` (RFC 3339). */
  createdAt: string;
  volumes: string[];
}

export interface GcResult {
  at: string;
  minAgeMs: number;
  hosts: GcHostResult[];
}
