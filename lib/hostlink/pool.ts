/**
 * Per-host links: one pooled link for short RPCs, shared by every caller and limited to the
 * daemon's `max_client_requests` concurrent calls (callers beyond it queue, each no longer than
 * its own budget); dedicated links for bulk transfers and health checks, so a large upload never
 * delays a state poll. A dead pooled link is replaced on next use; one host's death touches only
 * the calls on that host.
 */
import { EventEmitter } from 'node:events';
import type { CallOptions } from '../libvirt/connection.ts';
import type { LibvirtClient } from '../libvirt/client.ts';
import { SshAbortedError } from '../ssh/errors.ts';
import { SshPoolClosedError, SshPoolQueueTimeoutError } from './errors.ts';
import { Link, openLink } from './link.ts';
import type { HostTarget, LinkOptions, LinkPurpose } from './link.ts';
import { waitBounded } from '../wait.ts';

export interface HostLinksOptions extends LinkOptions {
  /** Calls in flight at once on the pooled link. Default 5, libvirtd's `max_client_requests`. */
  maxConcurrentCalls?: number;
  /** Budget of a call when the caller gives none, in ms (queue wait + dial + call). Default 30000. */
  defaultTimeoutMs?: number;
}

export interface HostLinksStats {
  inFlight: number;
  queued: number;
  /** Highest number of calls in flight at once since creation. */
  maxInFlight: number;
  dials: number;
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

interface Waiter {
  grant(): void;
  fail(err: Error): void;
}

/** The links of one host. Emits {@link HostLinksEvents}. */
export class HostLinks extends EventEmitter<HostLinksEvents> {
  readonly target: HostTarget;
  readonly #options: HostLinksOptions;
  readonly #max: number;
  #link: Link | undefined;
  #dialing: Promise<Link> | undefined;
  #inFlight = 0;
  #maxInFlight = 0;
  #dials = 0;
  #closed: Error | undefined;
  readonly #queue: Waiter[] = [];
  readonly #dedicated = new Set<Link>();
  /** Aborted by close(): ends dials in progress, which belong to the host, not to a caller. */
  readonly #lifetime = new AbortController();

  constructor(target: HostTarget, options: HostLinksOptions = {}) {
    super();
    this.target = target;
    this.#options = options;
    this.#max = options.maxConcurrentCalls ?? 5;
    if (!Number.isInteger(this.#max) || this.#max < 1) {
      throw new RangeError(`maxConcurrentCalls must be a positive integer, got ${options.maxConcurrentCalls}`);
    }
  }

  stats(): HostLinksStats {
    return { inFlight: this.#inFlight, queued: this.#queue.length, maxInFlight: this.#maxInFlight, dials: this.#dials };
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
      this.#release();
    }
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
    const waiters = this.#queue.splice(0);
    for (const w of waiters) w.fail(this.#closedError());
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
    // An abort listener added to an already aborted signal never runs: the caller would wait out
    // its whole budget in the queue.
    if (signal?.aborted === true) {
      return Promise.reject(
        new SshAbortedError(`${this.target.name}: call aborted before it was started`, { cause: signal.reason }),
      );
    }
    if (this.#inFlight < this.#max && this.#queue.length === 0) {
      this.#take();
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waitMs = Math.max(0, deadline - Date.now());
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const i = this.#queue.indexOf(waiter);
        if (i >= 0) this.#queue.splice(i, 1);
      };
      const waiter: Waiter = {
        grant: () => {
          done();
          this.#take();
          resolve();
        },
        fail: (err) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(
        () =>
          waiter.fail(
            new SshPoolQueueTimeoutError(
              `${this.target.name}: no free call slot within the call's budget (${this.#max} calls in flight, ${this.#queue.length} queued)`,
            ),
          ),
        waitMs,
      );
      const onAbort = (): void =>
        waiter.fail(new SshAbortedError(`${this.target.name}: call aborted while queued`, { cause: signal?.reason }));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  #take(): void {
    this.#inFlight++;
    if (this.#inFlight > this.#maxInFlight) this.#maxInFlight = this.#inFlight;
  }

  #release(): void {
    this.#inFlight--;
    const next = this.#queue[0];
    if (next && this.#inFlight < this.#max) next.grant();
  }
}

export { Link };
