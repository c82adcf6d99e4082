// A host's maintenance workflow (docs/hosts.md), ID `host/<entry>/<host>`: open only while the
// host is cordoned. Cordon stops new placements (placement's survey reads the workflow); drain
// also moves the host's proxies off it: each pool with members there is told once
// (`poolHostDrainSignal`, the pool replaces them within its budget), each standalone proxy is asked
// to move (`proxyMoveUpdate`; a refusal is recorded and asked again next pass), and a pass every
// `drainPollMs` counts what is left until nothing is: Drained. Uncordon tells those pools the drain
// is over and the workflow ends. At rest (Cordoned or Drained) it waits on a condition with no
// timer: no events until the next operator action.
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  patched,
  proxyActivities,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import {
  DEFAULT_DRAIN_POLL_MS,
  MAX_DRAIN_DEADLINE_MS,
  MAX_HOST_REASON_LENGTH,
  MIN_DRAIN_DEADLINE_MS,
} from '../contracts/host.ts';
import type {
  DrainedProxy,
  HostActionRequest,
  HostCarried,
  HostProxy,
  HostStatus,
  HostWorkflowInput,
} from '../contracts/host.ts';
import { hostCordonUpdate, hostDrainUpdate, hostStatusQuery, hostUncordonUpdate } from '../contracts/messages.ts';
import { failureInfo } from './failures.ts';
import { QUICK_ACTIVITY } from './activity-options.ts';
import { quick } from './stubs.ts';

/**
 * Cordon, drain and uncordon applied in the order accepted (inTurn below). The host workflow
 * auto-upgrades (contracts/versioning.ts), so runs recorded before keep their order. Retire (first
 * `deprecatePatch`, then nothing) once no open host run predates it: `egressctl replay --type
 * hostWorkflow` passes with the old branch removed.
 */
export const HOST_HANDLER_ORDER_PATCH = 'host-handler-order';

/** The listing reads visibility and the host's domains (each under the entry's rpcMs): a minute per attempt. */
const listing = proxyActivities<Activities>({ ...QUICK_ACTIVITY, startToCloseTimeout: '1 minute' });

const now = (): string => new Date().toISOString();

/** A validator's check of an action's body: what cannot be accepted is refused before the history. */
function validRequest(what: string, req: HostActionRequest | undefined): void {
  if (req === undefined || req === null) return;
  if (typeof req !== 'object' || Array.isArray(req))
    throw new Error(`${what}: the body must be an object like {"reason": "..."}`);
  const fields = what === 'drain' ? ['reason', 'deadlineMs'] : ['reason'];
  const extra = Object.keys(req).filter((k) => !fields.includes(k));
  if (extra[0] === 'deadlineMs') throw new Error(`${what}: deadlineMs is a drain's field (${what} takes only reason)`);
  if (extra.length > 0)
    throw new Error(
      `${what}: unknown field ${extra[0]} (only ${fields.join(' and ')} ${fields.length === 1 ? 'is' : 'are'} accepted)`,
    );
  if (req.reason !== undefined && typeof req.reason !== 'string') throw new Error(`${what}: reason must be a string`);
  if ((req.reason ?? '').length > MAX_HOST_REASON_LENGTH)
    throw new Error(`${what}: reason is longer than ${MAX_HOST_REASON_LENGTH} characters; shorten it`);
  const d = req.deadlineMs;
  if (d !== undefined && (!Number.isInteger(d) || d < MIN_DRAIN_DEADLINE_MS || d > MAX_DRAIN_DEADLINE_MS)) {
    throw new Error(
      `${what}: deadlineMs must be a whole number of milliseconds from ${MIN_DRAIN_DEADLINE_MS} to ` +
        `${MAX_DRAIN_DEADLINE_MS} (30 days), got ${JSON.stringify(d)}`,
    );
  }
}

export async function hostWorkflow(input: HostWorkflowInput): Promise<HostStatus> {
  const { entry, host } = input;
  const pollMs = input.drainPollMs ?? DEFAULT_DRAIN_POLL_MS;
  const s: HostCarried = input.carried ?? { phase: 'Schedulable', cordoned: false, poolsTold: {}, known: false };

  const status = (): HostStatus => {
    const out: HostStatus = { entry, host, phase: s.phase, cordoned: s.cordoned };
    if (s.since !== undefined) out.since = s.since;
    if (s.reason !== undefined) out.reason = s.reason;
    if (s.drain !== undefined) out.drain = { ...s.drain, proxies: s.drain.proxies.map((p) => ({ ...p })) };
    return out;
  };
  const publish = (): void => upsertMemo({ cordoned: s.cordoned, phase: s.phase });

  /** The host is in the worker's providers file (once per workflow); an unknown one fails the update. */
  const checkKnown = async (): Promise<void> => {
    if (s.known) return;
    try {
      await quick.checkMaintenanceHost({ entry, host });
    } catch (err) {
      const f = failureInfo(err);
      throw ApplicationFailure.create({ type: f.code, message: f.message, nonRetryable: true });
    }
    s.known = true;
  };

  const cordon = (req: HostActionRequest | undefined): void => {
    if (s.cordoned) return;
    s.cordoned = true;
    s.phase = 'Cordoned';
    s.since = now();
    if (req?.reason !== undefined) s.reason = req.reason;
    else delete s.reason;
    delete s.drain;
  };

  /**
   * Cordon, drain and uncordon change the state one at a time, in the order they were accepted:
   * each takes its turn on arrival, starts `first` at once (the host check: it reads no state),
   * and applies itself once the ones before it are done. Else an uncordon accepted while the first
   * cordon checks the host would run first and the host would end cordoned. Runs recorded before
   * HOST_HANDLER_ORDER_PATCH apply each as its own check ends.
   */
  let turns: Promise<unknown> = Promise.resolve();
  /** Updates accepted by this run (each takes one turn), for `continueAsNewAfterUpdates`. */
  let updates = 0;
  const inTurn = async <T>(first: () => Promise<void>, apply: () => T): Promise<T> => {
    updates++;
    if (!patched(HOST_HANDLER_ORDER_PATCH)) {
      if (first === nothingFirst) return apply();
      await first();
      return apply();
    }
    const before = turns;
    let done!: () => void;
    turns = Promise.all([before, new Promise<void>((resolve) => (done = resolve))]);
    try {
      await first();
      await before;
      return apply();
    } finally {
      done();
    }
  };
  const nothingFirst = (): Promise<void> => Promise.resolve();

  setHandler(hostStatusQuery, status);
  setHandler(
    hostCordonUpdate,
    (req) =>
      inTurn(checkKnown, () => {
        cordon(req);
        publish();
        return status();
      }),
    { validator: (req: HostActionRequest) => validRequest('cordon', req) },
  );
  setHandler(
    hostDrainUpdate,
    (req) =>
      inTurn(checkKnown, () => {
        cordon(req);
        if (s.phase === 'Cordoned') {
          s.phase = 'Draining';
          s.drain = { startedAt: now(), proxies: [], remaining: 0 };
          if (req?.reason !== undefined) s.reason = req.reason;
          log.info('host drain started', { entry, host, reason: s.reason });
        }
        if (req?.deadlineMs !== undefined && s.phase === 'Draining' && s.drain !== undefined) {
          s.drain.deadlineAt = new Date(Date.now() + req.deadlineMs).toISOString();
          delete s.drain.overdue;
          log.info('host drain deadline set', { entry, host, deadlineAt: s.drain.deadlineAt });
        }
        publish();
        return status();
      }),
    { validator: (req: HostActionRequest) => validRequest('drain', req) },
  );
  setHandler(
    hostUncordonUpdate,
    async () => {
      await inTurn(nothingFirst, () => {
        if (!s.cordoned) return;
        s.cordoned = false;
        s.phase = 'Schedulable';
        delete s.since;
        delete s.reason;
        delete s.drain;
        publish();
        log.info('host uncordoned', { entry, host });
      });
      // The main loop tells the pools the drain is over; a cordon meanwhile keeps it cordoned.
      await condition(() => Object.keys(s.poolsTold).length === 0 || s.cordoned);
      return status();
    },
    { validator: (req: HostActionRequest) => validRequest('uncordon', req) },
  );

  /** Tells every pool told of the drain that it is over (one that cannot be told is logged and dropped). */
  const release = async (): Promise<void> => {
    for (const pool of Object.keys(s.poolsTold)) {
      try {
        await quick.signalPoolHostDrain({ pool, host, draining: false });
      } catch (err) {
        log.warn('a pool could not be told the host drain is over', { entry, host, pool, error: failureInfo(err) });
      }
      delete s.poolsTold[pool];
    }
  };

  const draining = (): boolean => s.phase === 'Draining' && s.cordoned;
  /** Time to continue as new: the server suggests it, or (tests) the input's count of updates is reached. */
  const continueDue = (): boolean =>
    workflowInfo().continueAsNewSuggested ||
    (input.continueAsNewAfterUpdates !== undefined && updates >= input.continueAsNewAfterUpdates);

  /** One pass of the drain: list, ask, count; Drained when nothing is left. */
  const drainPass = async (): Promise<void> => {
    let found: HostProxy[];
    let lastError: string | undefined;
    try {
      const r = await listing.listHostProxies({ entry, host });
      found = r.proxies;
      lastError = r.hostError;
    } catch (err) {
      const f = failureInfo(err);
      if (draining() && s.drain !== undefined) s.drain.lastError = `${f.code}: ${f.message}`;
      log.warn('host drain: listing failed; next pass', { entry, host, error: f });
      return;
    }
    const drain = s.drain;
    if (!draining() || drain === undefined) return;
    if (lastError === undefined) delete drain.lastError;
    else drain.lastError = lastError;
    const byName = new Map(drain.proxies.map((p) => [p.name, p]));
    const failedPools = new Map<string, string>();
    for (const p of found) {
      if (!draining()) return;
      let rec = byName.get(p.name);
      if (rec === undefined || rec.state === 'gone') {
        rec = { name: p.name, state: 'asked', ...(p.pool === undefined ? {} : { pool: p.pool }) };
        byName.set(p.name, rec);
      }
      const entryRec: DrainedProxy = rec;
      if (p.orphan) {
        entryRec.error = 'no open workflow: the orphan GC deletes this VM';
      } else if (p.elsewhere) {
        delete entryRec.error; // its workflow is elsewhere and deletes this VM (a move under way)
      } else if (p.pool !== undefined) {
        const pool = p.pool;
        if (s.poolsTold[pool] !== true && !failedPools.has(pool)) {
          s.poolsTold[pool] = false; // told or not, uncordon tells it the drain is over
          try {
            await quick.signalPoolHostDrain({ pool, host, draining: true });
            s.poolsTold[pool] = true;
          } catch (err) {
            const f = failureInfo(err);
            failedPools.set(pool, `${f.code}: ${f.message}`);
          }
        }
        if (failedPools.has(pool)) entryRec.error = failedPools.get(pool)!;
        else delete entryRec.error;
      } else if (rec.error !== undefined || !drain.proxies.includes(rec)) {
        try {
          const r = await quick.moveProxyOffHost({ entry, name: p.name, avoidHosts: [host], reason: s.reason });
          if (r.kind === 'refused') entryRec.error = r.message;
          else delete entryRec.error;
        } catch (err) {
          const f = failureInfo(err);
          entryRec.error = `${f.code}: ${f.message}`;
        }
      }
    }
    if (!draining()) return;
    const here = new Set(found.map((p) => p.name));
    for (const rec of byName.values()) if (!here.has(rec.name)) rec.state = 'gone';
    drain.proxies = [...byName.values()];
    drain.remaining = here.size;
    if (here.size === 0) {
      s.phase = 'Drained';
      drain.finishedAt = now();
      publish();
      log.info('host drained', { entry, host, proxies: drain.proxies.length });
    } else if (drain.deadlineAt !== undefined && drain.overdue !== true && Date.now() >= Date.parse(drain.deadlineAt)) {
      // Once per deadline: the status says so (and the API's egress_host_drain_overdue); the passes go on.
      drain.overdue = true;
      const stuck = drain.proxies.filter((p) => p.state === 'asked');
      log.warn('host drain past its deadline with proxies left', {
        entry,
        host,
        deadlineAt: drain.deadlineAt,
        remaining: drain.remaining,
        proxies: stuck.slice(0, 20).map((p) => (p.error === undefined ? p.name : `${p.name}: ${p.error}`)),
      });
    }
  };

  for (;;) {
    // At rest (Cordoned, Drained): no timer; only an update (or a suggested continue-as-new) wakes it.
    await condition(
      () =>
        draining() ||
        (!s.cordoned && (Object.keys(s.poolsTold).length > 0 || allHandlersFinished())) ||
        (continueDue() && allHandlersFinished()),
    );
    if (!s.cordoned) {
      // Schedulable, every pool told and no update in flight: the host costs nothing from here on.
      if (Object.keys(s.poolsTold).length === 0) return status();
      await release();
      continue;
    }
    if (draining()) {
      await drainPass();
      if (draining()) await condition(() => !draining(), pollMs);
    }
    if (continueDue()) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof hostWorkflow>({ ...input, carried: s });
    }
  }
}
