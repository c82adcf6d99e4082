// The proxy workflow's message handlers: the `status` query, the image progress signal, and the
// `delete`, `resize` and `move` updates (with their validators). Delete cancels the lifecycle's
// scope; resize hands its size to the health loop and waits for the loop to apply it; move hands
// its hosts to avoid to the loop (move.ts) and returns once the loop began it.
import { ApplicationFailure, condition, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { CancellationScope } from '@temporalio/workflow';
import {
  imageProgressSignal,
  memberServingSignal,
  proxyDeleteUpdate,
  proxyMonitorVerdictSignal,
  proxyMoveUpdate,
  proxyResizeUpdate,
  proxyStatusQuery,
} from '../../contracts/messages.ts';
import type { ProxyMoveRequest } from '../../contracts/host.ts';
import type { DeleteAccepted, ProxyStatus, VmSize } from '../../contracts/proxy.ts';
import type { ImageWaiter } from '../image-join.ts';
import { publish } from './publish.ts';
import type { ProxyRun } from './state.ts';
import { requestMove } from './move.ts';
import { deleteProblem, detailsLine, moveProblem, resizeProblem, resizeTarget, withImageProgress } from './status.ts';

/**
 * Sets every handler of the proxy workflow on `run` (the image ready signal is `images`'s); `main`
 * is the scope a delete cancels.
 */
export function installHandlers(run: ProxyRun, main: CancellationScope, images: ImageWaiter): void {
  setHandler(proxyStatusQuery, () => run.status);
  // The host monitor's verdicts of the current watch, each once and in order (a stale watch's are dropped).
  setHandler(proxyMonitorVerdictSignal, (v) => {
    const w = run.hostWatch;
    if (w === undefined || v.token !== w.token || v.seq <= w.lastSeq) return;
    w.lastSeq = v.seq;
    w.verdicts.push(v);
  });
  setHandler(imageProgressSignal, (p) => {
    if (!images.awaiting(p.workflowId)) return;
    run.status = withImageProgress(run.status, p);
    // The Web UI's current details show the upload's progress (not history: no event).
    setCurrentDetails(detailsLine(run.status));
  });
  if (run.input.pool !== undefined) {
    // The pool's word on discovery: the status (which discovery reads) and the pool's report follow.
    setHandler(memberServingSignal, ({ serving }) => {
      const pool = run.status.pool;
      if (pool === undefined || pool.serving === serving) return;
      run.status = { ...run.status, pool: { ...pool, serving } };
      publish(run);
    });
  }
  setHandler(
    proxyDeleteUpdate,
    () => {
      const fromState = run.status.state;
      run.deleteRequested = true;
      main.cancel();
      return { accepted: true, fromState } satisfies DeleteAccepted;
    },
    { validator: () => refuseIf(deleteProblem(run.status.state)) },
  );
  setHandler(proxyMoveUpdate, (req) => requestMove(run, req), {
    validator: (req: ProxyMoveRequest) =>
      refuseIf(moveProblem(req, run.status, run.input.pool?.workflowId, run.move?.from)),
  });
  setHandler(proxyResizeUpdate, (size) => resize(run, size), {
    validator: (size: VmSize) => refuseIf(resizeProblem(size, run.status.state)),
  });
}

function refuseIf(problem: string | undefined): void {
  if (problem !== undefined) throw new Error(problem);
}

/** Waits until Running (and no other resize pending), hands the size over and waits until applied. */
async function resize(run: ProxyRun, size: VmSize): Promise<ProxyStatus> {
  await condition(() => (run.status.state === 'Running' && run.pendingResize === undefined) || run.ending());
  if (run.status.state !== 'Running' || run.resolved === undefined) {
    throw ApplicationFailure.create({
      message: `the proxy is ${String(run.status.state)}: nothing to resize`,
      nonRetryable: true,
    });
  }
  run.requestResize(resizeTarget(size, run.status.vm));
  await condition(() => run.pendingResize === undefined || run.ending());
  const failed = run.lastResizeError();
  if (failed !== undefined) {
    throw ApplicationFailure.create({ message: `resize failed: ${failed}`, nonRetryable: true });
  }
  return run.status;
}
