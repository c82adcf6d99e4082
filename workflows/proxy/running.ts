// What both Running loops (monitor-loop.ts, health-loop.ts) do to a running proxy's VM: recreate it
// when it is gone, apply a pending resize.
import { isCancellation, sleep } from '@temporalio/workflow';
import type { ResolvedProxy } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import type { ImageWaiter } from '../image-join.ts';
import { rpc } from '../stubs.ts';
import { CODES } from '../../contracts/errors.ts';
import { compensate } from './cleanup.ts';
import { createAndBoot, ensureBase } from './phases.ts';
import { capacityBackoffMs } from './placement.ts';
import { publish, recordError, setState } from './publish.ts';
import { NeedCapacity, ProxyFailed } from './state.ts';
import type { ProxyRun } from './state.ts';
import { markRecreating } from './status.ts';

/** Recreates a VM that is gone (`vmState`) on the proxy's host; VM_LOST after maxRecreations. */
export async function recreate(
  run: ProxyRun,
  images: ImageWaiter,
  r: ResolvedProxy,
  host: string,
  vmState: string,
  at: string,
): Promise<void> {
  if (run.status.recreations >= r.health.maxRecreations) {
    throw new ProxyFailed(
      CODES.vmLost,
      `the VM was ${vmState} ${run.status.recreations + 1} times; maxRecreations is ${r.health.maxRecreations}`,
    );
  }
  run.status = markRecreating(run.status, vmState, at);
  setState(run, 'Provisioning', `the VM was ${vmState}; recreating it on ${host}`);
  try {
    const base = await ensureBase(run, images, r, host);
    await createAndBoot(run, r, host, base);
  } catch (err) {
    if (!(err instanceof NeedCapacity)) throw err;
    // The host's pool is full: the proxy stays on its host (its address and clients are
    // there), so it waits and tries again; each try counts as a recreation (VM_LOST after).
    await compensate(run, r);
    setState(run, 'WaitingForCapacity', `recreating on ${host}: ${err.message}`);
    await sleep(capacityBackoffMs(run.status.recreations - 1));
    return;
  }
  setState(run, 'Running');
  run.missedPolls = 0;
  run.addressedOnce = false;
}

/** Applies the pending resize (restart included); the loop's next polls see the VM come back. */
export async function applyResize(run: ProxyRun, r: ResolvedProxy, host: string): Promise<ResolvedProxy> {
  const next = { ...r, vm: { ...r.vm, ...run.pendingResize! } };
  let error: string | undefined;
  try {
    await rpc.resizeProxyVm({ proxy: next, host });
    run.resolved = next;
    run.status = { ...run.status, vm: { ...next.vm } };
    publish(run);
    return next;
  } catch (err) {
    if (isCancellation(err)) throw err;
    recordError(run, err);
    error = failureInfo(err).message;
    return r;
  } finally {
    run.resizeDone(error);
  }
}
