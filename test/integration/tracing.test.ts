/**
 * OpenTelemetry through Temporal: with the worker's tracing plugin, each libvirt call made by an
 * activity is a span whose parent is that activity's span (one trace from the workflow down to
 * the RPC). Runs the provider-health workflow (one surveyHosts activity, a few libvirt calls per
 * host) on the dev server against a test host.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { createLogger } from '../../lib/log/logger.ts';
import { HEALTH_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import { setupTracing } from '../../runtime/telemetry.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { connectClient, connectWorker, installTestRuntime, uniqueId } from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

let client: Client;
let connection: NativeConnection;
let worker: RunningWorker | undefined;
const exporter = new InMemorySpanExporter();
const log = createLogger({ name: 'test', level: 'warn', stream: 'stderr' });
const tracing = setupTracing(log, { processor: new SimpleSpanProcessor(exporter), env: {} });

before(async () => {
  installTestRuntime();
  client = await connectClient();
  connection = await connectWorker();
});
after(async () => {
  await worker?.stop();
  await tracing.shutdown();
  await connection?.close();
  await client?.connection.close();
});

it('libvirt call spans are children of the activity span that made them', { timeout: 120_000 }, async () => {
  const run = Date.now().toString(36);
  const host = loadTestHosts()[0]!;
  const config = fleetConfig({
    entry: `ot${run}`,
    ownerUid: `uid-${run}`,
    hosts: [host],
    images: { empty: { url: 'http://127.0.0.1:9/empty.qcow2' } },
  });
  const taskQueue = uniqueId('otel');
  worker = await startFleetWorker(connection, client, config, taskQueue, { plugins: [tracing.plugin], logger: log });
  const result = await client.workflow.execute<() => Promise<ProviderHealthResult>>(HEALTH_WORKFLOW_TYPE, {
    workflowId: uniqueId('otel-health'),
    taskQueue,
    args: [],
    workflowExecutionTimeout: '60 seconds',
  });
  assert.equal(result.entries[0]?.ready, 1);

  const spans = exporter.getFinishedSpans();
  const activity = spans.find((s) => s.name === 'RunActivity:surveyHosts');
  assert.ok(activity, `no activity span among ${[...new Set(spans.map((s) => s.name))].join(', ')}`);
  const rpcs = spans.filter((s) => s.name.startsWith('libvirt '));
  assert.ok(rpcs.length >= 3, `libvirt spans: ${rpcs.map((s) => s.name).join(', ')}`);
  const version = rpcs.find(
    (s) => s.name === 'libvirt CONNECT_GET_LIB_VERSION' && s.parentSpanId === activity.spanContext().spanId,
  );
  assert.ok(version, 'the health call CONNECT_GET_LIB_VERSION is a child of the activity span');
  for (const s of rpcs.filter((r) => r.spanContext().traceId === activity.spanContext().traceId)) {
    assert.equal(s.parentSpanId, activity.spanContext().spanId, `${s.name} hangs under the activity`);
  }
  const workflowSpan = spans.find((s) => s.spanContext().spanId === activity.parentSpanId);
  assert.ok(workflowSpan, 'the activity span has a parent span in the same trace (the workflow side)');
});
