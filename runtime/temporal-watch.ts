// Whether Temporal answers, said once per change in the log of a long-running process (the worker).
// A worker's own calls can be silent through an outage: with the server's database down its long
// polls hang without an error, and Core logs only the retries of calls that fail fast (a server
// that is gone). This check calls Temporal every `intervalMs` and logs one warning when it stops
// answering ("Temporal unavailable"), a reminder every `remindMs` while it stays so, and one line
// when it answers again ("Temporal reachable again", with how long it was down). It never stops
// the process: the SDK's polls and calls retry by themselves.

export interface TemporalWatchLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface TemporalWatchOptions {
  /** One call to Temporal; rejects when Temporal is unavailable (any other answer counts as up). */
  check: () => Promise<unknown>;
  log: TemporalWatchLog;
  /** Time between the end of one check and the start of the next. */
  intervalMs: number;
  /** While down, a reminder this often (default 60 s). */
  remindMs?: number;
  now?: () => number;
}

export interface TemporalWatch {
  /** False from the first failed check until one succeeds. */
  readonly available: boolean;
  /** Stops checking; resolves once a check in flight has ended. */
  stop(): Promise<void>;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err)).slice(0, 300);

export function watchTemporal(o: TemporalWatchOptions): TemporalWatch {
  const now = o.now ?? Date.now;
  const remindMs = o.remindMs ?? 60_000;
  let available = true;
  let downSince = 0;
  let remindedAt = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();

  const once = async (): Promise<void> => {
    try {
      await o.check();
      if (!available) {
        available = true;
        o.log.info({ downForMs: now() - downSince }, 'Temporal reachable again');
      }
    } catch (err) {
      const t = now();
      if (available) {
        available = false;
        downSince = remindedAt = t;
        o.log.warn({ err: errorText(err) }, 'Temporal unavailable: the worker waits and retries');
      } else if (t - remindedAt >= remindMs) {
        remindedAt = t;
        o.log.warn({ err: errorText(err), downForMs: t - downSince }, 'Temporal still unavailable');
      }
    }
  };
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      inFlight = once().finally(schedule);
    }, o.intervalMs);
    timer.unref();
  };
  schedule();
  return {
    get available() {
      return available;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
