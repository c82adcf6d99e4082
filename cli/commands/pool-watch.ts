import type { GetPoolResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { ref, str } from '../command.ts';
import { watchChanges } from '../waits.ts';
import type { Command, Context } from '../command.ts';
import { poolPath } from './pool-spec.ts';

/** What a watch prints when it changes. */
function viewOf(body: GetPoolResponse) {
  const st = body.status;
  const p = body.pool;
  return {
    phase: st?.phase ?? p.phase ?? 'unknown',
    desired: st?.desired ?? p.desired,
    healthy: st?.healthy ?? p.healthy,
    available: st?.available ?? p.available,
    updated: st?.updated ?? p.updated,
    revision: st?.revision ?? p.revision,
    members: st?.members.length,
    step: st?.rollout?.step,
    reason: st?.reason,
  };
}

function line(at: string, v: ReturnType<typeof viewOf>): string {
  const n = (x: number | undefined): string => (x === undefined ? '-' : String(x));
  return (
    `${at} ${v.phase} desired=${n(v.desired)} healthy=${n(v.healthy)} available=${n(v.available)} ` +
    `updated=${n(v.updated)} revision=${n(v.revision)}${v.step ? ` step=${v.step}` : ''}${v.reason ? ` (${v.reason})` : ''}`
  );
}

async function watch(ctx: Context): Promise<number> {
  const [entry, name] = ref(ctx.args[0], 'ENTRY/POOL', 'lab/crawl');
  const until = str(ctx, 'until') ?? 'Ready';
  const t = await ctx.api();
  return watchChanges(ctx, {
    read: async () => viewOf((await api<GetPoolResponse>(t, 'GET', poolPath(entry, name))).body),
    line,
    end: (v) => (v.phase === until || v.phase === 'Deleted' ? EXIT.ok : undefined),
    late: (v, watchMs) => `pool ${entry}/${name} is ${v.phase}, not ${until}, after --watch-ms ${watchMs}`,
  });
}

export const poolWatch: Command = {
  name: 'pool watch',
  usage: 'pool watch ENTRY/POOL [--until PHASE] [--interval-ms MS] [--watch-ms MS]',
  help: `egressctl pool watch ENTRY/POOL [--until PHASE] [--interval-ms MS] [--watch-ms MS]
  Polls the pool's status and prints each change of phase, counts (desired, healthy, available,
  updated), revision and rollout step. Ends with exit 0 once the pool reaches --until (default
  Ready; Progressing, Paused, Degraded, Deleting; Deleted also ends it), 1 if --watch-ms (default
  600000) passes first, 3 if there is no such pool.
  --interval-ms MS     poll interval (default 1000)`,
  options: { until: { type: 'string' }, 'interval-ms': { type: 'string' }, 'watch-ms': { type: 'string' } },
  maxArgs: 1,
  run: watch,
};
