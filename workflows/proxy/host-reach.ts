// Whether a proxy's host answers: a read of its VM that failed because the host's SSH or libvirt
// link did not answer (not because libvirt answered with an error) starts the time since when the
// host is unreachable; the next read the host answers clears it. A pool member reports that time
// (MemberReport.hostUnreachableSince) so its pool can replace it past hostFailureGraceMs. Pure.
import { hostDidNotAnswer } from '../../contracts/health.ts';
import type { MonitorState } from '../../contracts/health.ts';
import type { ProxyError } from '../../contracts/proxy.ts';

/**
 * The unreachable time after one read: `failedCode` is the failed read's code (undefined: the
 * read succeeded, the host answered). Kept from the first read that found the host silent.
 */
export function afterRead(since: string | undefined, failedCode: string | undefined, at: string): string | undefined {
  if (failedCode === undefined) return undefined;
  if (!hostDidNotAnswer(failedCode)) return since;
  return since ?? at;
}

/**
 * The unreachable time after a health monitor returned `after` (it started from `beforeError`, the
 * run's last error then). The monitor returns only on transitions, so this reads its state: an
 * address read on its last poll (no missed polls), or a VM found gone, means the host answered;
 * a new last error whose code is a link failure means it did not (since: that read, the first
 * the workflow hears of); otherwise nothing is known and the time stays.
 */
export function afterMonitor(
  since: string | undefined,
  beforeError: ProxyError | undefined,
  after: MonitorState,
  vmLost: boolean,
): string | undefined {
  if (vmLost) return undefined;
  // A monitor that tracks the host's silence (it returns at its first silent read) says it.
  if (after.hostSilentSince !== undefined) return since ?? after.hostSilentSince;
  if (after.missedPolls === 0) return undefined;
  const last = after.status.lastError;
  const fresh = last !== undefined && (beforeError === undefined || last.at !== beforeError.at);
  if (fresh && hostDidNotAnswer(last.code)) return since ?? last.at;
  return since;
}
