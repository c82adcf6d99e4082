// The way out of a proxy workflow, never cancelled itself: leave the image waited on and the host
// monitor's watch (`health.monitor: host`), then either
// fail (the console's tail after a boot timeout, compensation) or delete the VM; and the
// compensation a full pool or a failure runs in the middle of provisioning.
import { CancellationScope } from '@temporalio/workflow';
import { CODES } from '../../contracts/errors.ts';
import type { ProxyOutcome, ResolvedProxy } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import type { ImageWaiter } from '../image-join.ts';
import { cleanup, probe } from '../stubs.ts';
import { unwatchHost } from './host-watch.ts';
import { nowIso, setState } from './publish.ts';
import type { ProxyFailed, ProxyRun } from './state.ts';
import { failedError, markDeleted } from './status.ts';

/** Removes whatever a failed create left (domain, overlay, seed); the base stays. */
export async function compensate(run: ProxyRun, r: ResolvedProxy): Promise<void> {
  if (!run.mayHaveCreated || run.status.host === undefined) return;
  await CancellationScope.nonCancellable(() => cleanup.deleteProxyVm({ proxy: r, host: run.status.host! }));
  run.mayHaveCreated = false;
}

/**
 * Ends the proxy after the lifecycle stopped: Failed with `failed`'s reason, or Deleted (deleted
 * or, when `cancelled`, cancelled from outside). Runs without being cancelled.
 */
export function finish(
  run: ProxyRun,
  images: ImageWaiter,
  failed: ProxyFailed | undefined,
  cancelled: boolean,
): Promise<ProxyOutcome> {
  return CancellationScope.nonCancellable(async (): Promise<ProxyOutcome> => {
    await images.leave();
    await unwatchHost(run);
    return failed !== undefined ? fail(run, failed) : remove(run, cancelled);
  });
}

async function fail(run: ProxyRun, failed: ProxyFailed): Promise<ProxyOutcome> {
  run.status = { ...run.status, lastError: failedError(run.status.lastError, failed.code, failed.message, nowIso()) };
  const { resolved } = run;
  if (failed.code === CODES.bootTimeout && resolved !== undefined && run.status.host !== undefined) {
    const consoleTail = await probe
      .readConsoleTail({ proxy: resolved, host: run.status.host })
      .catch((err: unknown) => [`(the console log could not be read: ${failureInfo(err).message})`]);
    run.status = { ...run.status, consoleTail };
  }
  if (resolved !== undefined) await compensate(run, resolved);
  setState(run, 'Failed', failed.message);
  return { state: 'Failed', host: run.status.host, reason: failed.message };
}

async function remove(run: ProxyRun, cancelled: boolean): Promise<ProxyOutcome> {
  setState(run, 'Deleting', cancelled ? 'the workflow was cancelled' : 'delete requested');
  let deleted;
  if (run.resolved !== undefined && run.status.host !== undefined && run.mayHaveCreated) {
    deleted = await cleanup.deleteProxyVm({ proxy: run.resolved, host: run.status.host });
  }
  run.status = markDeleted(run.status, nowIso());
  setState(run, 'Deleted');
  return { state: 'Deleted', host: run.status.host, deleted };
}
