// The proxy lifecycle: one workflow per proxy (`proxy/<entry>/<name>`), the store of record of
// its state. Pending → (WaitingForCapacity) → Provisioning → Booting → Running (health loop) →
// Deleting → Deleted; Failed on a permanent error or a boot timeout, after compensation. Deleting
// or cancelling at any point aborts the work in flight and cleans up in a non-cancellable scope.
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  TemporalFailure,
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  patched,
  getExternalWorkflowHandle,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../../activities/index.ts';
import { imageWorkflowId } from '../../contracts/image.ts';
import type { EnsuredBase, ImageResult } from '../../contracts/image.ts';
import {
  imageLeaveSignal,
  imageProgressSignal,
  imageReadySignal,
  proxyDeleteUpdate,
  proxyResizeUpdate,
  proxyStatusQuery,
} from '../../contracts/messages.ts';
import type {
  DeleteAccepted,
  ProxyOutcome,
  ProxySpec,
  ProxyState,
  ProxyStatus,
  ResolvedProxy,
  VmSize,
} from '../../contracts/proxy.ts';
import { CAPACITY_ERROR, CLEANUP_ACTIVITY, POLL_ACTIVITY, PROBE_ACTIVITY, RPC_ACTIVITY } from '../activity-options.ts';
import { failureInfo } from '../failures.ts';
import { upsertProxySearchAttributes } from '../search-attributes.ts';
import {
  applyAddress,
  applyProbe,
  capacityBackoffMs,
  initialStatus,
  pickHost,
  setCondition,
  withResolved,
} from './state.ts';

const rpc = proxyActivities<Activities>(RPC_ACTIVITY);
const poll = proxyActivities<Activities>(POLL_ACTIVITY);
const probe = proxyActivities<Activities>(PROBE_ACTIVITY);
const cleanup = proxyActivities<Activities>(CLEANUP_ACTIVITY);

/** What a run carries into the next one over continue-as-new. */
export interface CarriedProxy {
  resolved: ResolvedProxy;
  status: ProxyStatus;
  missedPolls: number;
  /** Workflow time (ms) the VM was last started; bounds the wait for a first address. */
  startedAtMs?: number;
  /** An address was read since the VM was last started. */
  addressedOnce: boolean;
}

export interface ProxyWorkflowInput extends ProxySpec {
  /** The installation's owner UID; checked against the worker's providers file when given. */
  ownerUid?: string;
  /** Continue-as-new after this many health polls (default: when the server suggests it). */
  continueAsNewAfterPolls?: number;
  /** Set by the previous run on continue-as-new; clients leave it unset. */
  carried?: CarriedProxy;
}

/** A permanent failure of the lifecycle: the proxy ends Failed with this reason. */
class ProxyFailed extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** The lifecycle must wait for capacity (pool too small, no reachable host). */
class NeedCapacity extends Error {}

export async function proxyLifecycle(input: ProxyWorkflowInput): Promise<ProxyOutcome> {
  const nowIso = (): string => new Date().toISOString(); // workflow time: replay-safe
  const waiterId = workflowInfo().workflowId;
  let st: ProxyStatus = input.carried?.status ?? initialStatus(input, nowIso());
  let resolved: ResolvedProxy | undefined = input.carried?.resolved;
  let missedPolls = input.carried?.missedPolls ?? 0;
  let startedAtMs = input.carried?.startedAtMs;
  let addressedOnce = input.carried?.addressedOnce ?? false;
  let deleteRequested = false;
  /** The lifecycle's scope: the delete update cancels it, aborting the work in flight. */
  const main = new CancellationScope();
  let imageResult: ImageResult | undefined;
  let waitingOnImage: string | undefined;
  /** A resize the update handler asked for and the health loop has not applied yet. */
  let pendingResize: Required<Pick<VmSize, 'vcpus' | 'memoryMiB'>> | undefined;
  let resizeError: string | undefined;
  let mayHaveCreated = st.host !== undefined && st.state !== 'Pending' && st.state !== 'WaitingForCapacity';

  const publish = (): void => {
    st = { ...st, updatedAt: nowIso() };
    upsertProxySearchAttributes(st);
    upsertMemo({
      proxy: st.name,
      entry: st.entry,
      host: st.host ?? null,
      ip: st.ip ?? null,
      port: st.port,
      runningSince: st.runningSince ?? null,
    });
    setCurrentDetails(
      `**${st.state}** · proxy \`${st.name}\` · entry \`${st.entry}\` · host \`${st.host ?? '-'}\` · ` +
        `ip \`${st.ip ?? '-'}\` · Healthy ${st.conditions.Healthy.status}${st.reason ? ` · ${st.reason}` : ''}`,
    );
  };
  const setState = (state: ProxyState, reason?: string): void => {
    if (st.state === state && st.reason === reason) return;
    st = { ...st, state, reason };
    publish();
  };
  const recordError = (err: unknown): void => {
    const f = failureInfo(err);
    st = { ...st, lastError: { kind: f.kind, code: f.code, message: f.message, at: nowIso() } };
  };

  setHandler(proxyStatusQuery, () => st);
  setHandler(imageReadySignal, (r) => {
    imageResult = r;
  });
  setHandler(imageProgressSignal, (p) => {
    if (waitingOnImage === p.workflowId) {
      st = {
        ...st,
        image: { workflowId: p.workflowId, bytes: p.bytes, totalBytes: p.totalBytes, bytesPerSecond: p.bytesPerSecond },
      };
    }
  });
  setHandler(
    proxyDeleteUpdate,
    () => {
      const fromState = st.state;
      deleteRequested = true;
      main.cancel();
      return { accepted: true, fromState } satisfies DeleteAccepted;
    },
    {
      validator: () => {
        if (st.state === 'Deleted' || st.state === 'Failed') throw new Error(`the proxy is already ${st.state}`);
      },
    },
  );

  /** Read through a function: the handler's narrowing of the variable does not survive its awaits. */
  const lastResizeError = (): string | undefined => resizeError;
  const terminal = (): boolean => st.state === 'Deleting' || st.state === 'Deleted' || st.state === 'Failed';
  setHandler(
    proxyResizeUpdate,
    async (size) => {
      await condition(() => (st.state === 'Running' && pendingResize === undefined) || terminal());
      if (st.state !== 'Running' || resolved === undefined) {
        throw ApplicationFailure.create({
          message: `the proxy is ${String(st.state)}: nothing to resize`,
          nonRetryable: true,
        });
      }
      resizeError = undefined;
      const want = { vcpus: size.vcpus ?? st.vm.vcpus, memoryMiB: size.memoryMiB ?? st.vm.memoryMiB };
      pendingResize = want;
      await condition(() => pendingResize === undefined || terminal());
      const failed = lastResizeError();
      if (failed !== undefined) {
        throw ApplicationFailure.create({ message: `resize failed: ${failed}`, nonRetryable: true });
      }
      return st;
    },
    {
      validator: (size: VmSize) => {
        if (size.diskGiB !== undefined)
          throw new Error('vm.diskGiB cannot be changed by a resize (memoryMiB and vcpus can)');
        if (size.vcpus !== undefined && !(Number.isInteger(size.vcpus) && size.vcpus >= 1 && size.vcpus <= 64)) {
          throw new Error(`vm.vcpus must be a whole number from 1 to 64, got ${size.vcpus}`);
        }
        const mem = size.memoryMiB;
        if (mem !== undefined && !(Number.isInteger(mem) && mem >= 128 && mem <= 262_144)) {
          throw new Error(`vm.memoryMiB must be a whole number from 128 to 262144, got ${mem}`);
        }
        if (size.vcpus === undefined && mem === undefined) throw new Error('give vm.vcpus, vm.memoryMiB or both');
        if (st.state === 'Deleting' || st.state === 'Deleted' || st.state === 'Failed') {
          throw new Error(`the proxy is ${st.state}: nothing to resize`);
        }
      },
    },
  );

  publish();

  // ---- the phases --------------------------------------------------------------------------

  const resolve = async (): Promise<ResolvedProxy> => {
    try {
      return await rpc.resolveProxy({
        name: input.name,
        entry: input.entry,
        imageKey: input.imageKey,
        vm: input.vm,
        squid: input.squid,
        ownerUid: input.ownerUid,
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      const f = failureInfo(err);
      throw new ProxyFailed(f.code, f.message);
    }
  };

  const place = async (r: ResolvedProxy): Promise<string> => {
    for (let attempt = 0; ; attempt++) {
      const survey = await rpc.surveyHosts({ entry: r.entry });
      const pick = pickHost(survey, r.name);
      if (pick.host !== undefined) return pick.host;
      setState('WaitingForCapacity', pick.reason);
      await sleep(capacityBackoffMs(attempt));
    }
  };

  const ensureBase = async (r: ResolvedProxy, host: string): Promise<EnsuredBase> => {
    const workflowId = imageWorkflowId(host, r.entry, r.imageKey);
    // A base already in the pool is used at once; only a miss joins the ensure-image workflow,
    // which a burst of proxies would otherwise queue on (runs recorded before this ask nothing).
    if (patched('find-cached-base-first')) {
      try {
        const cached = await rpc.findBaseImage({ entry: r.entry, host, key: r.imageKey });
        if (cached !== null) return cached;
      } catch (err) {
        if (isCancellation(err)) throw err;
        const f = failureInfo(err);
        if (f.kind !== 'Transient') throw new ProxyFailed(f.code, f.message);
        // Transient after its retries: the ensure-image workflow tries again.
      }
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      imageResult = undefined;
      waitingOnImage = workflowId;
      st = { ...st, image: { workflowId, bytes: 0, totalBytes: 0, bytesPerSecond: 0 } };
      try {
        await rpc.joinImage({
          workflowId,
          image: { entry: r.entry, host, key: r.imageKey, attemptTimeoutMs: r.timeouts.downloadTotalMs + 60_000 },
          waiter: waiterId,
        });
        const ready = await condition(() => imageResult !== undefined, r.timeouts.downloadTotalMs + 600_000);
        if (!ready) continue;
      } finally {
        waitingOnImage = imageResult === undefined ? workflowId : undefined;
        if (imageResult !== undefined) st = { ...st, image: undefined };
      }
      const result = imageResult!;
      if (result.ok) return result.base;
      st = { ...st, lastError: { kind: result.kind, code: result.code, message: result.message, at: nowIso() } };
      if (result.code === CAPACITY_ERROR) throw new NeedCapacity(result.message);
      if (result.kind !== 'Transient') throw new ProxyFailed(result.code, result.message);
    }
    throw new ProxyFailed('IMAGE_UNAVAILABLE', `the base image ${r.imageKey} was not ready after 3 attempts`);
  };

  /** Creates (or converges) the VM on `host` and waits until libvirt runs it. */
  const createAndBoot = async (r: ResolvedProxy, host: string, base: EnsuredBase): Promise<void> => {
    mayHaveCreated = true;
    try {
      await rpc.createProxyVm({ proxy: r, host, base, createdAt: st.createdAt });
    } catch (err) {
      if (isCancellation(err)) throw err;
      recordError(err);
      const f = failureInfo(err);
      if (f.code === CAPACITY_ERROR) throw new NeedCapacity(f.message);
      throw new ProxyFailed(f.code, f.message);
    }
    startedAtMs = Date.now();
    setState('Booting');
    const deadline = startedAtMs + r.timeouts.bootMs;
    for (;;) {
      const reading = await poll.readProxyVm({ proxy: r, host }).catch((err: unknown) => {
        if (isCancellation(err)) throw err;
        recordError(err);
        return undefined;
      });
      if (reading?.state === 'Running') {
        st = {
          ...st,
          conditions: {
            ...st.conditions,
            VmRunning: setCondition(st.conditions.VmRunning, 'True', 'Running', nowIso()),
          },
        };
        return;
      }
      if (Date.now() >= deadline) {
        throw new ProxyFailed('BOOT_TIMEOUT', `the VM did not run within bootMs (${r.timeouts.bootMs} ms)`);
      }
      await sleep(Math.min(2_000, r.health.intervalMs));
    }
  };

  const provision = async (r: ResolvedProxy): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      if (st.host === undefined) {
        const host = await place(r);
        st = { ...st, host };
      }
      setState('Provisioning');
      try {
        const base = await ensureBase(r, st.host!);
        await createAndBoot(r, st.host!, base);
        return;
      } catch (err) {
        if (!(err instanceof NeedCapacity)) throw err;
        await compensate(r);
        st = { ...st, host: undefined };
        setState('WaitingForCapacity', err.message);
        await sleep(capacityBackoffMs(attempt));
      }
    }
  };

  /** Removes whatever a failed create left (domain, overlay, seed); the base stays. */
  const compensate = async (r: ResolvedProxy): Promise<void> => {
    if (!mayHaveCreated || st.host === undefined) return;
    await CancellationScope.nonCancellable(() => cleanup.deleteProxyVm({ proxy: r, host: st.host! }));
    mayHaveCreated = false;
  };

  /** Applies a pending resize (restart included); the loop's next polls see the VM come back. */
  const applyResize = async (r: ResolvedProxy, host: string): Promise<ResolvedProxy> => {
    const want = pendingResize!;
    const next = { ...r, vm: { ...r.vm, ...want } };
    try {
      await rpc.resizeProxyVm({ proxy: next, host });
      resolved = next;
      st = { ...st, vm: { ...next.vm } };
      publish();
      return next;
    } catch (err) {
      if (isCancellation(err)) throw err;
      recordError(err);
      resizeError = failureInfo(err).message;
      return r;
    } finally {
      pendingResize = undefined;
    }
  };

  const run = async (proxy: ResolvedProxy): Promise<void> => {
    let r = proxy;
    setState('Running');
    st = { ...st, runningSince: st.runningSince ?? nowIso() };
    publish();
    for (let polls = 1; ; polls++) {
      const host = st.host!;
      let reading;
      try {
        reading = await poll.readProxyVm({ proxy: r, host });
      } catch (err) {
        if (isCancellation(err)) throw err;
        recordError(err);
      }
      const at = nowIso();
      if (reading && (reading.state === 'Missing' || reading.state === 'Failed' || reading.state === 'Stopped')) {
        if (st.recreations >= r.health.maxRecreations) {
          throw new ProxyFailed(
            'VM_LOST',
            `the VM was ${reading.state} ${st.recreations + 1} times; maxRecreations is ${r.health.maxRecreations}`,
          );
        }
        st = {
          ...st,
          recreations: st.recreations + 1,
          ip: undefined,
          conditions: {
            VmRunning: setCondition(st.conditions.VmRunning, 'False', reading.state, at),
            AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', 'Recreating', at),
            Healthy: setCondition(st.conditions.Healthy, 'False', 'Recreating', at),
          },
          health: { ...st.health, consecutiveOk: 0 },
        };
        setState('Provisioning', `the VM was ${reading.state}; recreating it on ${host}`);
        try {
          const base = await ensureBase(r, host);
          await createAndBoot(r, host, base);
        } catch (err) {
          if (!(err instanceof NeedCapacity)) throw err;
          // The host's pool is full: the proxy stays on its host (its address and clients are
          // there), so it waits and tries again; each try counts as a recreation (VM_LOST after).
          await compensate(r);
          setState('WaitingForCapacity', `recreating on ${host}: ${err.message}`);
          await sleep(capacityBackoffMs(st.recreations - 1));
          continue;
        }
        setState('Running');
        missedPolls = 0;
        addressedOnce = false;
        continue;
      }
      const why = reading ? `no address read (VM ${reading.state})` : 'the VM could not be read';
      const folded = applyAddress(st, missedPolls, reading?.ip, r.health.addressGracePolls, at, why);
      st = folded.status;
      missedPolls = folded.missedPolls;
      if (st.ip !== undefined) addressedOnce = true;
      else if (!addressedOnce && startedAtMs !== undefined && Date.now() - startedAtMs > r.timeouts.bootMs) {
        throw new ProxyFailed('BOOT_TIMEOUT', `no address was read within bootMs (${r.timeouts.bootMs} ms)`);
      }
      if (st.ip !== undefined && r.health.target !== undefined) {
        // A probe whose activity failed (its worker died, it timed out) is a failed probe, not a
        // failed proxy: the hysteresis decides, as for any other failure.
        const outcome = await probe.probeProxy({ proxy: r, host, ip: st.ip }).catch((err: unknown) => {
          if (isCancellation(err)) throw err;
          const f = failureInfo(err);
          return { ok: false as const, code: 'PROBE_ACTIVITY_FAILED', message: `${f.code}: ${f.message}` };
        });
        st = applyProbe(st, outcome, r.health, nowIso());
      }
      publish();
      const limit = input.continueAsNewAfterPolls;
      if (workflowInfo().continueAsNewSuggested || (limit !== undefined && polls >= limit)) {
        await condition(allHandlersFinished);
        // The memo (the client's spec among it) goes along explicitly.
        await makeContinueAsNewFunc<typeof proxyLifecycle>({ memo: workflowInfo().memo })({
          ...input,
          carried: { resolved: r, status: st, missedPolls, startedAtMs, addressedOnce },
        });
      }
      await condition(() => pendingResize !== undefined, r.health.intervalMs);
      if (pendingResize !== undefined) r = await applyResize(r, host);
    }
  };

  // ---- the run -----------------------------------------------------------------------------

  let failed: ProxyFailed | undefined;
  try {
    await main.run(async () => {
      if (resolved === undefined) {
        resolved = await resolve();
        st = withResolved(st, resolved);
      }
      if (st.state !== 'Running') await provision(resolved);
      await run(resolved);
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
  const cancelled = !deleteRequested && failed === undefined;
  const outcome = await CancellationScope.nonCancellable(async (): Promise<ProxyOutcome> => {
    if (waitingOnImage !== undefined) {
      await getExternalWorkflowHandle(waitingOnImage)
        .signal(imageLeaveSignal, { waiter: waiterId })
        .catch(() => undefined);
      waitingOnImage = undefined;
    }
    if (failed !== undefined) {
      st = {
        ...st,
        // The error that failed the proxy, not an older one it recovered from.
        lastError:
          st.lastError?.code === failed.code
            ? st.lastError
            : { kind: 'Permanent', code: failed.code, message: failed.message, at: nowIso() },
      };
      if (failed.code === 'BOOT_TIMEOUT' && resolved !== undefined && st.host !== undefined) {
        const consoleTail = await probe
          .readConsoleTail({ proxy: resolved, host: st.host })
          .catch((err: unknown) => [`(the console log could not be read: ${failureInfo(err).message})`]);
        st = { ...st, consoleTail };
      }
      if (resolved !== undefined) await compensate(resolved);
      setState('Failed', failed.message);
      return { state: 'Failed', host: st.host, reason: failed.message };
    }
    setState('Deleting', cancelled ? 'the workflow was cancelled' : 'delete requested');
    let deleted;
    if (resolved !== undefined && st.host !== undefined && mayHaveCreated) {
      deleted = await cleanup.deleteProxyVm({ proxy: resolved, host: st.host });
    }
    st = {
      ...st,
      ip: undefined,
      deletedAt: nowIso(),
      conditions: {
        VmRunning: setCondition(st.conditions.VmRunning, 'False', 'Deleted', nowIso()),
        AddressAssigned: setCondition(st.conditions.AddressAssigned, 'False', 'Deleted', nowIso()),
        Healthy: setCondition(st.conditions.Healthy, 'False', 'Deleted', nowIso()),
      },
    };
    setState('Deleted');
    return { state: 'Deleted', host: st.host, deleted };
  });
  await condition(allHandlersFinished);
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
