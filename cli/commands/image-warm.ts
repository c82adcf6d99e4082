import type { WarmResponse } from '../../api/responses.ts';
import { CODES } from '../../contracts/errors.ts';
import { api, EXIT } from '../http.ts';
import { enc, positive, print, ref } from '../command.ts';
import type { Command } from '../command.ts';

export const imageWarm: Command = {
  name: 'image warm',
  usage: 'image warm ENTRY/KEY [--wait] [--wait-ms MS]',
  help: `egressctl image warm ENTRY/KEY [--wait] [--wait-ms MS]
  Fetches the base image KEY onto every host of ENTRY ahead of the first proxy (one download and
  upload per host, shared with any proxy that needs the same base meanwhile). --wait waits for the
  result (bounded by --wait-ms, default 600000) and prints, per host, ok, cached and size; exit 1 if
  any host failed or the warm is still running at the bound, 2 for an unknown entry or key.`,
  options: { wait: { type: 'boolean' }, 'wait-ms': { type: 'string' } },
  maxArgs: 1,
  async run(ctx) {
    const [entry, key] = ref(ctx.args[0], 'ENTRY/KEY', 'lab/debian12');
    const wait = ctx.values['wait'] === true;
    const waitMs = positive(ctx, 'wait-ms', 600_000);
    const t = await ctx.api();
    const { body } = await api<WarmResponse>(
      { ...t, timeoutMs: t.timeoutMs + (wait ? waitMs : 0) },
      'POST',
      `/v1/images/${enc(entry)}/${enc(key)}/warm${wait ? `?wait=true&waitMs=${waitMs}` : ''}`,
    );
    if (body.state === 'Done') {
      print(ctx, body, body.result.hosts, ['host', 'ok', 'cached', 'sizeBytes', 'error']);
    } else {
      const error = body.state === 'Failed' ? body.error : undefined;
      print(ctx, body, [{ host: '-', state: body.state, error }], ['host', 'state', 'error']);
    }
    if (!wait) return EXIT.ok;
    // The API refuses an unknown entry or key (422, exit 2) before it starts; a warm the workflow
    // refused (the second line) carries the same cause as its code.
    if (body.state === 'Failed') return body.code === CODES.proxySpecInvalid ? EXIT.usage : EXIT.failure;
    if (body.state !== 'Done' || body.result.hosts.some((h) => !h.ok)) return EXIT.failure;
    return EXIT.ok;
  },
};
