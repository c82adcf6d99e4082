/**
 * Traces that leave the process: the worker as an operator runs it (bin/worker, configured only by
 * the OpenTelemetry SDK's standard variables) exports its spans over OTLP to a real Jaeger v2
 * (scripts/jaeger: built from the Go module proxy, loopback, in-memory storage), and Jaeger's
 * query API returns one trace holding the workflow, activity and libvirt RPC spans, linked parent
 * to child. A receiver that does not answer does not stop the worker: its spans are dropped and one
 * warning is logged.
 *
 * Needs: the dev server and the test hosts (as every integration test); `scripts/jaeger up` is
 * called here (idempotent; a cold first run builds Jaeger, minutes) and Jaeger is left running.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { HEALTH_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import { connectClient, PROJECT_ROOT, pollUntil, uniqueId } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const OTLP_HTTP = `http://127.0.0.1:${process.env['JAEGER_OTLP_HTTP_PORT'] || 4318}`;
const QUERY = `http://127.0.0.1:${process.env['JAEGER_QUERY_PORT'] || 16686}`;
/** scripts/jaeger's own bound on a cold build is 25 min; the start is a minute at most. */
const JAEGER_UP_TIMEOUT_MS = 27 * 60_000;

/** A span as Jaeger's query API (/api/traces) returns it. */
interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; traceID: string; spanID: string }[];
  processID: string;
}
interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

let tmp: string;
let client: Client;

before(async () => {
  await pexec(join(PROJECT_ROOT, 'scripts/jaeger'), ['up'], { timeout: JAEGER_UP_TIMEOUT_MS });
  tmp = await mkdtemp(join(tmpdir(), 'ep-otlp-'));
  client = await connectClient();
});
after(async () => {
  await client?.connection.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function workerOn(prefix: string, env: Record<string, string>) {
  const run = Date.now().toString(36);
  const config = fleetConfig({
    entry: `${prefix}${run}`,
    ownerUid: `uid-${run}`,
    hosts: [loadTestHosts()[0]!],
    images: { empty: { url: 'http://127.0.0.1:9/empty.qcow2' } },
  });
  const taskQueue = uniqueId(prefix);
  const worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 90_000, env);
  return { worker, taskQueue };
}

async function runHealth(taskQueue: string): Promise<void> {
  const result = await client.workflow.execute<() => Promise<ProviderHealthResult>>(HEALTH_WORKFLOW_TYPE, {
    workflowId: uniqueId('otlp-health'),
    taskQueue,
    args: [],
    workflowExecutionTimeout: '60 seconds',
  });
  assert.equal(result.entries[0]?.ready, 1, 'the health workflow reached the test host');
}

function parsed(lines: readonly string[]): { level?: string; msg?: string; [k: string]: unknown }[] {
  return lines.map((l) => JSON.parse(l) as { level?: string; msg?: string });
}

it(
  'the worker exports workflow, activity and libvirt spans over OTLP: Jaeger holds them as one trace',
  { timeout: 240_000 },
  async () => {
    const service = uniqueId('ep-otlp');
    const { worker, taskQueue } = await workerOn('ox', {
      OTEL_EXPORTER_OTLP_ENDPOINT: OTLP_HTTP,
      OTEL_SERVICE_NAME: service,
    });
    try {
      assert.ok(
        parsed(worker.lines).some(
          (l) => l.msg === 'traces exported over OTLP' && l['endpoint'] === `${OTLP_HTTP}/v1/traces`,
        ),
        'the worker said where its traces go',
      );
      await runHealth(taskQueue);
    } finally {
      // SIGTERM: the batch processor's queue (OTEL_BSP_SCHEDULE_DELAY, 5 s by default, has not run
      // out yet) is flushed at shutdown.
      await worker.stop();
    }
    assert.equal(worker.child.exitCode, 0, worker.lines.slice(-10).join('\n'));
    assert.ok(!worker.lines.some((l) => l.includes('trace export failed')), 'no export failed');

    const trace = await pollUntil(
      async () => {
        const res = await fetch(`${QUERY}/api/traces?service=${encodeURIComponent(service)}&limit=50`, {
          signal: AbortSignal.timeout(5_000),
        });
        if (!res.ok) return undefined;
        const body = (await res.json()) as { data: JaegerTrace[] | null };
        return (body.data ?? []).find((t) => t.spans.some((s) => s.operationName === 'RunActivity:surveyHosts'));
      },
      {
        timeoutMs: 30_000,
        intervalMs: 500,
        what: `a trace of service ${service} with the surveyHosts activity in Jaeger`,
      },
    );

    const names = [...new Set(trace.spans.map((s) => s.operationName))].sort();
    const byId = new Map(trace.spans.map((s) => [s.spanID, s]));
    const parentOf = (s: JaegerSpan): JaegerSpan | undefined => {
      const ref = s.references.find((r) => r.refType === 'CHILD_OF');
      if (ref) assert.equal(ref.traceID, trace.traceID, `${s.operationName}'s parent is in the same trace`);
      return ref ? byId.get(ref.spanID) : undefined;
    };
    for (const s of trace.spans) {
      assert.equal(trace.processes[s.processID]?.serviceName, service, `${s.operationName} comes from ${service}`);
    }
    const workflow = trace.spans.find((s) => s.operationName === `RunWorkflow:${HEALTH_WORKFLOW_TYPE}`);
    assert.ok(workflow, `a workflow span among ${names.join(', ')}`);
    const activity = trace.spans.find((s) => s.operationName === 'RunActivity:surveyHosts')!;
    const start = parentOf(activity);
    assert.equal(start?.operationName, 'StartActivity:surveyHosts', `the activity's parent (${names.join(', ')})`);
    assert.equal(parentOf(start)?.spanID, workflow.spanID, 'StartActivity hangs under the workflow span');
    const rpcs = trace.spans.filter((s) => s.operationName.startsWith('libvirt '));
    assert.ok(
      rpcs.some((s) => s.operationName === 'libvirt CONNECT_GET_LIB_VERSION'),
      `the health call among the libvirt spans: ${rpcs.map((s) => s.operationName).join(', ')}`,
    );
    for (const rpc of rpcs) {
      assert.equal(parentOf(rpc)?.spanID, activity.spanID, `${rpc.operationName} is a child of the activity span`);
    }
  },
);

it(
  'an OTLP endpoint that does not answer: the worker runs on, spans are dropped, one warning',
  { timeout: 240_000 },
  async () => {
    // A loopback port nobody listens on: taken from the kernel, then released.
    const port = await new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const { worker, taskQueue } = await workerOn('oz', {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      // Short batches: each workflow's spans go out in exports of their own, all failing.
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    try {
      await runHealth(taskQueue);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await runHealth(taskQueue);
    } finally {
      await worker.stop();
    }
    assert.equal(worker.child.exitCode, 0, worker.lines.slice(-10).join('\n'));
    const lines = parsed(worker.lines);
    const warnings = lines.filter((l) => (l.msg ?? '').startsWith('trace export failed'));
    assert.equal(warnings.length, 1, `one warning, got ${warnings.length}`);
    assert.equal(warnings[0]!.level, 'warn', 'at warn level');
    assert.equal(warnings[0]!['endpoint'], `http://127.0.0.1:${port}/v1/traces`, 'it names the endpoint');
    const dropped = lines.find((l) => l.msg === 'spans dropped by failed trace exports');
    assert.ok(dropped, 'the worker said how many spans it dropped');
    assert.ok(
      Number(dropped['droppedSpans']) > Number(warnings[0]!['spans']),
      `more exports failed after the warning (${String(dropped['droppedSpans'])} dropped, ${String(warnings[0]!['spans'])} in the first) without another`,
    );
  },
);
