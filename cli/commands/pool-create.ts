import type { CreatePoolResponse } from '../../api/responses.ts';
import { poolSpecProblems } from '../../contracts/pool.ts';
import type { PoolSpec } from '../../contracts/pool.ts';
import { api, EXIT } from '../http.ts';
import { print, ref, required, usage } from '../command.ts';
import type { Command } from '../command.ts';
import { POOL_COLUMNS, SPEC_HELP, SPEC_OPTIONS, specFromOptions } from './pool-spec.ts';

export const poolCreate: Command = {
  name: 'pool create',
  usage: 'pool create ENTRY/POOL --size N --image KEY [--spares K] [spec options: see its --help]',
  help: `egressctl pool create ENTRY/POOL --size N --image KEY [options]
  Starts a pool that keeps N healthy proxies of the template in discovery (members are proxies
  ENTRY/POOL-xxxxx). The spec is checked here and by the API (exit 2 naming the field); the same
  spec again prints the existing pool (exit 0); another spec for ENTRY/POOL exits 4 (use pool
  update to change it).
  --size N             members in discovery (0-1000; required)
${SPEC_HELP}`,
  options: { size: { type: 'string' }, ...SPEC_OPTIONS },
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = ref(ctx.args[0], 'ENTRY/POOL', 'lab/crawl');
    const sizeText = required(ctx, 'size', 'pool create');
    required(ctx, 'image', 'pool create');
    const size = Number(sizeText);
    const spec = { entry, name, size, ...specFromOptions(ctx) } as PoolSpec;
    const problems = poolSpecProblems(spec);
    if (problems.length > 0) throw usage(`the pool spec is not valid: ${problems.join('; ')}`);
    const { body } = await api<CreatePoolResponse>(await ctx.api(), 'POST', '/v1/pools', spec);
    print(ctx, body, [{ ...body.pool, created: body.created }], [...POOL_COLUMNS.slice(0, 4), 'created', 'workflowId']);
    return EXIT.ok;
  },
};
