// What the watch and delete commands of proxies and pools share: a bounded poll that prints each
// change of a view, and a DELETE with its optional bounded wait.
import { positive } from './command.ts';
import type { Context } from './command.ts';
import { api, CliError, EXIT } from './http.ts';

export interface Watch<V> {
  /** One poll: the view whose changes are printed. */
  read(): Promise<V>;
  /** Its line in table mode. */
  line(at: string, view: V): string;
  /** The exit code that ends the watch at this view, or undefined to go on. */
  end(view: V): number | undefined;
  /** Why the watch ran out (the --watch-ms bound passed first). */
  late(view: V, watchMs: number): string;
}

/** Polls every --interval-ms (default 1000) until `end` says so or --watch-ms (default 600000) passes: exit 1. */
export async function watchChanges<V extends object>(ctx: Context, w: Watch<V>): Promise<number> {
  const intervalMs = positive(ctx, 'interval-ms', 1000);
  const watchMs = positive(ctx, 'watch-ms', 600_000);
  const deadline = Date.now() + watchMs;
  let last = '';
  for (;;) {
    const view = await w.read();
    const key = JSON.stringify(view);
    if (key !== last) {
      last = key;
      const at = new Date().toISOString();
      ctx.out(ctx.json ? JSON.stringify({ at, ...view }) : w.line(at, view));
    }
    const code = w.end(view);
    if (code !== undefined) return code;
    if (Date.now() >= deadline) throw new CliError(EXIT.failure, w.late(view, watchMs));
    await new Promise((r) => setTimeout(r, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}

/** DELETE `path`, with ?wait=true when --wait is given (bounded by --wait-ms, default 60000). */
export async function deleteWithWait<T>(ctx: Context, path: string): Promise<{ wait: boolean; body: T }> {
  const wait = ctx.values['wait'] === true;
  const given = positive(ctx, 'wait-ms', undefined);
  const q = new URLSearchParams();
  if (wait) q.set('wait', 'true');
  if (given !== undefined) q.set('waitMs', String(given));
  const t = await ctx.api();
  const { body } = await api<T>(
    { ...t, timeoutMs: t.timeoutMs + (wait ? (given ?? 60_000) : 0) },
    'DELETE',
    `${path}?${q.toString()}`,
  );
  return { wait, body };
}
