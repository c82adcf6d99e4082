import { TASK_QUEUE } from '../../contracts/task-queues.ts';
import { CliError, EXIT } from '../http.ts';
import { positive, print, str, usage } from '../command.ts';
import type { Command } from '../command.ts';
import { TEMPORAL_CONNECTION_HELP, TEMPORAL_CONNECTION_OPTIONS } from '../../runtime/temporal-options.ts';

export const proxyUp: Command = {
  name: 'proxy up',
  usage: 'proxy up NAME [--entry E] [--image KEY] [--providers FILE] [--wait-ms MS]',
  help: `egressctl proxy up NAME [--entry E] [--image KEY] [--providers FILE] [--wait-ms MS]
  Directly through Temporal (not the API; what scripts/main runs): starts the lifecycle workflow of
  proxy NAME (ID proxy/ENTRY/NAME; --entry default local, --image default proxy) on task queue
  $TEMPORAL_TASK_QUEUE or ${TASK_QUEUE}, or reuses the one running, and waits until the proxy is
  Healthy (--wait-ms, default 1200000), printing progress on stderr. Then prints its address, a curl
  line that uses it (from this machine where its routes reach the guest, else through its host over
  SSH; the host and the health target are read from --providers) and the Web UI link to its run on
  stderr, and the result on stdout (--output json: one JSON line). Exit 1 if it fails or is not
  Healthy in time.

  Connection to Temporal (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and these):
${TEMPORAL_CONNECTION_HELP}`,
  options: {
    ...TEMPORAL_CONNECTION_OPTIONS,
    entry: { type: 'string' },
    image: { type: 'string' },
    providers: { type: 'string' },
    'wait-ms': { type: 'string' },
  },
  maxArgs: 1,
  async run(ctx) {
    const name = ctx.args[0];
    if (name === undefined) throw usage('proxy up needs the proxy NAME (e.g. egressctl proxy up main)');
    const waitMs = positive(ctx, 'wait-ms', 1_200_000);
    const [{ withTemporal, webUiUrl }, client, { ConfigError, loadProvidersFile }, { reachesDirectly }] =
      await Promise.all([
        import('../temporal.ts'),
        import('../../client/proxy-up.ts'),
        import('../../lib/config/index.ts'),
        import('../../lib/probe/route.ts'),
      ]);
    const up = await withTemporal(
      ctx.timeoutMs,
      (c, settings) =>
        client
          .proxyUp(c, {
            name,
            entry: str(ctx, 'entry') ?? 'local',
            imageKey: str(ctx, 'image') ?? 'proxy',
            taskQueue: settings.taskQueue,
            waitMs,
            providersFile: str(ctx, 'providers'),
            loadProviders: loadProvidersFile,
            reachesDirectly,
            webUi: webUiUrl(),
            namespace: settings.namespace,
          })
          .catch((err: unknown) => {
            // The providers file is read for the curl line: a bad one names the field.
            throw err instanceof ConfigError ? new CliError(EXIT.usage, err.message) : err;
          }),
      ctx.values,
    );
    process.stderr.write(
      `\nproxy ${name} is Healthy: ${up.ip}:${up.port} on ${up.host}\n` +
        `  try it (${up.curlFrom === 'machine' ? 'this machine routes to the guest' : "from its host: the guest is behind the host's NAT"}):\n    ${up.curl}\n` +
        `  its run in the Temporal Web UI:\n    ${up.webUi}\n`,
    );
    print(ctx, up, [up], ['workflowId', 'reused', 'host', 'ip', 'port']);
    return EXIT.ok;
  },
};
