import type { ResizeProxyResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { positive, print, proxyPath, ref, usage } from '../command.ts';
import type { Command } from '../command.ts';

export const proxyResize: Command = {
  name: 'proxy resize',
  usage: 'proxy resize ENTRY/NAME [--vcpus N] [--memory-mib N] [--disk-gib N] [--wait-ms MS]',
  help: `egressctl proxy resize ENTRY/NAME [--vcpus N] [--memory-mib N] [--disk-gib N] [--wait-ms MS]
  Resizes the proxy's VM (it restarts): waits until the proxy is Running and the new size applied,
  bounded by --wait-ms (default 60000). Exit 0 when applied, 1 when still applying at the bound,
  4 when the proxy refused (it has ended or is deleting), 2 for a size out of range.`,
  options: {
    vcpus: { type: 'string' },
    'memory-mib': { type: 'string' },
    'disk-gib': { type: 'string' },
    'wait-ms': { type: 'string' },
  },
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = ref(ctx.args[0]);
    const size: Record<string, number> = {};
    for (const [flag, field] of [
      ['vcpus', 'vcpus'],
      ['memory-mib', 'memoryMiB'],
      ['disk-gib', 'diskGiB'],
    ] as const) {
      const v = positive(ctx, flag, undefined);
      if (v !== undefined) size[field] = v;
    }
    if (Object.keys(size).length === 0) throw usage('give at least one of --vcpus, --memory-mib, --disk-gib');
    const waitMs = positive(ctx, 'wait-ms', 60_000);
    const t = await ctx.api();
    const { body } = await api<ResizeProxyResponse>(
      { ...t, timeoutMs: t.timeoutMs + waitMs },
      'POST',
      `${proxyPath(entry, name)}/resize?waitMs=${waitMs}`,
      size,
    );
    const vm = body.done ? body.status.vm : undefined;
    print(
      ctx,
      body,
      [{ entry, name, done: body.done, ...vm }],
      ['entry', 'name', 'done', 'vcpus', 'memoryMiB', 'diskGiB'],
    );
    return body.done ? EXIT.ok : EXIT.failure;
  },
};
