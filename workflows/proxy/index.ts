// The proxy lifecycle: one workflow per proxy (`proxy/<entry>/<name>`), the store of record of
// its state. Pending → (WaitingForCapacity) → Provisioning → Booting → Running (health loop) →
// Deleting → Deleted; Failed on a permanent error or a boot timeout, after compensation. Deleting
// or cancelling at any point aborts the work in flight and cleans up in a non-cancellable scope.
//
// The parts: state.ts (the run state), status.ts (its pure transitions), handlers.ts (query,
// updates, signals), ../image-join.ts (waiting on the base image), phases.ts (resolve, place, image, create, boot),
// monitor-loop.ts (Running, with the health monitor activity; health-loop.ts with `healthLoop: 'poll'`),
// cleanup.ts (the way out), publish.ts (search attributes, memo, details).
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  TemporalFailure,
  allHandlersFinished,
  condition,
  isCancellation,
  workflowInfo,
} from '@temporalio/workflow';
import type { ProxyOutcome } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import { ImageWaiter } from '../image-join.ts';
import { PROXY_BASELINE_PATCH, retired } from '../retiring.ts';
import { finish } from './cleanup.ts';
import { installHandlers } from './handlers.ts';
import { healthLoop } from './health-loop.ts';
import { monitorLoop } from './monitor-loop.ts';
import { provision, resolve } from './phases.ts';
import { nowIso, publish } from './publish.ts';
import { ProxyFailed, ProxyRun } from './state.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { withResolved } from './status.ts';

export async function proxyLifecycle(input: ProxyWorkflowInput): Promise<ProxyOutcome> {
  retired(PROXY_BASELINE_PATCH);
  const run = new ProxyRun(input, nowIso());
  const images = new ImageWaiter(workflowInfo().workflowId);
  /** The lifecycle's scope: the delete update cancels it, aborting the work in flight. */
  const main = new CancellationScope();
  installHandlers(run, main, images);
  publish(run);

  let failed: ProxyFailed | undefined;
  try {
    await main.run(async () => {
      let r = run.resolved;
      if (r === undefined) {
        r = await resolve(input);
        run.resolved = r;
        run.status = withResolved(run.status, r);
      }
      if (run.status.state !== 'Running') await provision(run, images, r);
      // `poll` keeps the loop that polls from the workflow (health-loop.ts).
      if (input.healthLoop !== 'poll') await monitorLoop(run, images, r);
      else await healthLoop(run, images, r);
    });
  } catch (err) {
    if (err instanceof ProxyFailed) failed = err;
    else if (err instanceof TemporalFailure && !isCancellation(err)) {
      // An activity that failed for good where no rule expected it (its retries spent): the proxy
      // fails, after the same cleanup as any failure. (Other errors are bugs: they fail the task.)
      const f = failureInfo(err);
      failed = new ProxyFailed(f.code, f.message);
    } else if (!isCancellation(err)) throw err;
  }

  // Deleted, cancelled or failed: clean up without being cancelled ourselves.
  const cancelled = !run.deleteRequested && failed === undefined;
  const outcome = await finish(run, images, failed, cancelled);
  await condition(allHandlersFinished);
  // A pool member's last report (Deleted, Failed) must reach its pool before the run ends.
  await run.lastReport;
  if (failed !== undefined) {
    throw ApplicationFailure.create({
      type: failed.code,
      message: `proxy ${input.name} failed: ${failed.message}`,
      nonRetryable: true,
      details: [outcome],
    });
  }
  // Cancelled from outside (not deleted): end Cancelled, after the cleanup above.
  if (cancelled) throw new CancelledFailure(`proxy ${input.name} was cancelled; its VM was deleted`);
  return outcome;
}
