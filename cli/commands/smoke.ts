import { TASK_QUEUE } from '../../contracts/task-queues.ts';
import { EXIT } from '../http.ts';
import { print, str } from '../command.ts';
import type { Command } from '../command.ts';
import { TEMPORAL_CONNECTION_HELP, TEMPORAL_CONNECTION_OPTIONS } from '../../runtime/temporal-options.ts';

export const smoke: Command = {
  name: 'smoke',
  usage: 'smoke [--name NAME]',
  help: `egressctl smoke [--name NAME]
  Starts the smoke workflow (ID smoke/cli-<time>) on task queue $TEMPORAL_TASK_QUEUE or ${TASK_QUEUE}, directly through
  Temporal (not the API), bounded by --timeout-ms, and prints its result. Needs the Temporal dev
  server (scripts/temporal up) and a worker (bin/worker). --name NAME: who the workflow greets
  (default operator).

  Connection to Temporal (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and these):
${TEMPORAL_CONNECTION_HELP}`,
  options: {
    ...TEMPORAL_CONNECTION_OPTIONS,
    name: { type: 'string' },
  },
  async run(ctx) {
    const [{ withTemporal }, { runSmoke }] = await Promise.all([
      import('../temporal.ts'),
      import('../../client/smoke.ts'),
    ]);
    const name = str(ctx, 'name') ?? 'operator';
    const body = await withTemporal(
      ctx.timeoutMs,
      (client, { taskQueue }) => runSmoke(client, { name, timeoutMs: ctx.timeoutMs, taskQueue }),
      ctx.values,
    );
    print(
      ctx,
      body,
      [{ workflowId: body.workflowId, ...body.result }],
      ['workflowId', 'greeting', 'workflowElapsedMs'],
    );
    return EXIT.ok;
  },
};
