// Every query, signal and update of the project's workflows, defined once. Workflows set their
// handlers on these objects and clients pass the same objects to query, signal and update, so a
// message's name and types cannot drift apart. The names come from the contract files; they are
// recorded in histories, so they never change.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { GcResult, ProviderHealthResult } from './fleet.ts';
import { FLEET_RESULT_QUERY } from './fleet.ts';
import type { HostActionRequest, HostDrainNotice, HostStatus, ProxyMoveRequest } from './host.ts';
import {
  HOST_CORDON_UPDATE,
  HOST_DRAIN_UPDATE,
  HOST_STATUS_QUERY,
  HOST_UNCORDON_UPDATE,
  POOL_HOST_DRAIN_SIGNAL,
  PROXY_MOVE_UPDATE,
} from './host.ts';
import type { HostUnwatch, HostVerdict, HostWatch, HostWatches } from './host-monitor.ts';
import {
  HOST_UNWATCH_SIGNAL,
  HOST_WATCH_SIGNAL,
  HOST_WATCHES_QUERY,
  PROXY_MONITOR_VERDICT_SIGNAL,
} from './host-monitor.ts';
import type { ImageJoin, ImageProgressSignal, ImageResult, ImageStatus } from './image.ts';
import {
  IMAGE_JOIN_SIGNAL,
  IMAGE_LEAVE_SIGNAL,
  IMAGE_PROGRESS_SIGNAL,
  IMAGE_READY_SIGNAL,
  IMAGE_STATUS_QUERY,
} from './image.ts';
import type {
  DoorReport,
  MemberReport,
  PoolSpecPatch,
  PoolStatus,
  PoolBrief,
  ReplaceMemberRequest,
  RollbackRequest,
  ScaleRequest,
} from './pool.ts';
import {
  MEMBER_SERVING_SIGNAL,
  POOL_DELETE_UPDATE,
  POOL_DOOR_SIGNAL,
  POOL_MEMBER_SIGNAL,
  POOL_PAUSE_UPDATE,
  POOL_REPLACE_MEMBER_UPDATE,
  POOL_RESUME_UPDATE,
  POOL_ROLLBACK_UPDATE,
  POOL_SCALE_UPDATE,
  POOL_SPEC_UPDATE,
  POOL_STATUS_QUERY,
} from './pool.ts';
import type { DeleteAccepted, ProxyStatus, VmSize } from './proxy.ts';
import { PROXY_DELETE_UPDATE, PROXY_RESIZE_UPDATE, PROXY_STATUS_QUERY } from './proxy.ts';

// ---- the proxy workflow -------------------------------------------------------------------

/** The proxy's current status. */
export const proxyStatusQuery = defineQuery<ProxyStatus>(PROXY_STATUS_QUERY);
/** Deletes the proxy: returns once the deletion is accepted (the workflow ends when it is done). */
export const proxyDeleteUpdate = defineUpdate<DeleteAccepted>(PROXY_DELETE_UPDATE);
/** Resizes a Running proxy (restart included): returns the status with the new size. */
export const proxyResizeUpdate = defineUpdate<ProxyStatus, [VmSize]>(PROXY_RESIZE_UPDATE);

/** Moves a Running standalone proxy off its host (a drain): returns once the move is accepted. */
export const proxyMoveUpdate = defineUpdate<ProxyStatus, [ProxyMoveRequest]>(PROXY_MOVE_UPDATE);

/** From its host's monitor: a verdict of the proxy's watch (docs/health.md "One monitor per host"). */
export const proxyMonitorVerdictSignal = defineSignal<[HostVerdict]>(PROXY_MONITOR_VERDICT_SIGNAL);

/** From a pool to its member: whether the member is in discovery (`serving`). */
export const memberServingSignal = defineSignal<[{ serving: boolean }]>(MEMBER_SERVING_SIGNAL);

// ---- the pool workflow (docs/pools.md) ------------------------------------------------------

/** The pool's status: spec, counts, rollout, members. */
export const poolStatusQuery = defineQuery<PoolStatus>(POOL_STATUS_QUERY);
/** From a member: its summary changed. */
export const poolMemberSignal = defineSignal<[MemberReport]>(POOL_MEMBER_SIGNAL);
/** The pool's door service → pool: the door's address and exits, on every change (shown in the status). */
export const poolDoorSignal = defineSignal<[DoorReport]>(POOL_DOOR_SIGNAL);
/** Sets the size (and spares); refused beyond the limits. Returns the status after the change. */
export const poolScaleUpdate = defineUpdate<PoolBrief, [ScaleRequest]>(POOL_SCALE_UPDATE);
/** Changes the spec; a new template starts a rollout. Refused when the result is not valid. */
export const poolSpecUpdate = defineUpdate<PoolBrief, [PoolSpecPatch]>(POOL_SPEC_UPDATE);
/** Pauses the rollout (failed members are still replaced). */
export const poolPauseUpdate = defineUpdate<PoolBrief>(POOL_PAUSE_UPDATE);
export const poolResumeUpdate = defineUpdate<PoolBrief>(POOL_RESUME_UPDATE);
/** Rolls back to the given revision, or the last stable one; refused when there is none. */
export const poolRollbackUpdate = defineUpdate<PoolBrief, [RollbackRequest]>(POOL_ROLLBACK_UPDATE);
/** Deletes the pool and its members; the workflow ends once they are deleted. */
export const poolDeleteUpdate = defineUpdate<PoolBrief>(POOL_DELETE_UPDATE);
/**
 * Replaces one member on request (a banned exit): it leaves discovery at once and a replacement is
 * made (a spare promoted first). Refused by the validator (nothing in the history) for an unknown
 * member, one already leaving, an empty or overlong reason, a pool being deleted, and past
 * `replacement.requestedPerHour` in a sliding hour.
 */
export const poolReplaceMemberUpdate = defineUpdate<PoolBrief, [ReplaceMemberRequest]>(POOL_REPLACE_MEMBER_UPDATE);

// ---- the ensure-image workflow and its waiters (proxies, warm) -----------------------------

/** To the ensure-image workflow: a waiter (`{ waiter }`, its workflow ID) waits on the image. */
export const imageJoinSignal = defineSignal<[ImageJoin]>(IMAGE_JOIN_SIGNAL);
/** To the ensure-image workflow: a waiter no longer waits; the last one out aborts the upload. */
export const imageLeaveSignal = defineSignal<[ImageJoin]>(IMAGE_LEAVE_SIGNAL);
/** The ensure-image workflow's waiters and result so far. */
export const imageStatusQuery = defineQuery<ImageStatus>(IMAGE_STATUS_QUERY);
/** To each waiter: the image is ready, or failed. */
export const imageReadySignal = defineSignal<[ImageResult]>(IMAGE_READY_SIGNAL);
/** To each waiter: upload progress. */
export const imageProgressSignal = defineSignal<[ImageProgressSignal]>(IMAGE_PROGRESS_SIGNAL);

// ---- the fleet workflows (one query name, each with its own result type) -------------------

/** The orphan GC's result so far. */
export const gcResultQuery = defineQuery<GcResult>(FLEET_RESULT_QUERY);
/** The provider health survey's result so far. */
export const healthResultQuery = defineQuery<ProviderHealthResult>(FLEET_RESULT_QUERY);

// ---- a host's maintenance workflow (docs/hosts.md) ----------------------------------------------

/** The host's maintenance status: phase, since, reason, the drain's progress. */
export const hostStatusQuery = defineQuery<HostStatus>(HOST_STATUS_QUERY);
/** Stops new placements on the host (idempotent). */
export const hostCordonUpdate = defineUpdate<HostStatus, [HostActionRequest]>(HOST_CORDON_UPDATE);
/** Cordons the host and moves its proxies elsewhere (idempotent; returns once the drain started). */
export const hostDrainUpdate = defineUpdate<HostStatus, [HostActionRequest]>(HOST_DRAIN_UPDATE);
/** Makes the host schedulable again; the workflow ends. */
export const hostUncordonUpdate = defineUpdate<HostStatus, [HostActionRequest]>(HOST_UNCORDON_UPDATE);
/** From a host workflow to a pool: move members off a draining host, or stop. */
export const poolHostDrainSignal = defineSignal<[HostDrainNotice]>(POOL_HOST_DRAIN_SIGNAL);

// ---- a host's health monitor (docs/health.md "One monitor per host") ----------------------------

/** From a proxy workflow (through its watch activity, signal-with-start): watch me (replaces its earlier watch). */
export const hostWatchSignal = defineSignal<[HostWatch]>(HOST_WATCH_SIGNAL);
/** From a proxy workflow: stop watching me (delete, resize, move). */
export const hostUnwatchSignal = defineSignal<[HostUnwatch]>(HOST_UNWATCH_SIGNAL);
/** From the host monitor's activity: the watches, when they changed since `version`. */
export const hostWatchesQuery = defineQuery<HostWatches, [number]>(HOST_WATCHES_QUERY);
