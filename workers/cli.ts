// The operator CLI.
//
//   node workers/cli.ts smoke [--name NAME] [--timeout-ms MS]       run the smoke workflow; print its result
//   node workers/cli.ts host-check --providers FILE [--entry NAME]  dial hosts over SSH; print their health (JSON)
//   node workers/cli.ts proxy-up --name NAME [--entry local] [--image proxy] [--providers FILE] [--wait-ms MS]
//                                                                   start (or reuse) a proxy; wait until Healthy
//   node workers/cli.ts --help
//
// Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE (default `default`),
// LOG_LEVEL (default warn for the CLI). Output: JSON on stdout; logs: JSON lines on stderr.
import { parseArgsOrExit } from '../runtime/options.ts';
import type { SmokeResult } from '../contracts/smoke.ts';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
// Each command loads what it needs (the Temporal client, the SSH side) when it runs, so that
// `--help` starts in a few tens of milliseconds (docs/benchmarks.md, start-up).
const temporalClient = () => import('@temporalio/client');

const HELP = `egress-proxies CLI

Usage:
  node workers/cli.ts smoke [--name NAME] [--timeout-ms MS]
      Starts the smoke workflow (ID smoke/cli-<time>) on task queue ${TASK_QUEUE} and prints its
      result. Needs the Temporal dev server (scripts/temporal up) and a worker (node workers/worker.ts).
  node workers/cli.ts host-check --providers FILE [--entry NAME] [--timeout-ms MS]
      For each host of the providers file (docs/operator-guide.md), or of one entry, dials over
      SSH on a health link of its own, forwards the libvirt socket, and prints one JSON line:
      reachability, round-trip time, libvirt and hypervisor versions, and the storage pool's
      capacity and free space. Exit 1 if any host fails, 2 on a bad file (the error names the field).
  node workers/cli.ts proxy-up --name NAME [--entry ENTRY] [--image KEY] [--providers FILE] [--wait-ms MS]
      Starts the proxy's lifecycle workflow (ID proxy/ENTRY/NAME; entry default local, image key
      default proxy) on task queue $TEMPORAL_TASK_QUEUE or ${TASK_QUEUE}, or reuses the one
      running, and waits until the proxy is Healthy (default 20 minutes), printing progress on
      stderr. Then prints its address, a curl line that uses it (through its host over SSH; the
      host and health target are read from --providers) and the Web UI link to its run, and one
      JSON line on stdout. Exit 1 if it fails or is not Healthy in time.

Options:
  --timeout-ms MS   bound on each step (default 30000)
  -h, --help        this text

Environment: TEMPORAL_ADDRESS (127.0.0.1:7233), TEMPORAL_NAMESPACE (default), LOG_LEVEL (warn).`;

const { values, positionals } = parseArgsOrExit(
  {
    allowPositionals: true,
    options: {
      name: { type: 'string', default: 'operator' },
      providers: { type: 'string' },
      entry: { type: 'string' },
      image: { type: 'string', default: 'proxy' },
      'wait-ms': { type: 'string', default: '1200000' },
      'timeout-ms': { type: 'string', default: '30000' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  },
  HELP,
);
const [command, ...rest] = positionals;
const timeoutMs = Number(values['timeout-ms']);
if (values.help || command === undefined) {
  process.stdout.write(HELP + '\n');
  process.exit(command === undefined && !values.help ? 2 : 0);
}
if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
  process.stderr.write(`--timeout-ms must be a positive whole number of milliseconds, got ${values['timeout-ms']}\n`);
  process.exit(2);
}
class UsageError extends Error {}
const { createLogger, logLevelFromEnv } = await import('../lib/log/logger.ts');
const log = createLogger({ name: 'cli', stream: 'stderr', level: logLevelFromEnv(process.env, 'warn') });

async function smoke(): Promise<void> {
  const [{ Client, Connection }, { SMOKE_WORKFLOW_TYPE }] = await Promise.all([
    temporalClient(),
    import('../contracts/smoke.ts'),
  ]);
  const address = process.env['TEMPORAL_ADDRESS'] || '127.0.0.1:7233';
  const connection = await Connection.connect({ address, connectTimeout: timeoutMs });
  try {
    const client = new Client({ connection, namespace: process.env['TEMPORAL_NAMESPACE'] || 'default' });
    const workflowId = `smoke/cli-${Date.now().toString(36)}`;
    const handle = await client.workflow.start(SMOKE_WORKFLOW_TYPE, {
      taskQueue: TASK_QUEUE,
      workflowId,
      args: [{ name: values.name }],
      workflowExecutionTimeout: timeoutMs,
    });
    const result = (await handle.result()) as SmokeResult;
    process.stdout.write(JSON.stringify({ workflowId, runId: handle.firstExecutionRunId, result }) + '\n');
  } finally {
    await connection.close();
  }
}

try {
  if (command === 'smoke') await smoke();
  else if (command === 'host-check') {
    if (values.providers === undefined || rest.length > 0) {
      throw new UsageError('host-check takes --providers FILE (and optionally --entry NAME); see --help');
    }
    const { checkHosts } = await import('../lib/kvm2/host-check.ts');
    const ok = await checkHosts(values.providers, values.entry, {
      timeoutMs,
      log,
      onLine: (line) => process.stdout.write(JSON.stringify(line) + '\n'),
    });
    if (!ok) process.exitCode = 1;
  } else if (command === 'proxy-up') {
    const waitMs = Number(values['wait-ms']);
    if (rest.length > 0 || !Number.isInteger(waitMs) || waitMs <= 0) {
      throw new UsageError('proxy-up takes --name NAME and optionally --entry, --image, --providers, --wait-ms MS');
    }
    const address = process.env['TEMPORAL_ADDRESS'] || '127.0.0.1:7233';
    const namespace = process.env['TEMPORAL_NAMESPACE'] || 'default';
    const [{ Client, Connection }, { proxyUp }] = await Promise.all([
      temporalClient(),
      import('../client/proxy-up.ts'),
    ]);
    const connection = await Connection.connect({ address, connectTimeout: timeoutMs });
    try {
      const up = await proxyUp(new Client({ connection, namespace }), {
        name: values.name,
        entry: values.entry ?? 'local',
        imageKey: values.image,
        taskQueue: process.env['TEMPORAL_TASK_QUEUE'] || TASK_QUEUE,
        waitMs,
        providersFile: values.providers,
        webUi: process.env['TEMPORAL_UI_URL'] || `http://127.0.0.1:${process.env['TEMPORAL_UI_PORT'] || '8233'}`,
        namespace,
      });
      process.stderr.write(
        `\nproxy ${values.name} is Healthy: ${up.ip}:${up.port} on ${up.host}\n` +
          `  try it (the guest is behind its host's NAT):\n    ${up.curl}\n` +
          `  its run in the Temporal Web UI:\n    ${up.webUi}\n`,
      );
      process.stdout.write(JSON.stringify(up) + '\n');
    } finally {
      await connection.close();
    }
  } else {
    process.stderr.write(`unknown command ${JSON.stringify(command)}\n\n${HELP}\n`);
    process.exitCode = 2;
  }
} catch (err) {
  // A bad providers file or host-check arguments (host-check.ts is loaded: the error came from it).
  const usage = err instanceof UsageError || (await import('../lib/kvm2/host-check.ts')).isUsageError(err);
  if (!usage) log.error({ err }, 'command failed');
  process.stderr.write(`${(err as Error).message}\n`);
  process.exitCode = usage ? 2 : 1;
}
