// The Running phase of runs started with `healthLoop: 'poll'` (monitor-loop.ts is the default): poll the VM every health interval, fold its address (H3) and
// a probe (hysteresis) into the status, recreate a VM that is gone on its host, apply a pending
// resize or move (move.ts), and continue-as-new when the history grows long.
import { condition, isCancellation, workflowInfo } from '@temporalio/workflow';
import { CODES } from '../../contracts/errors.ts';
import type { ProxyOutcome, ResolvedProxy, VmReading } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import type { ImageWaiter } from '../image-join.ts';
import { poll, probe } from '../stubs.ts';
import { continueOntoCurrentBuild } from '../upgrade.ts';
import { afterRead } from './host-reach.ts';
import { applyMove, mayContinueAsNew, moveAsked } from './move.ts';
import { nowIso, publish, recordError, setState } from './publish.ts';
import { applyResize, recreate } from './running.ts';
import { ProxyFailed } from './state.ts';
import type { ProxyRun } from './state.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { applyAddress, applyProbe, vmLost } from './status.ts';

/** Runs the proxy until it is deleted, cancelled or fails (or continues as new). */
export async function healthLoop(run: ProxyRun, images: ImageWaiter, proxy: ResolvedProxy): Promise<void> {
  let r = proxy;
  setState(run, 'Running');
  run.status = { ...run.status, runningSince: run.status.runningSince ?? nowIso() };
  publish(run);
  for (let polls = 1; ; polls++) {
    const host = run.status.host!;
    let reading: VmReading | undefined;
    let failedCode: string | undefined;
    try {
      reading = await poll.readProxyVm({ proxy: r, host });
    } catch (err) {
      if (isCancellation(err)) throw err;
      recordError(run, err);
      failedCode = failureInfo(err).code;
    }
    const at = nowIso();
    run.hostUnreachableSince = afterRead(run.hostUnreachableSince, failedCode, at);
    if (vmLost(reading)) {
      await recreate(run, images, r, host, reading.state, at);
      continue;
    }
    const why = reading ? `no address read (VM ${reading.state})` : 'the VM could not be read';
    const folded = applyAddress(run.status, run.missedPolls, reading?.ip, r.health.addressGracePolls, at, why);
    run.status = folded.status;
    run.missedPolls = folded.missedPolls;
    const ip = run.status.ip;
    if (ip !== undefined) run.addressedOnce = true;
    else if (!run.addressedOnce && run.startedAtMs !== undefined && Date.now() - run.startedAtMs > r.timeouts.bootMs) {
      throw new ProxyFailed(CODES.bootTimeout, `no address was read within bootMs (${r.timeouts.bootMs} ms)`);
    }
    if (ip !== undefined && r.health.target !== undefined) {
      // A probe whose activity failed (its worker died, it timed out) is a failed probe, not a
      // failed proxy: the hysteresis decides, as for any other failure.
      const outcome = await probe.probeProxy({ proxy: r, host, ip }).catch((err: unknown) => {
        if (isCancellation(err)) throw err;
        const f = failureInfo(err);
        return { ok: false as const, code: CODES.probeActivityFailed, message: `${f.code}: ${f.message}` };
      });
      run.status = applyProbe(run.status, outcome, r.health, nowIso(), r.timeouts.bootMs);
    }
    publish(run);
    const limit = run.input.continueAsNewAfterPolls;
    if (
      (workflowInfo().continueAsNewSuggested || (limit !== undefined && polls >= limit)) &&
      (await mayContinueAsNew(run))
    ) {
      await run.lastReport; // a pool member's last report reaches its pool first
      // The memo (the client's spec among it) goes along explicitly.
      await continueOntoCurrentBuild<(input: ProxyWorkflowInput) => Promise<ProxyOutcome>>({
        memo: workflowInfo().memo,
      })({ ...run.input, carried: run.carried(r) });
    }
    await condition(() => run.pendingResize !== undefined || moveAsked(run), r.health.intervalMs);
    if (run.pendingResize !== undefined) r = await applyResize(run, r, host);
    if (moveAsked(run)) await applyMove(run, images, r);
  }
}
