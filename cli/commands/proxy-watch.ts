import type { GetProxyResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { proxyPath, ref, str } from '../command.ts';
import { watchChanges } from '../waits.ts';
import type { Command, Context } from '../command.ts';

/** What a watch prints when it changes. */
function viewOf(body: GetProxyResponse) {
  const st = body.status;
  const image = st?.image;
  return {
    state: st?.state ?? body.proxy.state ?? 'unknown',
    reason: st?.reason,
    host: st?.host,
    ip: st?.ip,
    healthy: st?.conditions.Healthy.status,
    image: image === undefined ? undefined : { bytes: image.bytes, totalBytes: image.totalBytes },
  };
}

/** One line of a watch in table mode. */
function line(at: string, v: ReturnType<typeof viewOf>): string {
  const mib = (n: number): string => (n / 1048576).toFixed(1);
  const img =
    v.image && v.image.totalBytes > 0
      ? ` image ${mib(v.image.bytes)}/${mib(v.image.totalBytes)} MiB (${Math.floor((100 * v.image.bytes) / v.image.totalBytes)}%)`
      : '';
  return (
    `${at} ${v.state}${v.host ? ` host=${v.host}` : ''}${v.ip ? ` ip=${v.ip}` : ''}` +
    `${v.healthy ? ` healthy=${v.healthy}` : ''}${img}${v.reason ? ` (${v.reason})` : ''}`
  );
}

async function watch(ctx: Context): Promise<number> {
  const [entry, name] = ref(ctx.args[0]);
  const until = str(ctx, 'until') ?? 'Running';
  const t = await ctx.api();
  return watchChanges(ctx, {
    read: async () => viewOf((await api<GetProxyResponse>(t, 'GET', proxyPath(entry, name))).body),
    line,
    end: (v) =>
      v.state === 'Failed' ? EXIT.failure : v.state === until || v.state === 'Deleted' ? EXIT.ok : undefined,
    late: (v, watchMs) => `proxy ${entry}/${name} is ${v.state}, not ${until}, after --watch-ms ${watchMs}`,
  });
}

export const proxyWatch: Command = {
  name: 'proxy watch',
  usage: 'proxy watch ENTRY/NAME [--until STATE] [--interval-ms MS] [--watch-ms MS]',
  help: `egressctl proxy watch ENTRY/NAME [--until STATE] [--interval-ms MS] [--watch-ms MS]
  Polls the status query and prints each change of state, reason, address, health and image upload
  progress. Ends with exit 0 once the proxy reaches --until (default Running; Deleted also ends
  it), 1 if it is Failed or --watch-ms (default 600000) passes first, 3 if there is no such proxy.
  --interval-ms MS     poll interval (default 1000)`,
  options: { until: { type: 'string' }, 'interval-ms': { type: 'string' }, 'watch-ms': { type: 'string' } },
  maxArgs: 1,
  run: watch,
};
