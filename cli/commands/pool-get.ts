import type { GetPoolResponse, ListPoolsResponse } from '../../api/responses.ts';
import { api, EXIT, table } from '../http.ts';
import { positive, print, ref, str } from '../command.ts';
import type { Command } from '../command.ts';
import { POOL_COLUMNS, poolPath, poolView } from './pool-spec.ts';

export const poolGet: Command = {
  name: 'pool get',
  usage: 'pool get ENTRY/POOL',
  help: `egressctl pool get ENTRY/POOL
  Prints the pool's status query: phase, desired, healthy, available, updated, revision, the
  rollout step, its door (its address and each exit up or down in the door, when bin/door serves
  the pool; docs/door.md) and its members (name, host, state, healthy, imageKey, ageMs, role).
  With --output json: those at the top level (members[], rollout, door) and the resolved spec.`,
  options: {},
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = ref(ctx.args[0], 'ENTRY/POOL', 'lab/crawl');
    const { body } = await api<GetPoolResponse>(await ctx.api(), 'GET', poolPath(entry, name));
    const view = poolView(body);
    if (ctx.json) return (ctx.out(JSON.stringify(view)), EXIT.ok);
    const step = body.status?.rollout?.step ?? body.status?.reason ?? body.statusError;
    ctx.out(table([{ ...view, step }], [...POOL_COLUMNS, 'step']));
    const door = body.status?.door;
    if (door !== undefined) {
      const exits = door.exits.map(
        (x) => `${x.name}${x.role === 'draining' ? ' (draining)' : ''} ${x.up ? 'up' : 'DOWN'}`,
      );
      ctx.out(`door ${door.listen}: ${exits.join(', ') || 'no exits'} (reported ${door.at})`);
    }
    const members = 'members' in view ? view.members : [];
    if (members.length > 0) {
      ctx.out('');
      ctx.out(table(members, ['name', 'role', 'state', 'healthy', 'host', 'address', 'imageKey', 'ageMs']));
    }
    return EXIT.ok;
  },
};

export const poolList: Command = {
  name: 'pool list',
  usage: 'pool list [--entry E] [--all] [--page-size N] [--page-token T]',
  help: `egressctl pool list [--entry E] [--all] [--page-size N] [--page-token T]
  Lists pools from visibility with the counts of their last change. Open pools only unless --all.
  With --output json the next page token is printed as nextPageToken.`,
  options: {
    entry: { type: 'string' },
    all: { type: 'boolean' },
    'page-size': { type: 'string' },
    'page-token': { type: 'string' },
  },
  async run(ctx) {
    const q = new URLSearchParams();
    if (str(ctx, 'entry') !== undefined) q.set('entry', str(ctx, 'entry')!);
    if (ctx.values['all'] === true) q.set('all', 'true');
    const pageSize = positive(ctx, 'page-size', undefined);
    if (pageSize !== undefined) q.set('pageSize', String(pageSize));
    if (str(ctx, 'page-token') !== undefined) q.set('pageToken', str(ctx, 'page-token')!);
    const { body } = await api<ListPoolsResponse>(await ctx.api(), 'GET', `/v1/pools?${q.toString()}`);
    print(ctx, body, body.pools, [...POOL_COLUMNS, 'execution']);
    if (!ctx.json && body.nextPageToken) process.stderr.write(`more: --page-token ${body.nextPageToken}\n`);
    return EXIT.ok;
  },
};
