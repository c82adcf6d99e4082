// egressctl host get and host list: a host's maintenance status beside its last survey and its open
// proxies (GET /v1/hosts, docs/api.md "Hosts"), and what the host commands share.
import type { GetHostResponse, ListHostsResponse } from '../../api/responses.ts';
import type { HostStatus, HostView } from '../../contracts/host.ts';
import { api, EXIT, table } from '../http.ts';
import { enc, print, ref, str } from '../command.ts';
import type { Command, Context } from '../command.ts';

/** The host's path in the API. */
export const hostPath = (entry: string, host: string): string => `/v1/hosts/${enc(entry)}/${enc(host)}`;

/** `ENTRY/HOST` of the command's argument. */
export const hostRef = (ctx: Context): [string, string] => ref(ctx.args[0], 'ENTRY/HOST', 'lab/hv1');

export const HOST_COLUMNS = [
  'entry',
  'host',
  'phase',
  'reachable',
  'proxies',
  'memoryFreeMiB',
  'memoryTotalMiB',
  'cpus',
  'since',
  'reason',
];

/** A row of the host table: a never-surveyed host reads `-` in the survey columns. */
export const hostRow = (h: HostView | HostStatus): object => ({
  ...h,
  ...('drain' in h && h.drain !== undefined ? { remaining: h.drain.remaining } : {}),
});

export const hostGet: Command = {
  name: 'host get',
  usage: 'host get ENTRY/HOST',
  help: `egressctl host get ENTRY/HOST
  Prints the host's maintenance phase (Schedulable, Cordoned, Draining, Drained), since when and
  why, its last provider-health survey (reachable, free and total memory, CPUs; "-" for a host
  never surveyed) and its open proxy workflows; while it drains, the proxies still on it. Exit 3
  for a host the API does not know (the message names the known ones).`,
  options: {},
  maxArgs: 1,
  async run(ctx) {
    const [entry, host] = hostRef(ctx);
    const { body } = await api<GetHostResponse>(await ctx.api(), 'GET', hostPath(entry, host));
    const h = body.host;
    print(ctx, h, [hostRow(h)], [...HOST_COLUMNS, ...(h.drain ? ['remaining'] : []), 'error']);
    if (!ctx.json && h.drain !== undefined && h.drain.proxies.length > 0) {
      ctx.out('');
      ctx.out(table(h.drain.proxies, ['name', 'pool', 'state', 'error']));
    }
    return EXIT.ok;
  },
};

export const hostList: Command = {
  name: 'host list',
  usage: 'host list [--entry E]',
  help: `egressctl host list [--entry E]
  Lists every host the API knows (the last provider-health survey and the hosts with an open
  maintenance workflow) with its phase, reachability, proxies and memory; --entry only that
  entry's. With --output json: {"hosts": [...]}.`,
  options: { entry: { type: 'string' } },
  async run(ctx) {
    const entry = str(ctx, 'entry');
    const q = entry === undefined ? '' : `?entry=${enc(entry)}`;
    const { body } = await api<ListHostsResponse>(await ctx.api(), 'GET', `/v1/hosts${q}`);
    print(ctx, body, body.hosts.map(hostRow), HOST_COLUMNS);
    return EXIT.ok;
  },
};
