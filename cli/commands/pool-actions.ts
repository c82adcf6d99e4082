// The pool's operator actions: scale, pause, resume, rollback, replace-member (each a Temporal
// Update the pool may refuse: exit 4 with its reason) and delete.
import type { DeletePoolResponse, PoolUpdateResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { positive, print, ref, required, usage } from '../command.ts';
import type { Command, Context } from '../command.ts';
import { optionalWholeNumber, wholeNumber } from '../../runtime/options.ts';
import { deleteWithWait } from '../waits.ts';
import { poolPath, printStatus } from './pool-spec.ts';

const refOf = (ctx: Context) => ref(ctx.args[0], 'ENTRY/POOL', 'lab/crawl');

async function send(ctx: Context, action: string, body: unknown): Promise<number> {
  const { body: res } = await api<PoolUpdateResponse>(
    await ctx.api(),
    'POST',
    `${poolPath(...refOf(ctx))}/${action}`,
    body,
  );
  printStatus(ctx, res.status);
  return EXIT.ok;
}

const REFUSED = 'exit 4 with its reason when the pool refuses, 3 when there is no such pool';

export const poolScale: Command = {
  name: 'pool scale',
  usage: 'pool scale ENTRY/POOL --size N [--spares K]',
  help: `egressctl pool scale ENTRY/POOL --size N [--spares K]
  Sets the pool's size (0-1000) and, if given, its spares (0-100). Scale-down removes unhealthy
  members first, then spares, then by the pool's scale-down policy; a removed member leaves
  discovery, drains, then is deleted. Exit 2 naming the field out of range; ${REFUSED}.`,
  options: { size: { type: 'string' }, spares: { type: 'string' } },
  maxArgs: 1,
  run: (ctx) => {
    const size = wholeNumber('size', required(ctx, 'size', 'pool scale'), { min: 0 });
    const spares = optionalWholeNumber('spares', ctx.values['spares'] as string | undefined, undefined, { min: 0 });
    return send(ctx, 'scale', spares === undefined ? { size } : { size, spares });
  },
};

export const poolPause: Command = {
  name: 'pool pause',
  usage: 'pool pause ENTRY/POOL',
  help: `egressctl pool pause ENTRY/POOL
  Pauses the pool's rollout (failed members are still replaced); ${REFUSED}.`,
  options: {},
  maxArgs: 1,
  run: (ctx) => send(ctx, 'pause', undefined),
};

export const poolResume: Command = {
  name: 'pool resume',
  usage: 'pool resume ENTRY/POOL',
  help: `egressctl pool resume ENTRY/POOL
  Resumes a paused rollout; ${REFUSED}.`,
  options: {},
  maxArgs: 1,
  run: (ctx) => send(ctx, 'resume', undefined),
};

export const poolRollback: Command = {
  name: 'pool rollback',
  usage: 'pool rollback ENTRY/POOL [--revision N]',
  help: `egressctl pool rollback ENTRY/POOL [--revision N]
  Rolls the pool back to revision N (default: the last fully healthy one); the members roll to it
  like an update. Refused (exit 4) when the pool has only one revision, or N is the current or an
  unknown one; 3 when there is no such pool.`,
  options: { revision: { type: 'string' } },
  maxArgs: 1,
  run: (ctx) => {
    const revision = positive(ctx, 'revision', undefined);
    return send(ctx, 'rollback', revision === undefined ? {} : { revision });
  },
};

export const poolReplaceMember: Command = {
  name: 'pool replace-member',
  usage: 'pool replace-member ENTRY/POOL MEMBER --reason TEXT',
  help: `egressctl pool replace-member ENTRY/POOL MEMBER --reason TEXT
  Reports MEMBER (a member's name, from pool get) banned or otherwise unfit: it leaves discovery
  and the pool's door at once and a replacement is made (a spare promoted first). --reason (1-200
  characters) is kept in the pool's status. The pool takes at most replacement.requestedPerHour
  such requests an hour (default 6); past that, and for an unknown member or one already leaving,
  ${REFUSED}.`,
  options: { reason: { type: 'string' } },
  maxArgs: 2,
  run: (ctx) => {
    const member = ctx.args[1];
    if (member === undefined) throw usage('pool replace-member needs MEMBER after ENTRY/POOL (a name from pool get)');
    const reason = required(ctx, 'reason', 'pool replace-member');
    return send(ctx, `members/${encodeURIComponent(member)}/replace`, { reason });
  },
};

export const poolDelete: Command = {
  name: 'pool delete',
  usage: 'pool delete ENTRY/POOL [--wait] [--wait-ms MS]',
  help: `egressctl pool delete ENTRY/POOL [--wait] [--wait-ms MS]
  Asks the pool to delete its members and end. --wait waits until it has ended (bounded by
  --wait-ms, default 60000); exit 1 if it is still deleting at the bound.`,
  options: { wait: { type: 'boolean' }, 'wait-ms': { type: 'string' } },
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = refOf(ctx);
    const { wait, body } = await deleteWithWait<DeletePoolResponse>(ctx, poolPath(entry, name));
    const phase = body.status?.phase ?? body.pool?.phase;
    print(ctx, body, [{ entry, name, done: body.done, phase }], ['entry', 'name', 'done', 'phase']);
    return wait && !body.done ? EXIT.failure : EXIT.ok;
  },
};
