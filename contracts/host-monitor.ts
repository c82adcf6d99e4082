// The host monitor (docs/health.md "One monitor per host"): one workflow per provider entry and
// host, `health/<entry>/<host>`, whose one long-running activity polls and probes every Running
// proxy on that host that asked to be watched, heartbeats once per round for all of them, and
// signals each proxy's workflow only on its verdicts (the per-proxy monitor's: a transition, the VM
// gone, a boot out of time, the checkpoint). Proxies opt in with `providers[].health.monitor: host`.
import type { MonitorInput, MonitorReason, MonitorState } from './health.ts';

export const HOST_MONITOR_WORKFLOW_TYPE = 'hostMonitorWorkflow';
/**
 * The most proxies of an entry on one host when the entry's monitor is the host's: the default of
 * `maxProxies` there, and its maximum. One workflow carries every watch of the host in its
 * continue-as-new input (each about 1.5 KB, its state another 1 KB, in the recorded histories) and
 * one heartbeat carries their states; Temporal refuses a payload over 2 MB. 250 keeps the input
 * near 0.6 MB, with room for specs three times the recorded ones (docs/health.md).
 */
export const HOST_MONITOR_MAX_WATCHES = 250;
/** The activity type of the host monitor (client/health.ts reads its heartbeat). */
export const HOST_MONITOR_ACTIVITY = 'monitorHost';
export const HOST_WATCH_SIGNAL = 'watch';
export const HOST_UNWATCH_SIGNAL = 'unwatch';
export const HOST_WATCHES_QUERY = 'watches';
/** From the host monitor to a proxy workflow: a verdict of its watch. */
export const PROXY_MONITOR_VERDICT_SIGNAL = 'monitorVerdict';

export function hostMonitorWorkflowId(entry: string, host: string): string {
  return `health/${entry}/${host}`;
}

/** One proxy's watch: what its own monitor activity would have been given. */
export interface HostWatch {
  /** The proxy workflow's ID: verdicts are signalled there. */
  workflowId: string;
  /** New for each watch a proxy run starts (`<runId>/<n>`); a verdict carries it back, a stale one is ignored. */
  token: string;
  input: MonitorInput & { waitFirst?: boolean };
}

/** Ends a watch (delete, resize, move); ignored unless `token` is the proxy's current watch. */
export interface HostUnwatch {
  workflowId: string;
  token: string;
}

/** A verdict for one watch: the per-proxy monitor's result, with the watch's token and a sequence number. */
export interface HostVerdict {
  token: string;
  /** 1, 2, ... per watch; a proxy applies each once, in order. */
  seq: number;
  reason: MonitorReason;
  state: MonitorState;
  vmState?: string;
}

/** What the host monitor holds for one watch (in its heartbeat details, and carried over continue-as-new). */
export interface WatchState {
  token: string;
  /** Verdicts told so far. */
  seq: number;
  state: MonitorState;
  /** The watched values (contracts/health.ts `watched`) the proxy last heard of. */
  knownKey: string;
  /** Epoch ms of the next poll. */
  dueAtMs: number;
  /** A verdict that ends the watch (VmLost, BootTimeout, Checkpoint) was told, or the workflow is gone: not polled again. */
  done?: boolean;
}

/** The host monitor activity's heartbeat details: every watch's state, by proxy workflow ID. */
export interface HostMonitorDetails {
  watches: Record<string, WatchState>;
}

/** The registry the activity reads from its workflow (query): `watches` only when `version` moved. */
export interface HostWatches {
  version: number;
  watches?: HostWatch[];
  /** The workflow asks the activity to return so it can continue as new (its history is long). */
  checkpoint?: boolean;
}

export interface HostMonitorActivityInput {
  entry: string;
  host: string;
  /** Carried from the previous activity (continue-as-new, or its return). */
  states?: Record<string, WatchState>;
  /** Epoch ms: the activity returns then (a new worker build takes the loop up). */
  checkpointAtMs: number;
  /** With nothing due, the activity heartbeats at least this often (the watches' longest interval). */
  heartbeatEveryMs: number;
}

export interface HostMonitorActivityResult {
  reason: 'Checkpoint' | 'Idle';
  states: Record<string, WatchState>;
  /** Watches whose workflow is gone (closed without unwatching): the workflow drops them. */
  gone: string[];
}

export interface HostMonitorWorkflowInput {
  entry: string;
  host: string;
  /** Carried over continue-as-new. */
  watches?: HostWatch[];
  states?: Record<string, WatchState>;
}
