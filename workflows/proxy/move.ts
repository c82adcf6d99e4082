// Moving a standalone proxy to another host (the `move` update; a host's drain uses it). The
// update checks that some host other than the avoided ones could take the proxy, hands the move
// to the Running loop and returns once the loop took it up. The loop (both loops) then deletes the
// VM on the old host with the usual teardown (deleteProxyVm, never cancelled, done before anything
// is created elsewhere: never two VMs of one proxy), places the proxy again as at create with the
// avoided hosts excluded (waiting for capacity if need be), creates and boots it there and goes on
// Running on the new host. Clients see the gap of one boot and a new address (docs/operator-guide.md).
import { ApplicationFailure, allHandlersFinished, condition } from '@temporalio/workflow';
import type { ProxyMoveRequest } from '../../contracts/host.ts';
import type { ProxyStatus, ResolvedProxy } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import type { ImageWaiter } from '../image-join.ts';
import { rpc } from '../stubs.ts';
import { compensate } from './cleanup.ts';
import { pickAvoiding, provision } from './phases.ts';
import { nowIso, recordError, setState } from './publish.ts';
import type { PendingMove, ProxyRun } from './state.ts';
import { markMoving } from './status.ts';

/** A move is waiting for the Running loop to take it up. */
export function moveAsked(run: ProxyRun): boolean {
  return run.move?.phase === 'asked';
}

function refused(message: string): ApplicationFailure {
  return ApplicationFailure.create({ message, nonRetryable: true });
}

/**
 * The move update's handler (its validator, status.ts moveProblem, let only a Running standalone
 * proxy with no move under way through): refuses when no host but the avoided ones (the current
 * one always among them) could take the proxy now, else hands the move over and returns the
 * status once the loop has begun it (Provisioning, deleting the VM on the old host).
 */
export async function requestMove(run: ProxyRun, req: ProxyMoveRequest): Promise<ProxyStatus> {
  const from = run.status.host!;
  const r = run.resolved!;
  const move: PendingMove = {
    phase: 'checking',
    from,
    avoidHosts: [...new Set([from, ...req.avoidHosts])],
    at: nowIso(),
  };
  if (req.reason !== undefined) move.reason = req.reason;
  run.move = move;
  let problem: string | undefined;
  try {
    const pick = pickAvoiding(await rpc.surveyHosts({ entry: r.entry }), r.name, r.vm, move.avoidHosts);
    if (pick.host === undefined) problem = `no host to move to: ${pick.reason}`;
  } catch (err) {
    problem = `the hosts could not be surveyed: ${failureInfo(err).message}`;
  }
  if (problem === undefined && run.ending()) problem = `the proxy is ${run.status.state}: not moved`;
  if (problem !== undefined) {
    run.move = undefined;
    throw refused(problem);
  }
  run.move = { ...move, phase: 'asked' };
  await condition(() => !moveAsked(run) || run.ending());
  if (moveAsked(run)) {
    run.move = undefined;
    throw refused(`the proxy is ${run.status.state}: not moved`);
  }
  return run.status;
}

/**
 * Makes the move the update handed over: delete on the old host, place avoiding the move's hosts,
 * create and boot, Running on the new host (recreations not counted). A delete that fails for good
 * leaves the proxy on its host (Running, the error recorded; its loop sees what is left of the VM).
 */
export async function applyMove(run: ProxyRun, images: ImageWaiter, r: ResolvedProxy): Promise<void> {
  const asked = run.move!;
  const { from } = asked;
  const why = asked.reason === undefined ? '' : ` (${asked.reason})`;
  run.move = { ...asked, phase: 'deleting' };
  run.status = markMoving(run.status, nowIso());
  setState(run, 'Provisioning', `moving off ${from}${why}: deleting the VM there`);
  try {
    await compensate(run, r);
  } catch (err) {
    recordError(run, err);
    const f = failureInfo(err);
    run.move = undefined;
    setState(run, 'Running', `the move off ${from} failed: its VM could not be deleted (${f.code}: ${f.message})`);
    return;
  }
  run.move = { ...asked, phase: 'placing' };
  run.status = { ...run.status, host: undefined };
  run.hostUnreachableSince = undefined;
  await provision(run, images, r, asked.avoidHosts, (host) => `moving off ${from}${why}: creating the VM on ${host}`);
  run.missedPolls = 0;
  run.addressedOnce = false;
  run.move = undefined;
  setState(run, 'Running', `moved off ${from} to ${run.status.host!}${why}`);
}

/**
 * Waits until the run may continue as new: every handler finished, or a move or a resize handed
 * over (their handlers wait for the loop), which is made first (false: the loop takes it up and
 * continues as new at a later checkpoint).
 */
export async function mayContinueAsNew(run: ProxyRun): Promise<boolean> {
  const resizeAsked = () => run.pendingResize !== undefined;
  await condition(() => allHandlersFinished() || moveAsked(run) || resizeAsked());
  return run.move === undefined && !resizeAsked();
}
