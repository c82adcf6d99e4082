import { CliError, EXIT, table } from '../http.ts';
import { required, str } from '../command.ts';
import type { Command } from '../command.ts';

export const hostsCheck: Command = {
  name: 'hosts check',
  usage: 'hosts check --providers FILE [--entry E]',
  help: `egressctl hosts check --providers FILE [--entry E]
  For each host of the providers file (docs/operator-guide.md), or of one entry, dials over SSH on
  a health link of its own (not through the API), forwards the libvirt socket, and prints its
  health: reachability, round trip, libvirt and hypervisor versions, the storage pool's capacity
  and free space (--output json: one JSON line per host). Exit 1 if any host fails, 2 on a bad file
  (the error names the field).`,
  options: { providers: { type: 'string' }, entry: { type: 'string' } },
  async run(ctx) {
    const providers = required(ctx, 'providers', 'hosts check');
    const [{ createLogger, logLevelFromEnv }, { checkHosts, isUsageError }] = await Promise.all([
      import('../../lib/log/logger.ts'),
      import('../../lib/kvm2/host-check.ts'),
    ]);
    const log = createLogger({ name: 'egressctl', stream: 'stderr', level: logLevelFromEnv(process.env, 'warn') });
    const lines: object[] = [];
    let ok: boolean;
    try {
      ok = await checkHosts(providers, str(ctx, 'entry'), {
        timeoutMs: ctx.timeoutMs,
        log,
        onLine: (line) => (ctx.json ? ctx.out(JSON.stringify(line)) : lines.push(line)),
      });
    } catch (err) {
      // A bad providers file or an unknown entry: the error names the field or the entry.
      if (isUsageError(err)) throw new CliError(EXIT.usage, (err as Error).message);
      throw err;
    }
    if (!ctx.json) ctx.out(table(lines, ['host', 'reachable', 'connectMs', 'libvirtVersion', 'kind', 'error']));
    return ok ? EXIT.ok : EXIT.failure;
  },
};
