// The operator CLI.
//
//   node workers/cli.ts smoke [--name NAME]            run the smoke workflow on the worker; print its result
//   node workers/cli.ts host-check FILE.json [...]     dial hosts over SSH and print their health as JSON
//   node workers/cli.ts --help
//
// Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE (default `default`),
// LOG_LEVEL (default warn for the CLI). Output: JSON on stdout; logs: JSON lines on stderr.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { createLogger, logLevelFromEnv } from '../lib/log/logger.ts';
import { HostLinks } from '../lib/ssh/pool.ts';
import type { HostTarget } from '../lib/ssh/link.ts';
import { errorKind } from '../lib/errors.ts';
import { hostHealth } from '../lib/kvm2/health.ts';
import type { HostHealth } from '../lib/kvm2/health.ts';
import { SMOKE_WORKFLOW_TYPE } from '../shared/smoke.ts';
import type { SmokeResult } from '../shared/smoke.ts';
import { TASK_QUEUE } from '../shared/task-queues.ts';

const HELP = `egress-proxies CLI

Usage:
  node workers/cli.ts smoke [--name NAME] [--timeout-ms MS]
      Starts the smoke workflow (ID smoke/cli-<time>) on task queue ${TASK_QUEUE} and prints its
      result. Needs the Temporal dev server (scripts/temporal up) and a worker (node workers/worker.ts).
  node workers/cli.ts host-check DESCRIPTOR.json [DESCRIPTOR.json ...] [--timeout-ms MS]
      For each host descriptor (test/hosts/README.md describes the fields), dials over SSH,
      forwards the libvirt socket, and prints reachability, round-trip time, libvirt and
      hypervisor versions, and the storage pool's capacity and free space. Exit 1 if any host fails.

Options:
  --timeout-ms MS   bound on each step (default 30000)
  -h, --help        this text

Environment: TEMPORAL_ADDRESS (127.0.0.1:7233), TEMPORAL_NAMESPACE (default), LOG_LEVEL (warn).`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: 'string', default: 'operator' },
    'timeout-ms': { type: 'string', default: '30000' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
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
const log = createLogger({ name: 'cli', stream: 'stderr', level: logLevelFromEnv(process.env, 'warn') });

async function smoke(): Promise<void> {
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

interface Descriptor {
  name: string;
  address: string;
  port: number;
  user: string;
  keyPath: string;
  knownHostsPath: string;
  socketPath?: string;
  pool: string;
}

async function hostCheck(files: string[]): Promise<boolean> {
  let allOk = true;
  for (const file of files) {
    const d = JSON.parse(readFileSync(file, 'utf8')) as Descriptor;
    const target: HostTarget = {
      name: d.name,
      host: d.address,
      port: d.port,
      user: d.user,
      keyPath: d.keyPath,
      knownHostsPath: d.knownHostsPath,
      socketPath: d.socketPath,
    };
    const links = new HostLinks(target, { dial: { logger: log } });
    const started = performance.now();
    try {
      const link = await links.dedicated('health');
      let health: HostHealth;
      try {
        health = await hostHealth(link.client, d.pool, { timeoutMs });
      } finally {
        await link.close();
      }
      process.stdout.write(
        JSON.stringify({ host: d.name, connectMs: Math.round(performance.now() - started), ...health }) + '\n',
      );
    } catch (err) {
      allOk = false;
      process.stdout.write(
        JSON.stringify({ host: d.name, reachable: false, kind: errorKind(err), error: (err as Error).message }) + '\n',
      );
    } finally {
      links.close();
    }
  }
  return allOk;
}

try {
  if (command === 'smoke') await smoke();
  else if (command === 'host-check') {
    if (rest.length === 0) throw new Error('host-check needs at least one descriptor file (see --help)');
    if (!(await hostCheck(rest))) process.exitCode = 1;
  } else {
    process.stderr.write(`unknown command ${JSON.stringify(command)}\n\n${HELP}\n`);
    process.exitCode = 2;
  }
} catch (err) {
  log.error({ err }, 'command failed');
  process.stderr.write(`${(err as Error).message}\n`);
  process.exitCode = 1;
}
