import type { DeleteProxyResponse } from '../../api/responses.ts';
import { EXIT } from '../http.ts';
import { print, proxyPath, ref } from '../command.ts';
import { deleteWithWait } from '../waits.ts';
import type { Command } from '../command.ts';

export const proxyDelete: Command = {
  name: 'proxy delete',
  usage: 'proxy delete ENTRY/NAME [--wait] [--wait-ms MS]',
  help: `egressctl proxy delete ENTRY/NAME [--wait] [--wait-ms MS]
  Asks the workflow to delete the proxy. --wait waits until it is Deleted (bounded by --wait-ms,
  default 60000); exit 1 if it ended Failed or is still deleting at the bound.`,
  options: { wait: { type: 'boolean' }, 'wait-ms': { type: 'string' } },
  maxArgs: 1,
  async run(ctx) {
    const [entry, name] = ref(ctx.args[0]);
    const { wait, body } = await deleteWithWait<DeleteProxyResponse>(ctx, proxyPath(entry, name));
    print(ctx, body, [{ entry, name, ...body }], ['entry', 'name', 'fromState', 'done', 'state']);
    if (wait && (body.done !== true || body.state === 'Failed')) return EXIT.failure;
    return EXIT.ok;
  },
};
