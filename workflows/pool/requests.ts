// Replacement on request (the `replaceMember` update, a banned exit reported by an operator or a
// client): what the validator refuses, and the change it makes to the pool's state. Pure; the
// workflow (index.ts) sets the handler. docs/pools.md, "Replacement on request".
import { MAX_REPLACE_REASON_LENGTH, POOL_DEFAULTS } from '../../contracts/pool.ts';
import type { ReplaceMemberRequest } from '../../contracts/pool.ts';
import type { PoolState } from '../../contracts/pool-state.ts';
import { leave } from './plan.ts';

/** The sliding window of `replacement.requestedPerHour`. */
export const REQUEST_WINDOW_MS = 3_600_000;

/** The prefix of a member's `condemned` when it was replaced on request. */
export const ON_REQUEST = 'replaced on request';

/** The limit in force (states carried from runs before the field have none in their resolved spec). */
export function requestedPerHour(state: PoolState): number {
  return state.spec.replacement.requestedPerHour ?? POOL_DEFAULTS.requestedPerHour;
}

/** The accepted requests still inside the sliding hour at `nowMs`, oldest first. */
function recentRequests(state: PoolState, nowMs: number): number[] {
  return (state.replaceRequestsMs ?? []).filter((t) => nowMs - t < REQUEST_WINDOW_MS);
}

/**
 * Why `req` is refused at `nowMs` (undefined: accepted). The checks in order: the pool being
 * deleted, the request's shape, its reason, the member (unknown, already leaving), the limit.
 */
export function replaceRequestProblem(state: PoolState, req: ReplaceMemberRequest, nowMs: number): string | undefined {
  const pool = `${state.spec.entry}/${state.spec.name}`;
  if (state.deleting) return `pool ${pool} is being deleted`;
  if (typeof req !== 'object' || req === null) return 'the request must be an object with name and reason';
  if (typeof req.name !== 'string' || req.name === '') return 'name must be the name of one of the pool’s members';
  if (typeof req.reason !== 'string' || req.reason.trim() === '' || req.reason.length > MAX_REPLACE_REASON_LENGTH) {
    const got = typeof req.reason === 'string' ? `${req.reason.length} characters` : String(typeof req.reason);
    return `reason must say why in 1 to ${MAX_REPLACE_REASON_LENGTH} characters (not only spaces), got ${got}`;
  }
  const m = state.members.find((x) => x.name === req.name);
  if (m === undefined) return `no member ${req.name} in pool ${pool}; list them with \`egressctl pool get\``;
  if (m.role === 'leaving') {
    return `member ${req.name} of pool ${pool} is already leaving${m.condemned === undefined ? '' : ` (${m.condemned})`}`;
  }
  const limit = requestedPerHour(state);
  if (limit === 0) {
    return (
      `pool ${pool} takes no replacement requests (replacement.requestedPerHour is 0); ` +
      'set replacement.requestedPerHour to 1 or more to allow them'
    );
  }
  const recent = recentRequests(state, nowMs);
  if (recent.length >= limit) {
    const next = new Date(recent[recent.length - limit]! + REQUEST_WINDOW_MS).toISOString();
    return (
      `pool ${pool} replaced ${recent.length} member${recent.length === 1 ? '' : 's'} on request in the last hour, its limit ` +
      `(replacement.requestedPerHour ${limit}); the next request is allowed at ${next}; ` +
      'raise replacement.requestedPerHour to allow more'
    );
  }
  return undefined;
}

/**
 * Applies an accepted request: the member leaves at once (out of discovery: it is told by the next
 * pass, then drained and deleted), condemned `replaced on request: <reason>`; the next pass
 * promotes a ready spare into its place and creates a replacement, as for any member replaced.
 * Counted in `replacedOnRequest`, not in `replacements` (Failed or Unhealthy), nor by the loop guard.
 */
export function replaceOnRequest(state: PoolState, req: ReplaceMemberRequest, nowMs: number): void {
  const m = state.members.find((x) => x.name === req.name);
  if (m === undefined || m.role === 'leaving') return;
  leave(state, m, nowMs);
  m.condemned = `${ON_REQUEST}: ${req.reason}`;
  state.replacedOnRequest = (state.replacedOnRequest ?? 0) + 1;
  state.replaceRequestsMs = [...recentRequests(state, nowMs), nowMs];
}
