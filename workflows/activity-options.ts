// Named activity option presets (docs/design.md): workflows pick one instead of spelling timeouts.
// Errors the activities mark non-retryable (Permanent and NotFound, see activities/errors.ts)
// are never retried whatever the preset says.
//
// A full pool (`InsufficientCapacity`, Transient in the error table) is not retried in place:
// the proxy workflow turns it into WaitingForCapacity, with its own backoff and a new placement.
import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';
import { CODES } from '../contracts/errors.ts';

/** A short, side-effect-free activity: 10 s per attempt, 5 attempts with backoff up to 10 s. */
export const QUICK_ACTIVITY = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 5 },
} as const satisfies ActivityOptions;

/**
 * A few libvirt calls, each under the entry's `rpcMs` budget (create, delete, host survey):
 * 5 minutes per attempt, retried with backoff up to a minute, 8 attempts. The workflow waits for
 * a cancelled attempt to finish, so cleanup never races a create still in flight.
 */
export const RPC_ACTIVITY = {
  startToCloseTimeout: '5 minutes',
  cancellationType: 'WAIT_CANCELLATION_COMPLETED',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 8,
    nonRetryableErrorTypes: [CODES.insufficientCapacity],
  },
} as const satisfies ActivityOptions;

/**
 * The reads on a proxy's way to its create (resolve the spec, survey the hosts, find a cached
 * base) as local activities: run by the worker inside the workflow task that asks for them, so
 * the three cost one workflow task instead of three activity round trips through the server
 * (docs/benchmarks.md "Provisioning throughput"). RPC_ACTIVITY's attempt bound and retries; a
 * retry more than 10 s away waits on a timer (a new workflow task) instead of holding the task.
 */
export const LOCAL_READ_ACTIVITY = {
  startToCloseTimeout: '5 minutes',
  localRetryThreshold: '10 seconds',
  retry: RPC_ACTIVITY.retry,
} as const satisfies LocalActivityOptions;

/**
 * One poll of a VM (state and address): 45 s, 3 attempts; a failed poll is a reading, not a
 * failure. Short, so a poll lost with its worker delays the health loop by seconds, not minutes.
 */
export const POLL_ACTIVITY = {
  startToCloseTimeout: '45 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 3 },
} as const satisfies ActivityOptions;

/**
 * One health probe: bounded by its own timeout, never retried (the next probe is the retry); a
 * failed or timed-out probe activity counts as a failed probe.
 */
export const PROBE_ACTIVITY = {
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 1 },
} as const satisfies ActivityOptions;

/**
 * A streaming transfer (image fetch and upload): the activity heartbeats every second; after 10 s
 * without one reaching the server (the worker died) the attempt is retried on any worker, 2 s
 * later, and starts the transfer over. The worker sends at most one heartbeat a second
 * (runtime/worker-set.ts caps the SDK's throttle, 0.8 x the timeout: 8 s here), so the server's
 * heartbeat details are about a second old; progress for the Web UI also goes by signal, see
 * activities/image.ts. `startToCloseTimeout` is set per call from `downloadTotalMs`.
 */
export const UPLOAD_ACTIVITY = {
  heartbeatTimeout: '10 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 5,
    nonRetryableErrorTypes: [CODES.insufficientCapacity],
  },
} as const satisfies ActivityOptions;

/** Cleanup (delete, leave): retried with backoff up to 2 minutes, 20 attempts: it must get done. */
export const CLEANUP_ACTIVITY = {
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 20 },
} as const satisfies ActivityOptions;
