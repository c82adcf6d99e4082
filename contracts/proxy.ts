// The proxy lifecycle workflow's contract with its clients (API, CLI, tests): workflow ID, input,
// the state it reports, and the names of its query and updates (their define* objects, which
// clients pass to query and update, are in messages.ts). Plain JSON and constants only:
// workflows, activities and clients all import this file.
import type { ResolvedSquid, SquidOverrides } from './squid.ts';

export type { ResolvedSquid, SquidOverrides } from './squid.ts';

/** Workflow type of the proxy lifecycle (its exported function name). */
export const PROXY_WORKFLOW_TYPE = 'proxyLifecycle';
/** Name of the `status` query. */
export const PROXY_STATUS_QUERY = 'status';
/** Name of the `delete` update: returns once the deletion is accepted. */
export const PROXY_DELETE_UPDATE = 'delete';
/** Name of the `resize` update: waits until Running, then applies the size with a restart. */
export const PROXY_RESIZE_UPDATE = 'resize';

/** The workflow ID of a proxy: one workflow per (provider entry, proxy name). */
export function proxyWorkflowId(entry: string, name: string): string {
  return `proxy/${entry}/${name}`;
}

/** Every state of a proxy, in lifecycle order (the API's enum and metrics read this list). */
export const PROXY_STATES = [
  'Pending',
  'WaitingForCapacity',
  'Provisioning',
  'Booting',
  'Running',
  'Deleting',
  'Deleted',
  'Failed',
] as const;

export type ProxyState = (typeof PROXY_STATES)[number];

/** A VM size; omitted fields take the provider entry's `vm` settings. */
export interface VmSize {
  vcpus?: number;
  memoryMiB?: number;
  diskGiB?: number;
}

/** What a client passes to start a proxy. */
export interface ProxySpec {
  /** Proxy name: a lowercase identifier, unique within the entry (also the guest's hostname). */
  name: string;
  /** Provider entry (from the providers file). */
  entry: string;
  /** Image key within the entry's `images`. */
  imageKey: string;
  vm?: VmSize;
  squid?: SquidOverrides;
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** One condition (Kubernetes style): its status, why, and when it last changed. */
export interface Condition {
  status: ConditionStatus;
  reason: string;
  message?: string;
  /** RFC 3339 time of the last status change. */
  since: string;
}

/** The conditions a proxy reports. */
export interface ProxyConditions {
  /** The VM runs (libvirt state running). */
  VmRunning: Condition;
  /** An IPv4 address was read for the VM (kept through short agent outages: H3). */
  AddressAssigned: Condition;
  /** CONNECT probes through the proxy's Squid pass (with hysteresis). */
  Healthy: Condition;
}

export interface HealthCounters {
  /** Consecutive passing probes (reset by a failure). */
  consecutiveOk: number;
  /** Consecutive failing probes (reset by a pass). */
  consecutiveFailed: number;
  totalOk: number;
  totalFailed: number;
  /** Latency of the last passing probe, in ms. */
  lastLatencyMs?: number;
  /** RFC 3339 time of the last probe. */
  lastProbeAt?: string;
  /** The last failing probe's error code and message. */
  lastError?: string;
  /** RFC 3339 time of the last exit-IP read that answered an address. */
  exitIpAt?: string;
  /** The last exit-IP read's error (`CODE: message`), until a read answers again. */
  exitIpError?: string;
}

export interface ProxyError {
  /** `Transient`, `Permanent` or `NotFound`, from the error table (docs/errors.md). */
  kind: string;
  /** The error's stable code (docs/errors.md). */
  code: string;
  message: string;
  /** RFC 3339 time. */
  at: string;
}

/** Image progress while the base is being uploaded to the proxy's host. */
export interface ImageProgressStatus {
  /** The ensure-image workflow this proxy waits on. */
  workflowId: string;
  bytes: number;
  totalBytes: number;
  bytesPerSecond: number;
}

/** What the `status` query returns. */
export interface ProxyStatus {
  name: string;
  entry: string;
  imageKey: string;
  state: ProxyState;
  /** The host the proxy was placed on (kept across retries and recreation). */
  host?: string;
  /** The guest's IPv4 address (the last one read, held through short agent outages). */
  ip?: string;
  /**
   * The address destinations see when the proxy connects out, as `health.egressIpUrl` answered it
   * through the proxy (absent without that URL, or before the first read).
   */
  exitIp?: string;
  /** Squid's port on the guest. */
  port: number;
  vm: Required<VmSize>;
  conditions: ProxyConditions;
  health: HealthCounters;
  /** Why the proxy waits, failed or was recreated, in words. */
  reason?: string;
  lastError?: ProxyError;
  image?: ImageProgressStatus;
  /** How often the VM was recreated after disappearing or failing under a Running proxy. */
  recreations: number;
  /** The pool this proxy is a member of, and whether the pool has it in discovery. */
  pool?: { workflowId: string; serving: boolean };
  /** The console log's last lines, when boot failed. */
  consoleTail?: string[];
  /** RFC 3339 times. */
  createdAt: string;
  updatedAt: string;
  runningSince?: string;
  deletedAt?: string;
}

/** Result of the `delete` update: the deletion is accepted (the workflow completes once it is done). */
export interface DeleteAccepted {
  accepted: true;
  /** The state the proxy was in when the deletion was accepted. */
  fromState: ProxyState;
}

/** What the proxy workflow returns when it completes. */
export interface ProxyOutcome {
  state: 'Deleted' | 'Failed';
  host?: string;
  reason?: string;
  /** What the final delete removed ('deleted') or found gone ('absent'). */
  deleted?: { domain: string; overlay: string; seed: string; ownerRecord?: string; logs?: string };
}

/** A proxy spec resolved against the providers file on the worker (recorded in the history). */
export interface ResolvedProxy {
  ownerUid: string;
  name: string;
  entry: string;
  imageKey: string;
  hosts: { name: string; weight: number }[];
  vm: Required<VmSize>;
  squid: ResolvedSquid;
  timeouts: { rpcMs: number; bootMs: number; shutdownGraceMs: number; downloadTotalMs: number };
  health: {
    target?: string;
    intervalMs: number;
    probeTimeoutMs: number;
    healthyAfter: number;
    unhealthyAfter: number;
    addressGracePolls: number;
    maxRecreations: number;
    /** A URL whose body is the caller's address, read through the proxy (absent in runs resolved before it). */
    egressIpUrl?: string;
    /** How often the exit IP is read again, in ms. */
    egressIpIntervalMs?: number;
    /** How the probe reaches the guest (lib/probe/route.ts; absent in runs resolved before it: auto). */
    via?: 'auto' | 'direct' | 'ssh';
    /** Who polls and probes: one monitor per proxy (absent or `proxy`) or its host's monitor (`host`, contracts/host-monitor.ts). */
    monitor?: HealthMonitor;
  };
}

/** Who polls and probes a Running proxy (`providers[].health.monitor`, docs/health.md). */
export const HEALTH_MONITORS = ['proxy', 'host'] as const;
export type HealthMonitor = (typeof HEALTH_MONITORS)[number];

/** One read of the VM (activity `readProxyVm`). */
export interface VmReading {
  state: 'Provisioning' | 'Running' | 'Stopped' | 'Failed' | 'Missing';
  /** The IPv4 address read, if any (undefined: no address yet). */
  ip?: string;
  /** Which source gave it. */
  source?: string;
}

/**
 * One health probe's outcome (activity `probeProxy`); failures are data, not errors. A passing
 * probe asked to read the exit IP carries the address (`exitIp`) or why the read failed
 * (`exitIpError`, `CODE: message`; the probe still passes).
 */
export type ProbeOutcome =
  { ok: true; latencyMs: number; exitIp?: string; exitIpError?: string } | { ok: false; code: string; message: string };
