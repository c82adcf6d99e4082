import type { GetPoolResponse, PoolUpdateResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { ref, usage } from '../command.ts';
import type { Command } from '../command.ts';
import { poolPath, printStatus, SPEC_HELP, SPEC_OPTIONS, specFromOptions } from './pool-spec.ts';

export const poolUpdate: Command = {
  name: 'pool update',
  usage: 'pool update ENTRY/POOL [spec options: see its --help]',
  help: `egressctl pool update ENTRY/POOL [options]
  Changes the pool's spec (PATCH): only the options given change; the pool's other settings stay.
  A template option (--image, a VM size, a Squid override) makes a new revision that rolls through
  the members within --max-surge/--max-unavailable. Exit 2 naming the field for a spec that is
  not valid, 4 when the pool refuses (it is being deleted), 3 when there is no such pool.
${SPEC_HELP}`,
  options: SPEC_OPTIONS,
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = ref(ctx.args[0], 'ENTRY/POOL', 'lab/crawl');
    const t = await ctx.api();
    const path = poolPath(entry, name);
    const current = (await api<GetPoolResponse>(t, 'GET', path)).body.status?.spec;
    const patch = specFromOptions(ctx, current);
    if (Object.keys(patch).length === 0) throw usage('give at least one option to change; see --help');
    const { body } = await api<PoolUpdateResponse>(t, 'PATCH', path, patch);
    printStatus(ctx, body.status);
    return EXIT.ok;
  },
};
