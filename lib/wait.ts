/**
 * The one bounded wait of the project: settle like a promise, unless a time bound passes, an
 * AbortSignal fires or another failure interrupts first. Every timer, listener and subscription
 * is released on every path, and the promise waited on is left running (its outcome observed,
 * never unhandled).
 */

/** Something whose failure can interrupt a wait: subscribe with `onReject`, get an unsubscribe. */
export interface Interrupter {
  onReject(fn: (err: Error) => void): () => void;
}

export interface WaitBounds {
  /** Give up this many ms from now. Unset: no time bound (unless `deadline`). */
  timeoutMs?: number;
  /** Give up at this time (ms since the epoch). Ignored when `timeoutMs` is set. */
  deadline?: number;
  /** The error when the time bound passes (it may kill a connection: its error still wins). */
  onTimeout?: () => Error;
  /** Give up when this fires (at once if it already has). */
  signal?: AbortSignal;
  /** The error when `signal` fires. */
  onAbort?: () => Error;
  /** Failures that end the wait with their own error. */
  interrupts?: readonly Interrupter[];
}

/**
 * Settles like `p`, unless a bound in `bounds` ends the wait first. Once the time bound fired,
 * its error wins even if `onTimeout`, by killing a connection, made an interrupter fail first.
 */
export function waitBounded<T>(p: Promise<T>, bounds: WaitBounds): Promise<T> {
  p.catch(() => undefined); // observed even when the wait gives up before it settles
  const { signal } = bounds;
  const abortError = (): Error => bounds.onAbort?.() ?? new Error('aborted', { cause: signal?.reason });
  if (signal?.aborted === true) return Promise.reject(abortError());
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timingOut = false;
    const offs: (() => void)[] = [];
    const finish = (err: Error | undefined, value?: T): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      for (const off of offs) off();
      if (err) reject(err);
      else resolve(value as T);
    };
    const onAbort = (): void => finish(abortError());
    const ms = bounds.timeoutMs ?? (bounds.deadline === undefined ? undefined : bounds.deadline - Date.now());
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(
            () => {
              timingOut = true;
              finish(bounds.onTimeout?.() ?? new Error(`no result within ${bounds.timeoutMs ?? 'the deadline'} ms`));
            },
            Math.max(0, ms),
          );
    signal?.addEventListener('abort', onAbort, { once: true });
    for (const i of bounds.interrupts ?? []) {
      offs.push(
        i.onReject((err) => {
          if (!timingOut) finish(err);
        }),
      );
      if (settled) return;
    }
    p.then(
      (value) => finish(undefined, value),
      (err: unknown) => finish(err instanceof Error ? err : new Error(String(err))),
    );
  });
}

/** Resolves once `p` settles, either way (for "wait for the other one to finish"). */
export function settled(p: Promise<unknown>): Promise<void> {
  return p.then(
    () => undefined,
    () => undefined,
  );
}

/** Settles the promise of {@link settleOnce}; true only for the call that settled it. */
export type Settle<T> = (err: Error | undefined, value?: T) => boolean;

/** Releases what `start` subscribed; told the error the promise is about to reject with, if any. */
export type Release = (err: Error | undefined) => void;

export interface SettleBounds {
  /** Give up this many ms from now. Unset: no time bound. */
  timeoutMs?: number;
  /** The error when the time bound passes. */
  onTimeout?: () => Error;
  /** Runs with that error once the time bound settled the promise (e.g. kill a stalled link). */
  afterTimeout?: (err: Error) => void;
  /** Give up when this fires; rejects at once, without calling `start`, if it already has. */
  signal?: AbortSignal;
  /** The error when `signal` fires. */
  onAbort?: () => Error;
}

/**
 * The one "settle once, from event listeners" of the project, for work that is not a promise
 * yet (a socket connecting, a handshake, a channel opening). `start` subscribes to its events,
 * calls `settle` from them and returns a release; the first `settle` (or the time bound, or the
 * abort) wins and later ones are ignored. On every path the release runs exactly once, after the
 * timer and the abort listener are gone and before the promise settles; a `settle` made while
 * `start` is still running takes effect as soon as `start` returns its release. A `start` that
 * throws settles with its error (unless it settled first); it has nothing to release.
 */
export function settleOnce<T>(bounds: SettleBounds, start: (settle: Settle<T>) => Release): Promise<T> {
  const { signal, timeoutMs } = bounds;
  const abortError = (): Error => bounds.onAbort?.() ?? new Error('aborted', { cause: signal?.reason });
  if (signal?.aborted === true) return Promise.reject(abortError());
  return new Promise<T>((resolve, reject) => {
    let outcome: { err: Error | undefined; value: T | undefined } | undefined;
    let release: Release = () => undefined;
    let started = false;
    const finish = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      const { err, value } = outcome!;
      release(err);
      if (err !== undefined) reject(err);
      else resolve(value as T);
    };
    const settle: Settle<T> = (err, value) => {
      if (outcome !== undefined) return false;
      outcome = { err, value };
      if (started) finish();
      return true;
    };
    const onAbort = (): void => void settle(abortError());
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            const err = bounds.onTimeout?.() ?? new Error(`no result within ${timeoutMs} ms`);
            if (settle(err)) bounds.afterTimeout?.(err);
          }, timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      release = start(settle);
    } catch (err) {
      outcome ??= { err: err instanceof Error ? err : new Error(String(err)), value: undefined };
    }
    started = true;
    if (outcome !== undefined) finish();
  });
}
