/**
 * The bounds of one call or stream on a connection: its time budget and the caller's AbortSignal.
 * Either one ends it by killing the connection (the daemon cannot be told to forget a call or
 * stop a stream), with an error that names the connection and what overran or was aborted.
 */
import { LibvirtAbortedError, LibvirtTimeoutError } from './errors.ts';

/**
 * Arms the budget timer and the abort listener of `what` (e.g. `STORAGE_VOL_DOWNLOAD download`)
 * on connection `label`: after `timeoutMs`, or when `signal` fires, `expire` gets a
 * LibvirtTimeoutError or LibvirtAbortedError (cause: the signal's reason). Returns the disarm
 * function, to call on every path once the work is done.
 */
export function armBudget(
  label: string,
  what: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  expire: (err: Error) => void,
): () => void {
  const timer = setTimeout(
    () => expire(new LibvirtTimeoutError(`${label}: ${what} exceeded its ${timeoutMs} ms budget; connection killed`)),
    timeoutMs,
  );
  const onAbort = (): void =>
    expire(new LibvirtAbortedError(`${label}: ${what} aborted; connection killed`, { cause: signal?.reason }));
  signal?.addEventListener('abort', onAbort, { once: true });
  return () => {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  };
}
