// The phases that bring a proxy up: resolve its spec, place it on a host (waiting for capacity),
// ensure the base image there, create the VM and wait until libvirt runs it. Each phase reads and
// writes the run state (state.ts); a permanent failure is a ProxyFailed, a full host NeedCapacity.
import { isCancellation, sleep } from '@temporalio/workflow';
import { imageWorkflowId } from '../../contracts/image.ts';
import type { EnsuredBase } from '../../contracts/image.ts';
import { CODES } from '../../contracts/errors.ts';
import { imageAttemptTimeoutMs } from '../../contracts/limits.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { ResolvedProxy } from '../../contracts/proxy.ts';
import { failureInfo } from '../failures.ts';
import type { ImageWaiter } from '../image-join.ts';
import { localReads, poll, rpc } from '../stubs.ts';
import { compensate } from './cleanup.ts';
import { capacityBackoffMs, hostLacks, pickHost, PLACEMENT_NEED_BYTES } from './placement.ts';
import type { VmNeed } from './placement.ts';
import { nowIso, recordError, setState } from './publish.ts';
import { NeedCapacity, ProxyFailed } from './state.ts';
import type { ProxyRun } from './state.ts';
import type { ProxyWorkflowInput } from '../../contracts/proxy-run.ts';
import { markBooting, markVmRunning } from './status.ts';

/** How much longer than the entry's download budget a proxy waits on the image before joining again: 10 minutes. */
const IMAGE_WAIT_MARGIN_MS = 600_000;

/** The stubs for the reads before the create (resolveProxy, surveyHosts, findBaseImage): local activities. */
const reads = (): typeof rpc => localReads;

/** Resolves the spec against the worker's providers file; a bad spec fails the proxy. */
export async function resolve(input: ProxyWorkflowInput): Promise<ResolvedProxy> {
  try {
    return await reads().resolveProxy({
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
}

/**
 * Places the proxy on a host, never one of `avoid` (a move's), until one has room:
 * WaitingForCapacity in between, with backoff.
 */
async function place(run: ProxyRun, r: ResolvedProxy, avoid: readonly string[]): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const survey = await reads().surveyHosts({ entry: r.entry });
    const pick = pickAvoiding(memberSurvey(survey, run.input, r.vm), r.name, r.vm, avoid);
    if (pick.host !== undefined) return pick.host;
    setState(run, 'WaitingForCapacity', pick.reason);
    await sleep(capacityBackoffMs(attempt));
  }
}

/** pickHost over the hosts not in `avoid`; the reason names the avoided ones. */
export function pickAvoiding(
  survey: HostSurvey[],
  name: string,
  vm: VmNeed,
  avoid: readonly string[],
): ReturnType<typeof pickHost> {
  if (avoid.length === 0) return pickHost(survey, name, vm);
  const rest = survey.filter((s) => !avoid.includes(s.host));
  const left = avoid.join(', ');
  if (rest.length === 0) return { reason: `no host but ${left}, which the move avoids`, capacity: true };
  const pick = pickHost(rest, name, vm);
  return pick.host !== undefined ? pick : { ...pick, reason: `${pick.reason}; the move avoids ${left}` };
}

/**
 * The hosts a pool member may go to: never an avoided one; among the reachable, uncordoned others
 * with room for it (placement.ts hostLacks), those with
 * the fewest of the pool's members (and under its maxPerHost), so members spread (members created
 * together take those hosts in turn, by their spreadSlot); all allowed
 * hosts when none is open (pickHost skips the cordoned and the wait for capacity says why). A
 * proxy outside a pool: all.
 */
export function memberSurvey(survey: HostSurvey[], input: ProxyWorkflowInput, vm?: VmNeed): HostSurvey[] {
  const pool = input.pool;
  if (pool === undefined) return survey;
  const allowed = survey.filter((s) => !(pool.avoidHosts ?? []).includes(s.host));
  const count = (s: HostSurvey): number => pool.hostCounts?.[s.host] ?? 0;
  // Only hosts with room count as open: a member goes to a fuller host of the pool rather than wait.
  const open = allowed.filter(
    (s) =>
      s.reachable &&
      s.cordoned !== true &&
      count(s) < (pool.maxPerHost ?? Infinity) &&
      hostLacks(s, PLACEMENT_NEED_BYTES, vm).length === 0,
  );
  if (open.length === 0) return allowed.filter((s) => !s.reachable || count(s) < (pool.maxPerHost ?? Infinity));
  const fewest = Math.min(...open.map(count));
  const tied = open.filter((s) => count(s) === fewest).sort((a, b) => a.host.localeCompare(b.host));
  const slot = pool.spreadSlot;
  return slot === undefined || slot < 0 ? tied : [tied[slot % tied.length]!];
}

/**
 * Places (never on `avoid`), ensures the base and creates the VM; a full pool starts over from
 * placement. `note`: the Provisioning state's reason (a move's).
 */
export async function provision(
  run: ProxyRun,
  images: ImageWaiter,
  r: ResolvedProxy,
  avoid: readonly string[] = [],
  note?: (host: string) => string,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    if (run.status.host === undefined) {
      const host = await place(run, r, avoid);
      run.status = { ...run.status, host };
    }
    setState(run, 'Provisioning', note?.(run.status.host!));
    try {
      const base = await ensureBase(run, images, r, run.status.host!);
      await createAndBoot(run, r, run.status.host!, base);
      return;
    } catch (err) {
      if (!(err instanceof NeedCapacity)) throw err;
      await compensate(run, r);
      run.status = { ...run.status, host: undefined };
      setState(run, 'WaitingForCapacity', err.message);
      await sleep(capacityBackoffMs(attempt));
    }
  }
}

/** The base image on `host`: from the pool when it is there, else through the ensure-image workflow. */
export async function ensureBase(
  run: ProxyRun,
  images: ImageWaiter,
  r: ResolvedProxy,
  host: string,
): Promise<EnsuredBase> {
  const workflowId = imageWorkflowId(host, r.entry, r.imageKey);
  // A base already in the pool is used at once; only a miss joins the ensure-image workflow,
  // which a burst of proxies would otherwise queue on.
  try {
    const cached = await reads().findBaseImage({ entry: r.entry, host, key: r.imageKey });
    if (cached !== null) return cached;
  } catch (err) {
    if (isCancellation(err)) throw err;
    const f = failureInfo(err);
    if (f.kind !== 'Transient') throw new ProxyFailed(f.code, f.message);
    // Transient after its retries: the ensure-image workflow tries again.
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    run.status = { ...run.status, image: { workflowId, bytes: 0, totalBytes: 0, bytesPerSecond: 0 } };
    try {
      const attemptTimeoutMs = imageAttemptTimeoutMs(r.timeouts.downloadTotalMs);
      await images.join(workflowId, { entry: r.entry, host, key: r.imageKey, attemptTimeoutMs });
      if (!(await images.ready([workflowId], r.timeouts.downloadTotalMs + IMAGE_WAIT_MARGIN_MS))) continue;
    } finally {
      if (images.result(workflowId) !== undefined) run.status = { ...run.status, image: undefined };
    }
    const result = images.result(workflowId)!;
    if (result.ok) return result.base;
    run.status = {
      ...run.status,
      lastError: { kind: result.kind, code: result.code, message: result.message, at: nowIso() },
    };
    if (result.code === CODES.insufficientCapacity) throw new NeedCapacity(result.message);
    if (result.kind !== 'Transient') throw new ProxyFailed(result.code, result.message);
  }
  throw new ProxyFailed(CODES.imageUnavailable, `the base image ${r.imageKey} was not ready after 3 attempts`);
}

/** Creates (or converges) the VM on `host` and waits until libvirt runs it. */
export async function createAndBoot(run: ProxyRun, r: ResolvedProxy, host: string, base: EnsuredBase): Promise<void> {
  run.mayHaveCreated = true;
  let started = false;
  try {
    ({ started } = await rpc.createProxyVm({ proxy: r, host, base, createdAt: run.status.createdAt }));
  } catch (err) {
    if (isCancellation(err)) throw err;
    recordError(run, err);
    const f = failureInfo(err);
    if (f.code === CODES.insufficientCapacity) throw new NeedCapacity(f.message);
    throw new ProxyFailed(f.code, f.message);
  }
  const startedAtMs = Date.now();
  run.startedAtMs = startedAtMs;
  setState(run, 'Booting');
  const deadline = startedAtMs + r.timeouts.bootMs;
  const running = (): void => {
    run.status = markVmRunning(run.status, nowIso());
    // Healthy Unknown (Booting) from the start until a probe passes.
    if (r.health.target !== undefined) {
      run.status = markBooting(run.status, new Date(startedAtMs).toISOString());
    }
  };
  // libvirt ran the domain when the create started it (domainCreate returned): no poll to ask.
  // A create that found the domain already there polls as before; the monitor notices a VM
  // that stops right after its start (VmLost).
  if (started) {
    running();
    return;
  }
  for (;;) {
    const reading = await poll.readProxyVm({ proxy: r, host }).catch((err: unknown) => {
      if (isCancellation(err)) throw err;
      recordError(run, err);
      return undefined;
    });
    if (reading?.state === 'Running') {
      running();
      return;
    }
    if (Date.now() >= deadline) {
      throw new ProxyFailed(CODES.bootTimeout, `the VM did not run within bootMs (${r.timeouts.bootMs} ms)`);
    }
    await sleep(Math.min(2_000, r.health.intervalMs));
  }
}
