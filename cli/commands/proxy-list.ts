import type { ListProxiesResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { positive, print, str } from '../command.ts';
import type { Command } from '../command.ts';

/** The columns of a proxy list. */
export const PROXY_COLUMNS = ['entry', 'name', 'state', 'health', 'host', 'ip', 'execution', 'startTime'];

export const proxyList: Command = {
  name: 'proxy list',
  usage:
    'proxy list [--entry E] [--state S] [--host H] [--health True|False|Unknown] [--all] [--page-size N] [--page-token T]',
  help: `egressctl proxy list [filters]
  Lists proxies from the search attributes. Open ones only unless --all or --state is given.
  --entry E  --state S  --host H  --health True|False|Unknown (the Healthy condition, as proxy get
  shows it; --healthy true|false filters on the older Bool)  --all  --page-size N  --page-token T
  With --output json the next page token is printed as nextPageToken.`,
  options: {
    entry: { type: 'string' },
    state: { type: 'string' },
    host: { type: 'string' },
    healthy: { type: 'string' },
    health: { type: 'string' },
    all: { type: 'boolean' },
    'page-size': { type: 'string' },
    'page-token': { type: 'string' },
  },
  async run(ctx) {
    const q = new URLSearchParams();
    for (const k of ['entry', 'state', 'host', 'healthy', 'health'])
      if (str(ctx, k) !== undefined) q.set(k, str(ctx, k)!);
    if (ctx.values['all'] === true) q.set('all', 'true');
    const pageSize = positive(ctx, 'page-size', undefined);
    if (pageSize !== undefined) q.set('pageSize', String(pageSize));
    if (str(ctx, 'page-token') !== undefined) q.set('pageToken', str(ctx, 'page-token')!);
    const { body } = await api<ListProxiesResponse>(await ctx.api(), 'GET', `/v1/proxies?${q.toString()}`);
    print(ctx, body, body.proxies, PROXY_COLUMNS);
    if (!ctx.json && body.nextPageToken) process.stderr.write(`more: --page-token ${body.nextPageToken}\n`);
    return EXIT.ok;
  },
};
