import type { DiscoveryResponse } from '../../api/responses.ts';
import { api, EXIT } from '../http.ts';
import { enc, print, str } from '../command.ts';
import type { Command } from '../command.ts';

export const discovery: Command = {
  name: 'discovery',
  usage: 'discovery [--entry E]',
  help: `egressctl discovery [--entry E]
  Healthy proxies only, as ip:port with entry and age: what clients of the proxies use.`,
  options: { entry: { type: 'string' } },
  async run(ctx) {
    const entry = str(ctx, 'entry');
    const q = entry === undefined ? '' : `?entry=${enc(entry)}`;
    const { body } = await api<DiscoveryResponse>(await ctx.api(), 'GET', `/v1/discovery${q}`);
    print(ctx, body, body.proxies, ['address', 'entry', 'name', 'host', 'ageSeconds', 'healthySince']);
    return EXIT.ok;
  },
};
