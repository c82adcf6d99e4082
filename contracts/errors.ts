// Error kinds and the codes that cross the workflow boundary (activities put them into failure
// details, workflows and clients read them back). Every code is listed in docs/errors.md. Plain
// constants and types; no imports.

/** The error table's three kinds (docs/errors.md). */
export type ErrorKind = 'Transient' | 'Permanent' | 'NotFound';

/** What an activity failure carries in `details[0]`, for workflows to read without parsing messages. */
export interface FailureDetails {
  kind: ErrorKind;
  code: string;
}

/** Codes the workflows and activities give (library codes live with their errors in lib/). */
export const CODES = {
  /** An error that is not one of the project's own (a bug or an unexpected library error). */
  unclassified: 'UNCLASSIFIED',
  /** A proxy spec that cannot be provisioned (unknown entry or image key, bad name or size). */
  proxySpecInvalid: 'PROXY_SPEC_INVALID',
  /** The VM did not run, or no address was read, within the entry's bootMs. */
  bootTimeout: 'BOOT_TIMEOUT',
  /** The VM disappeared or failed more often than maxRecreations allows. */
  vmLost: 'VM_LOST',
  /** The base image was not ready after the ensure-image workflow's attempts. */
  imageUnavailable: 'IMAGE_UNAVAILABLE',
  /** Every waiter left the ensure-image workflow: its upload was aborted. */
  imageAbandoned: 'IMAGE_ABANDONED',
  /** The probe activity itself failed (its worker died, it timed out): counted as a failed probe. */
  probeActivityFailed: 'PROBE_ACTIVITY_FAILED',
  /** A probe outcome: the probe failed with an error that is not a project error. */
  probeFailed: 'PROBE_FAILED',
  /** A probe outcome: the entry has no health.target, so no probe is sent. */
  probeNoTarget: 'PROBE_NO_TARGET',
  /** A host's pool is too small: the proxy waits for capacity instead of failing. */
  insufficientCapacity: 'KVM2_INSUFFICIENT_CAPACITY',
  /** The adoption guard refused a domain (no mark of ours, or another owner's). */
  adoptionRefused: 'KVM2_ADOPTION_REFUSED',
  /** An allowedClientCidrs block admits every address and the open-proxy flag is off. */
  openProxyRefused: 'OPEN_PROXY_REFUSED',
  /** A pool member's name is taken by a proxy with another spec: the member is not started. */
  poolMemberConflict: 'POOL_MEMBER_CONFLICT',
  /** A pool spec that is not valid (a field out of range, a bad name): the pool is not started. */
  poolSpecInvalid: 'POOL_SPEC_INVALID',
} as const;

export type Code = (typeof CODES)[keyof typeof CODES];
