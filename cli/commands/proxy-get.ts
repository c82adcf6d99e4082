import type { GetProxyResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { print, proxyPath, ref } from '../command.ts';
import type { Command } from '../command.ts';

export const proxyGet: Command = {
  name: 'proxy get',
  usage: 'proxy get ENTRY/NAME',
  help: `egressctl proxy get ENTRY/NAME
  Prints the proxy's workflow and its status query (state, host, ip, conditions, image progress).`,
  options: {},
  maxArgs: 1,
  async run(ctx) {
    const { body } = await api<GetProxyResponse>(await ctx.api(), 'GET', proxyPath(...ref(ctx.args[0])));
    const st = body.status;
    // The same column as proxy list: the Healthy condition (the list reads it from ProxyHealth).
    const row = {
      ...body.proxy,
      ...st,
      health: st?.conditions.Healthy.status ?? body.proxy.health,
      reason: st?.reason,
    };
    print(ctx, body, [row], ['entry', 'name', 'state', 'health', 'host', 'ip', 'port', 'reason']);
    return EXIT.ok;
  },
};
