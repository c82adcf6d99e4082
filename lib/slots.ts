/**
 * A fixed number of slots taken in arrival order: callers beyond `max` queue, each no longer than
 * its own deadline and signal allow. The host's pooled link limits its calls in flight with one
 * (lib/hostlink/pool.ts), and its domain starts with another.
 */

/** The errors a wait ends with: they name what the slots are for. */
export interface SlotErrors {
  /** What the count is called where it is set, for the RangeError of a bad one (`maxConcurrentCalls`). */
  name?: string;
  /** The deadline passed while queued. */
  timeout(state: { max: number; inUse: number; queued: number; waitedMs: number }): Error;
  /** The signal aborted before or while queued. */
  aborted(reason: unknown, queued: boolean): Error;
}

interface Waiter {
  grant(): void;
  fail(err: Error): void;
}

export class Slots {
  #max: number;
  readonly #errors: SlotErrors;
  readonly #queue: Waiter[] = [];
  #inUse = 0;
  #maxInUse = 0;

  constructor(max: number, errors: SlotErrors) {
    this.#max = checked(max, errors.name);
    this.#errors = errors;
  }

  get max(): number {
    return this.#max;
  }

  /** Sets the number of slots: more grants queued callers at once; fewer lets the ones in use finish. */
  resize(max: number): void {
    this.#max = checked(max, this.#errors.name);
    while (this.#queue.length > 0 && this.#inUse < this.#max) this.#queue[0]!.grant();
  }

  get inUse(): number {
    return this.#inUse;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /** The most slots in use at once since creation. */
  get maxInUse(): number {
    return this.#maxInUse;
  }

  /**
   * Takes a slot once one is free and no earlier caller waits, by `deadline` (epoch ms) and before
   * `signal` aborts; the caller gives it back with {@link release}, once.
   */
  acquire(deadline: number, signal?: AbortSignal): Promise<void> {
    // An abort listener added to an already aborted signal never runs: the caller would wait out
    // its whole budget in the queue.
    if (signal?.aborted === true) return Promise.reject(this.#errors.aborted(signal.reason, false));
    if (this.#inUse < this.#max && this.#queue.length === 0) {
      this.#take();
      return Promise.resolve();
    }
    const queuedAt = Date.now();
    return new Promise<void>((resolve, reject) => {
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
            this.#errors.timeout({
              max: this.#max,
              inUse: this.#inUse,
              queued: this.#queue.length,
              waitedMs: Date.now() - queuedAt,
            }),
          ),
        Math.max(0, deadline - Date.now()),
      );
      const onAbort = (): void => waiter.fail(this.#errors.aborted(signal?.reason, true));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  /** Gives a slot back: the first queued caller takes it. */
  release(): void {
    this.#inUse--;
    const next = this.#queue[0];
    if (next && this.#inUse < this.#max) next.grant();
  }

  /** `fn` in a slot: acquired by `deadline` and `signal`, given back when `fn` settles. */
  async run<T>(fn: () => Promise<T>, deadline: number, signal?: AbortSignal): Promise<T> {
    await this.acquire(deadline, signal);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  /** Fails every queued caller with `err` (slots in use stay taken until released). */
  failQueued(err: () => Error): void {
    for (const w of this.#queue.splice(0)) w.fail(err());
  }

  #take(): void {
    this.#inUse++;
    if (this.#inUse > this.#maxInUse) this.#maxInUse = this.#inUse;
  }
}

function checked(max: number, name = 'slots'): number {
  if (!Number.isInteger(max) || max < 1) throw new RangeError(`${name} must be a positive integer, got ${max}`);
  return max;
}
