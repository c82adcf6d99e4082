import type { CreateProxyResponse } from '../../api/responses.ts';
import type { ProxySpec } from '../../contracts/proxy.ts';
import { api, EXIT } from '../http.ts';
import { positive, print, ref, required } from '../command.ts';
import type { Command } from '../command.ts';

/** `o` without its undefined fields, or undefined when it has none. */
function defined<T extends object>(o: T): T | undefined {
  const kept = Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  return Object.keys(kept).length === 0 ? undefined : (kept as T);
}

export const proxyCreate: Command = {
  name: 'proxy create',
  usage:
    'proxy create ENTRY/NAME --image KEY [--vcpus N] [--memory-mib N] [--disk-gib N] [--squid-port N] [--allow-cidr CIDR]...',
  help: `egressctl proxy create ENTRY/NAME --image KEY [options]
  Starts the proxy's workflow. The same spec again prints the existing proxy (exit 0); another spec
  for the same ENTRY/NAME exits 4.
  --image KEY          image key of the entry (required)
  --vcpus N, --memory-mib N, --disk-gib N    VM size (default: the entry's)
  --squid-port N       Squid's port (default: the entry's)
  --allow-cidr CIDR    client network allowed to use the proxy (repeat; default: the entry's)`,
  options: {
    image: { type: 'string' },
    vcpus: { type: 'string' },
    'memory-mib': { type: 'string' },
    'disk-gib': { type: 'string' },
    'squid-port': { type: 'string' },
    'allow-cidr': { type: 'string', multiple: true },
  },
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = ref(ctx.args[0]);
    const imageKey = required(ctx, 'image', 'proxy create');
    const vm = defined({
      vcpus: positive(ctx, 'vcpus', undefined),
      memoryMiB: positive(ctx, 'memory-mib', undefined),
      diskGiB: positive(ctx, 'disk-gib', undefined),
    });
    const squid = defined({
      port: positive(ctx, 'squid-port', undefined),
      allowedClientCidrs: ctx.values['allow-cidr'] as string[] | undefined,
    });
    const spec: ProxySpec = { name, entry, imageKey, ...(vm && { vm }), ...(squid && { squid }) };
    const { body } = await api<CreateProxyResponse>(await ctx.api(), 'POST', '/v1/proxies', spec);
    print(ctx, body, [{ ...body.proxy, created: body.created }], ['entry', 'name', 'created', 'state', 'workflowId']);
    return EXIT.ok;
  },
};
