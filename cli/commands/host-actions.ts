// egressctl host cordon, drain and uncordon (POST /v1/hosts/{entry}/{host}/..., each an update of
// the host's maintenance workflow) and drain --wait: the drain's progress, printed as it changes,
// until the host is Drained or the bound passes.
import type { GetHostResponse, HostActionResponse } from '../../api/responses.ts';
import { drainOverdue, MAX_DRAIN_DEADLINE_MS, MIN_DRAIN_DEADLINE_MS } from '../../contracts/host.ts';
import type { HostView } from '../../contracts/host.ts';
import { api, EXIT } from '../http.ts';
import { print, str } from '../command.ts';
import type { Command, Context } from '../command.ts';
import { optionalWholeNumber } from '../../runtime/options.ts';
import { watchChanges } from '../waits.ts';
import { hostPath, hostRef, hostRow } from './host-get.ts';

const REASON = `  --reason TEXT        why (1-500 characters): shown in the status, the logs and the Web UI`;
const EXITS = 'Exit 3 for a host the API does not know, 4 when its workflow refuses (with the reason).';

async function send(
  ctx: Context,
  action: 'cordon' | 'drain' | 'uncordon',
  extra: { deadlineMs?: number } = {},
): Promise<HostActionResponse> {
  const [entry, host] = hostRef(ctx);
  const reason = str(ctx, 'reason');
  const { body } = await api<HostActionResponse>(await ctx.api(), 'POST', `${hostPath(entry, host)}/${action}`, {
    ...(reason === undefined ? {} : { reason }),
    ...extra,
  });
  return body;
}

const printStatus = (ctx: Context, body: HostActionResponse): void =>
  print(ctx, body, [hostRow(body.status)], ['entry', 'host', 'phase', 'since', 'reason', 'remaining']);

/** What drain --wait prints when it changes. */
function drainView(h: HostView) {
  const asked = h.drain?.proxies.filter((p) => p.state === 'asked').length ?? 0;
  const gone = h.drain?.proxies.filter((p) => p.state === 'gone').length ?? 0;
  const errors = h.drain?.proxies.filter((p) => p.error !== undefined).map((p) => `${p.name}: ${p.error}`) ?? [];
  if (h.drain?.lastError !== undefined) errors.push(`last pass: ${h.drain.lastError}`);
  return {
    phase: h.phase,
    proxies: h.proxies,
    remaining: h.drain?.remaining,
    asked,
    gone,
    overdue: drainOverdue(h),
    errors,
  };
}

function drainLine(at: string, v: ReturnType<typeof drainView>): string {
  const rem = v.remaining === undefined ? '-' : String(v.remaining);
  const errs = v.errors.length > 0 ? ` (${v.errors.join('; ')})` : '';
  const late = v.overdue ? ' overdue' : '';
  return `${at} ${v.phase}${late} remaining=${rem} proxies=${v.proxies} asked=${v.asked} gone=${v.gone}${errs}`;
}

export const hostCordon: Command = {
  name: 'host cordon',
  usage: 'host cordon ENTRY/HOST [--reason TEXT]',
  help: `egressctl host cordon ENTRY/HOST [--reason TEXT]
  Stops new placements on the host (idempotent); its proxies stay and keep serving. Prints the
  host's status after it. ${EXITS}
${REASON}`,
  options: { reason: { type: 'string' } },
  maxArgs: 1,
  async run(ctx) {
    printStatus(ctx, await send(ctx, 'cordon'));
    return EXIT.ok;
  },
};

export const hostDrain: Command = {
  name: 'host drain',
  usage: 'host drain ENTRY/HOST [--reason TEXT] [--deadline-ms MS] [--wait] [--wait-ms MS] [--interval-ms MS]',
  help: `egressctl host drain ENTRY/HOST [--reason TEXT] [--deadline-ms MS] [--wait] [--wait-ms MS] [--interval-ms MS]
  Cordons the host and moves its proxies off it (idempotent): each pool replaces its members there
  within its own maxSurge/maxUnavailable budget, standalone proxies are moved to another host.
  Without --wait it prints the status once the drain started (Draining, or Drained when nothing
  was on it). ${EXITS}
${REASON}
  --deadline-ms MS     how long the drain may take (${MIN_DRAIN_DEADLINE_MS} to ${MAX_DRAIN_DEADLINE_MS}; again on a draining
                       host: set anew). Past it with proxies left the host's drain is overdue
                       (status, egress_host_drain_overdue): it goes on asking, nothing is deleted
  --wait               then poll the host and print each change of the drain's progress
                       (remaining, asked, gone, errors) until it is Drained: exit 0; exit 1 if
                       --wait-ms (default 1800000) passes first, the drain is overdue, or the host
                       is uncordoned meanwhile
  --interval-ms MS     poll interval of --wait (default 2000)`,
  options: {
    reason: { type: 'string' },
    'deadline-ms': { type: 'string' },
    wait: { type: 'boolean' },
    'wait-ms': { type: 'string' },
    'interval-ms': { type: 'string' },
  },
  maxArgs: 1,
  async run(ctx) {
    const [entry, host] = hostRef(ctx);
    const deadlineMs = optionalWholeNumber('deadline-ms', str(ctx, 'deadline-ms'), undefined, {
      min: MIN_DRAIN_DEADLINE_MS,
      max: MAX_DRAIN_DEADLINE_MS,
    });
    const started = await send(ctx, 'drain', deadlineMs === undefined ? {} : { deadlineMs });
    if (ctx.values['wait'] !== true) {
      printStatus(ctx, started);
      return EXIT.ok;
    }
    const t = await ctx.api();
    // watchChanges' bound is --watch-ms: here it is --wait-ms, as for the other waits of egressctl.
    const values = {
      ...ctx.values,
      'watch-ms': str(ctx, 'wait-ms') ?? '1800000',
      'interval-ms': str(ctx, 'interval-ms') ?? '2000',
    };
    return watchChanges(
      { ...ctx, values },
      {
        read: async () => drainView((await api<GetHostResponse>(t, 'GET', hostPath(entry, host))).body.host),
        line: drainLine,
        end: (v) =>
          v.phase === 'Drained' ? EXIT.ok : v.phase === 'Schedulable' || v.overdue ? EXIT.failure : undefined,
        late: (v, ms) =>
          `host ${entry}/${host} is ${v.phase} with ${v.remaining ?? v.proxies} proxies left, not Drained, after --wait-ms ${ms}`,
      },
    );
  },
};

export const hostUncordon: Command = {
  name: 'host uncordon',
  usage: 'host uncordon ENTRY/HOST [--reason TEXT]',
  help: `egressctl host uncordon ENTRY/HOST [--reason TEXT]
  Makes the host schedulable again (a drain in progress stops; its maintenance workflow ends).
  A host that is not cordoned is left as it is. ${EXITS}
${REASON}`,
  options: { reason: { type: 'string' } },
  maxArgs: 1,
  async run(ctx) {
    printStatus(ctx, await send(ctx, 'uncordon'));
    return EXIT.ok;
  },
};
