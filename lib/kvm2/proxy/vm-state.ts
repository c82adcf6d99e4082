/**
 * The one table from libvirt's (state, reason) to the provider's proxy state. `Missing` comes from
 * a NotFound lookup, not from this table.
 */
import { DomainState } from '../../libvirt/constants.ts';

export type ProxyVmState = 'Provisioning' | 'Running' | 'Stopped' | 'Failed' | 'Missing';

/** virDomainPausedReason values the table names. */
const PausedReason = {
  IOERROR: 5,
  CRASHED: 10,
  STARTING_UP: 11,
  POSTCOPY_FAILED: 13,
  API_ERROR: 14,
} as const;

/** virDomainShutoffReason values the table names. */
const ShutoffReason = {
  CRASHED: 3,
  FAILED: 6,
} as const;

/**
 * Maps DOMAIN_GET_STATE's answer:
 *
 * | state | reason | proxy state |
 * |---|---|---|
 * | NOSTATE | any | Provisioning |
 * | RUNNING, BLOCKED | any | Running |
 * | PAUSED | STARTING_UP | Provisioning |
 * | PAUSED | IOERROR, CRASHED, POSTCOPY_FAILED, API_ERROR | Failed |
 * | PAUSED | any other (user, migration, save, snapshot, shutting down) | Stopped |
 * | SHUTDOWN (shutting down) | any | Stopped |
 * | SHUTOFF | CRASHED, FAILED | Failed |
 * | SHUTOFF | any other (defined and never started, shut down, destroyed, saved) | Stopped |
 * | CRASHED | any | Failed |
 * | PMSUSPENDED | any | Stopped |
 * | anything unknown | | Failed |
 */
export function proxyVmState(state: number, reason: number): ProxyVmState {
  switch (state) {
    case DomainState.NOSTATE:
      return 'Provisioning';
    case DomainState.RUNNING:
    case DomainState.BLOCKED:
      return 'Running';
    case DomainState.PAUSED:
      if (reason === PausedReason.STARTING_UP) return 'Provisioning';
      if (
        reason === PausedReason.IOERROR ||
        reason === PausedReason.CRASHED ||
        reason === PausedReason.POSTCOPY_FAILED ||
        reason === PausedReason.API_ERROR
      ) {
        return 'Failed';
      }
      return 'Stopped';
    case DomainState.SHUTDOWN:
      return 'Stopped';
    case DomainState.SHUTOFF:
      return reason === ShutoffReason.CRASHED || reason === ShutoffReason.FAILED ? 'Failed' : 'Stopped';
    case DomainState.CRASHED:
      return 'Failed';
    case DomainState.PMSUSPENDED:
      return 'Stopped';
    default:
      return 'Failed';
  }
}
