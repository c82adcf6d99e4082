/**
 * Per-host links: one pooled link for short RPCs, shared by every caller and limited to the
 * daemon's `max_client_requests` concurrent calls (callers beyond it queue, each no longer than
 * its own budget); dedicated links for bulk transfers and health checks, so a large upload never
 * delays a state poll. A dead pooled link is replaced on next use; one host's death touches only
 * the calls on that host. Domain starts queue for slots of their own (`maxConcurrentStarts`).
 */
import { EventEmitter } from 'node:events';
import type { CallOptions } from '../libvirt/connection.ts';
import type { LibvirtClient } from '../libvirt/client.ts';
import { SshAbortedError } from '../ssh/errors.ts';
import { SshPoolClosedError, SshPoolQueueTimeoutError } from './errors.ts';
import { Link, openLink } from './link.ts';
import type { HostTarget, LinkOptions, LinkPurpose } from './link.ts';
import { FALLBACK_MAX_CONCURRENT_STARTS } from '../../contracts/fleet.ts';
import { Slots } from '../slots.ts';
import { waitBounded } from '../wait.ts';

/** The most start slots a host's CPU count gives (a bigger number is taken from the options only). */
const MAX_STARTS_FROM_CPUS = 64;
/** How long a domain start waits for a start slot by default, in ms: 4 minutes. */
export const START_QUEUE_TIMEOUT_MS = 240_000;

export interface HostLinksOptions extends LinkOptions {
  /** Calls in flight at once on the pooled link. Default 5, libvirtd's `max_client_requests`. */
  maxConcurrentCalls?: number;
  /**
   * Domain starts at once ({@link HostLinks.start}). Default: the host's CPUs, read with
   * NODE_GET_INFO before the first start ({@link FALLBACK_MAX_CONCURRENT_STARTS} until it is read).
   */
  maxConcurrentStarts?: number;
  /** Budget of a call when the caller gives none, in ms (queue wait + dial + call). Default 30000. */
  defaultTimeoutMs?: number;
}

export interface HostLinksStats {
  inFlight: number;
  queued: number;
  /** Highest number of calls in flight at once since creation. */
  maxInFlight: number;
  dials: number;
  /** Domain starts ({@link HostLinks.start}): slots, running, queued, and the most at once since creation. */
  starts: { slots: number; inFlight: number; queued: number; maxInFlight: number };
}

/** A dial of one of the host's links finished. */
export interface LinkDialEvent {
  purpose: LinkPurpose;
  /** Time from the start of the dial to the link (or the failure), in ms. */
  durationMs: number;
  /** Set when the dial failed (the caller sees the same error). */
  error?: Error;
}

/** One of the host's links died. */
export interface LinkDeathEvent {
  purpose: LinkPurpose;
  /** Why: the first reason given to `markDead` (a keepalive timeout, a killed call, a close...). */
  reason: Error;
  /** How long the link lived, in ms. */
  ageMs: number;
}

/** The pooled link is being dialed again because the previous one died. */
export interface LinkRedialEvent {
  /** Why the previous pooled link died. */
  previousReason: Error;
}

/**
 * Events of {@link HostLinks}, for counting and logging link churn (metrics of dials and deaths
 * per host). Listeners run synchronously but never inside a link's teardown; a listener that
 * throws becomes a process warning (code `SSH_LINKS_LISTENER_FAILED`), never a failure of a call.
 *
 * - `dial`: a dial of a pooled or dedicated link finished, successfully or not.
 * - `death`: a link died; `reason` says why. Links closed on purpose (`Link.close`, `HostLinks.close`)
 *   die too, with their closing reason.
 * - `redial`: the pooled link is dialed again after the previous one died (emitted before that
 *   dial's `dial` event).
 */
export interface HostLinksEvents {
  dial: [event: LinkDialEvent];
  death: [event: LinkDeathEvent];
  redial: [event: LinkRedialEvent];
}

/** The links of one host. Emits {@link HostLinksEvents}. */
export class HostLinks extends EventEmitter<HostLinksEvents> {
  readonly target: HostTarget;
  readonly #options: HostLinksOptions;
  #link: Link | undefined;
  #dialing: Promise<Link> | undefined;
  #dials = 0;
  #closed: Error | undefined;
  readonly #calls: Slots;
  readonly #starts: Slots;
  /** The start slots are sized: given in the options, or read from the host's CPUs. */
  #startsSized: boolean;
  #startsSizing: Promise<void> | undefined;
  readonly #dedicated = new Set<Link>();
  /** Aborted by close(): ends dials in progress, which belong to the host, not to a caller. */
  readonly #lifetime = new AbortController();

  constructor(target: HostTarget, options: HostLinksOptions = {}) {
    super();
    this.target = target;
    this.#options = options;
    this.#startsSized = options.maxConcurrentStarts !== undefined;
    const name = target.name;
    const aborted = (what: string) => (cause: unknown, queued: boolean) =>
      new SshAbortedError(`${name}: ${what} aborted ${queued ? 'while queued' : 'before it was started'}`, { cause });
    this.#calls = new Slots(options.maxConcurrentCalls ?? 5, {
      name: 'maxConcurrentCalls',
      timeout: (q) =>
        new SshPoolQueueTimeoutError(
          `${name}: no free call slot within the call's budget (${q.max} calls in flight, ${q.queued} queued)`,
        ),
      aborted: aborted('call'),
    });
    this.#starts = new Slots(options.maxConcurrentStarts ?? FALLBACK_MAX_CONCURRENT_STARTS, {
      name: 'maxConcurrentStarts',
      timeout: (q) =>
        new SshPoolQueueTimeoutError(
          `${name}: no domain start slot after ${Math.round(q.waitedMs / 1000)} s (${q.max} starts at once, ` +
            `${q.queued} queued; providers[].hosts[].maxConcurrentStarts)`,
        ),
      aborted: aborted('domain start'),
    });
  }

  stats(): HostLinksStats {
    return {
      inFlight: this.#calls.inUse,
      queued: this.#calls.queued,
      maxInFlight: this.#calls.maxInUse,
      dials: this.#dials,
      starts: {
        slots: this.#starts.max,
        inFlight: this.#starts.inUse,
        queued: this.#starts.queued,
        maxInFlight: this.#starts.maxInUse,
      },
    };
  }

  /** The pooled link if one is alive (for inspection; calls go through `call`). */
  get pooledLink(): Link | undefined {
    return this.#link && !this.#link.isDead ? this.#link : undefined;
  }

  /**
   * Runs `fn` with the pooled link's client once a slot is free. The budget (`timeoutMs`) covers
   * the queue wait, a dial if needed, and the call: `fn` receives the remaining budget to pass to
   * the client.
   */
  async call<T>(fn: (client: LibvirtClient, call: CallOptions) => Promise<T>, options: CallOptions = {}): Promise<T> {
    const budgetMs = options.timeoutMs ?? this.#options.defaultTimeoutMs ?? 30_000;
    const deadline = Date.now() + budgetMs;
    await this.#acquire(deadline, options.signal);
    try {
      const link = await this.#pooled(budgetMs, deadline, options.signal);
      const remaining = Math.max(1, deadline - Date.now());
      return await fn(link.client, { timeoutMs: remaining, signal: options.signal });
    } finally {
      this.#calls.release();
    }
  }

  /**
   * Runs `fn`, a domain start (its calls go through {@link call} as usual), once one of the host's
   * start slots is free; waits no longer than `timeoutMs` (default {@link START_QUEUE_TIMEOUT_MS})
   * and `signal` allow. There are `maxConcurrentStarts` slots, or as many as the host has CPUs
   * (read once, before the first start). Starting a QEMU process is CPU-bound: more at once than
   * the host has CPUs only share them, so queued starts each finish sooner than the same starts
   * side by side.
   */
  async start<T>(fn: () => Promise<T>, options: CallOptions = {}): Promise<T> {
    if (this.#closed) throw this.#closedError();
    const deadline = Date.now() + (options.timeoutMs ?? START_QUEUE_TIMEOUT_MS);
    if (!this.#startsSized) await this.#sizeStarts(deadline, options.signal);
    return this.#starts.run(fn, deadline, options.signal);
  }

  /**
   * Sizes the start slots to the host's CPUs (NODE_GET_INFO on the pooled link), once; concurrent
   * starts share the read. A failed read leaves the fallback in place and is tried again at the
   * next start; the start itself goes on.
   */
  #sizeStarts(deadline: number, signal?: AbortSignal): Promise<void> {
    this.#startsSizing ??= this.call((c, call) => c.nodeGetInfo(call), {
      timeoutMs: Math.max(1, Math.min(deadline - Date.now(), this.#options.defaultTimeoutMs ?? 30_000)),
      signal,
    })
      .then((info) => {
        this.#starts.resize(Math.min(MAX_STARTS_FROM_CPUS, Math.max(1, info.cpus)));
        this.#startsSized = true;
      })
      .catch(() => undefined)
      .finally(() => (this.#startsSizing = undefined));
    return this.#startsSizing;
  }

  /** A new link of its own for a bulk transfer or a health check; the caller closes it. */
  async dedicated(purpose: Exclude<LinkPurpose, 'rpc'>, signal?: AbortSignal): Promise<Link> {
    if (this.#closed) throw this.#closedError();
    const link = await this.#dial(purpose, this.#dialSignal(signal));
    if (this.#closed) {
      link.markDead(this.#closed);
      throw this.#closedError();
    }
    this.#dedicated.add(link);
    void link.dead.then(() => this.#dedicated.delete(link));
    return link;
  }

  /** Kills every link of the host now (never waits); queued callers go on to a new link. Idempotent. */
  markDead(reason: Error): void {
    this.#link?.markDead(reason);
    for (const link of [...this.#dedicated]) link.markDead(reason);
  }

  /** Closes the host: queued and future calls fail; every link is killed. */
  close(reason: Error = new Error(`${this.target.name}: links closed`)): void {
    if (this.#closed) return;
    this.#closed = reason;
    this.#calls.failQueued(() => this.#closedError());
    this.#starts.failQueued(() => this.#closedError());
    this.#lifetime.abort(reason);
    this.markDead(reason);
  }

  #closedError(): SshPoolClosedError {
    return new SshPoolClosedError(`${this.target.name}: the link pool is closed`, { cause: this.#closed });
  }

  /**
   * The live pooled link, dialing one if there is none. Concurrent callers share one dial, which
   * belongs to the host (close() aborts it), not to the caller that started it: each caller waits
   * for it no longer than its own deadline and signal allow, and giving up fails that caller alone
   * (the dial goes on, and its link serves the next calls).
   */
  #pooled(budgetMs: number, deadline: number, signal?: AbortSignal): Promise<Link> {
    if (this.#link && !this.#link.isDead) return Promise.resolve(this.#link);
    if (this.#closed) return Promise.reject(this.#closedError());
    this.#dialing ??= this.#dialPooled();
    const name = this.target.name;
    return waitBounded(this.#dialing, {
      deadline,
      onTimeout: () =>
        new SshPoolQueueTimeoutError(
          `${name}: no pooled link within the call's budget (${budgetMs} ms); the dial goes on for later calls`,
        ),
      signal,
      onAbort: () =>
        new SshAbortedError(`${name}: call aborted while its link was being dialed`, { cause: signal?.reason }),
    });
  }

  async #dialPooled(): Promise<Link> {
    const previous = this.#link?.deadReason;
    if (previous !== undefined) this.#emitSafely('redial', { previousReason: previous });
    try {
      const link = await this.#dial('rpc', this.#dialSignal());
      if (this.#closed) {
        link.markDead(this.#closed);
        throw this.#closedError();
      }
      this.#link = link;
      return link;
    } catch (err) {
      if (this.#closed) throw this.#closedError();
      throw err;
    } finally {
      this.#dialing = undefined;
    }
  }

  /**
   * Dials one link, counts it, and reports the dial and, later, the link's death as events. A
   * dial that fails after close() fails with SshPoolClosedError.
   */
  async #dial(purpose: LinkPurpose, signal: AbortSignal): Promise<Link> {
    this.#dials++;
    const started = performance.now();
    const durationMs = (): number => Math.round(performance.now() - started);
    let link: Link;
    try {
      link = await openLink(this.target, purpose, { ...this.#options, signal });
    } catch (err) {
      const error = this.#closed ? this.#closedError() : err instanceof Error ? err : new Error(String(err));
      this.#emitSafely('dial', { purpose, durationMs: durationMs(), error });
      throw error;
    }
    this.#emitSafely('dial', { purpose, durationMs: durationMs() });
    void link.dead.then((reason) => this.#emitSafely('death', { purpose, reason, ageMs: Date.now() - link.openedAt }));
    return link;
  }

  /** Emits `event`; a listener's failure becomes a process warning, never the caller's failure. */
  #emitSafely<K extends keyof HostLinksEvents>(event: K, ...args: HostLinksEvents[K]): void {
    try {
      (this as EventEmitter).emit(event, ...args);
    } catch (err) {
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), { code: 'SSH_LINKS_LISTENER_FAILED' });
    }
  }

  /** The signal a dial runs under: the host's lifetime, the options' signal, and `extra`. */
  #dialSignal(extra?: AbortSignal): AbortSignal {
    const signals = [this.#lifetime.signal, this.#options.signal, extra].filter((s) => s !== undefined);
    return signals.length === 1 ? this.#lifetime.signal : AbortSignal.any(signals);
  }

  #acquire(deadline: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closedError());
    return this.#calls.acquire(deadline, signal);
  }
}

export { Link };
