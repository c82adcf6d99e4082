/**
 * Traces that leave the process: the worker as an operator runs it (bin/worker, configured only by
 * the OpenTelemetry SDK's standard variables) exports its spans over OTLP to a real Jaeger v2
 * (scripts/jaeger: built from the Go module proxy, loopback, in-memory storage), and Jaeger's
 * query API returns one trace holding the workflow, activity and libvirt RPC spans, linked parent
 * to child. With the API (bin/api) exporting too, a `POST /v1/proxies` is one trace from the
 * request's span through the proxy workflow and its activities to their libvirt RPCs. A receiver
 * that does not answer does not stop the worker: its spans are dropped and one warning is logged.
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
import { PROXY_WORKFLOW_TYPE, proxyWorkflowId } from '../../contracts/proxy.ts';
import { writeTokens } from '../support/api.ts';
import { spawnApiProcess } from '../support/api-process.ts';
import type { ApiProcess } from '../support/api-process.ts';
import { emptyQcow2 } from '../support/empty-image.ts';
import { deleteAll, fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
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
  tags: { key: string; value: unknown }[];
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

async function workerOn(prefix: string, env: Record<string, string>, imageUrl = 'http://127.0.0.1:9/empty.qcow2') {
  const run = Date.now().toString(36);
  const entry = `${prefix}${run}`;
  const config = fleetConfig({
    entry,
    ownerUid: `uid-${run}`,
    hosts: [loadTestHosts()[0]!],
    images: { empty: { url: imageUrl } },
  });
  const taskQueue = uniqueId(prefix);
  const worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 90_000, env);
  return { worker, taskQueue, entry };
}

/** The traces of `service` in Jaeger (its query API), each with every span of the trace, any service's. */
async function jaegerTraces(service: string): Promise<JaegerTrace[]> {
  const res = await fetch(`${QUERY}/api/traces?service=${encodeURIComponent(service)}&limit=50`, {
    signal: AbortSignal.timeout(5_000),
  });
  if (!res.ok) return [];
  return ((await res.json()) as { data: JaegerTrace[] | null }).data ?? [];
}

/** The parent of a span in `trace` (its CHILD_OF reference, which must be in the same trace). */
function parentIn(trace: JaegerTrace): (s: JaegerSpan) => JaegerSpan | undefined {
  const byId = new Map(trace.spans.map((s) => [s.spanID, s]));
  return (s) => {
    const ref = s.references.find((r) => r.refType === 'CHILD_OF');
    if (ref) assert.equal(ref.traceID, trace.traceID, `${s.operationName}'s parent is in the same trace`);
    return ref ? byId.get(ref.spanID) : undefined;
  };
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
      async () =>
        (await jaegerTraces(service)).find((t) => t.spans.some((s) => s.operationName === 'RunActivity:surveyHosts')),
      {
        timeoutMs: 30_000,
        intervalMs: 500,
        what: `a trace of service ${service} with the surveyHosts activity in Jaeger`,
      },
    );

    const names = [...new Set(trace.spans.map((s) => s.operationName))].sort();
    const parentOf = parentIn(trace);
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

it(
  'POST /v1/proxies is one trace: the API request span, the proxy workflow, its activities and their libvirt RPCs',
  { timeout: 300_000 },
  async () => {
    const service = uniqueId('ep-otlp');
    const [apiService, workerService] = [`${service}-api`, `${service}-worker`];
    // An empty disk: the proxy is placed, its base uploaded, its VM defined and started (it never
    // answers health checks; it need not).
    const mirror = await ImageMirror.start();
    const imageUrl = mirror.serve(`/${service}/empty.qcow2`, await emptyQcow2(tmp));
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: OTLP_HTTP };
    const { worker, taskQueue, entry } = await workerOn('oa', { ...otel, OTEL_SERVICE_NAME: workerService }, imageUrl);
    const tokens = await writeTokens(tmp);
    const name = 't1';
    const handle = client.workflow.getHandle(proxyWorkflowId(entry, name));
    const auth = { authorization: `Bearer ${tokens.admin}` };
    let api: ApiProcess | undefined;
    try {
      api = await spawnApiProcess(tokens.file, taskQueue, { ...otel, OTEL_SERVICE_NAME: apiService });
      const url = api.url;
      assert.ok(
        parsed(api.lines).some((l) => l.msg === 'traces exported over OTLP' && l['serviceName'] === apiService),
        'the API said where its traces go',
      );
      // The worker published its catalog before it polled; the API may read it a moment later.
      const created = await pollUntil(
        async () => {
          const res = await fetch(`${url}/v1/proxies`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ name, entry, imageKey: 'empty' }),
            signal: AbortSignal.timeout(15_000),
          });
          return res.status === 422 ? undefined : { status: res.status, body: await res.text() };
        },
        { timeoutMs: 30_000, intervalMs: 500, what: `the API to accept entry ${entry}` },
      );
      assert.equal(created.status, 201, created.body);
      // Booting: the VM was defined and started (createProxyVm's libvirt RPCs ran).
      const state = await pollUntil(
        async () => {
          const res = await fetch(`${url}/v1/proxies/${entry}/${name}`, {
            headers: auth,
            signal: AbortSignal.timeout(15_000),
          });
          const body = (await res.json()) as { proxy?: { state?: string }; status?: { state?: string } };
          const s = body.status?.state ?? body.proxy?.state;
          return s === 'Booting' || s === 'Running' || s === 'Failed' ? s : undefined;
        },
        { timeoutMs: 180_000, intervalMs: 1_000, what: `${entry}/${name} to boot` },
      );
      assert.notEqual(state, 'Failed', `the proxy failed: ${JSON.stringify(await handle.describe())}`);
      // The workflow's span ends (and is exported) when the workflow does: delete it.
      const del = await fetch(`${url}/v1/proxies/${entry}/${name}?wait=true&waitMs=120000`, {
        method: 'DELETE',
        headers: auth,
        signal: AbortSignal.timeout(130_000),
      });
      const deleted = (await del.json()) as { done?: boolean; state?: string };
      assert.deepEqual([del.status, deleted.done, deleted.state], [200, true, 'Deleted'], JSON.stringify(deleted));
    } finally {
      await deleteAll(client, [handle]); // a proxy the test did not get to delete: no domain left behind
      // SIGTERM: both flush their last batch at shutdown.
      await api?.stop();
      await worker.stop();
      await mirror.close();
    }
    assert.equal(api.child.exitCode, 0, api.lines.slice(-10).join('\n'));
    assert.equal(worker.child.exitCode, 0, worker.lines.slice(-10).join('\n'));
    for (const lines of [api.lines, worker.lines]) {
      assert.ok(!lines.some((l) => l.includes('trace export failed')), 'no export failed');
      assert.ok(!lines.some((l) => l.includes('trace flush at shutdown cut short')), 'the last batch went out');
    }

    const isCreate = (s: JaegerSpan): boolean =>
      s.operationName === 'POST /v1/proxies' &&
      s.tags.some((t) => t.key === 'http.response.status_code' && Number(t.value) === 201);
    const request = await pollUntil(async () => (await jaegerTraces(apiService)).find((t) => t.spans.some(isCreate)), {
      timeoutMs: 30_000,
      intervalMs: 500,
      what: `the API's POST /v1/proxies span (service ${apiService}) in Jaeger`,
    });
    // The worker's spans reach Jaeger in batches of their own, which Jaeger stores a moment after it
    // took them: wait for the workflow's span, the last to end (with the workflow, at the delete).
    const trace = await pollUntil(
      async () =>
        (await jaegerTraces(apiService)).find(
          (t) =>
            t.traceID === request.traceID &&
            t.spans.some((s) => s.operationName === `RunWorkflow:${PROXY_WORKFLOW_TYPE}`),
        ),
      { timeoutMs: 30_000, intervalMs: 500, what: 'the proxy workflow in the trace of the API request' },
    ).catch((err: unknown) => {
      const names = [...new Set(request.spans.map((s) => s.operationName))].sort().join(', ');
      throw new Error(`${(err as Error).message}; the request's trace holds only: ${names}`, { cause: err });
    });

    const serviceOf = (s: JaegerSpan): string | undefined => trace.processes[s.processID]?.serviceName;
    const parentOf = parentIn(trace);
    /** `s` and its ancestors, nearest first (bounded: a trace is no deeper than its span count). */
    const lineage = (s: JaegerSpan): JaegerSpan[] => {
      const out = [s];
      for (let p = parentOf(s); p !== undefined && out.length <= trace.spans.length; p = parentOf(p)) out.push(p);
      return out;
    };
    const names = [...new Set(trace.spans.map((s) => s.operationName))].sort().join(', ');
    const root = trace.spans.find(isCreate)!;
    assert.equal(serviceOf(root), apiService, 'the request span is the API’s');
    assert.equal(parentOf(root), undefined, 'the request span is the root of the trace');
    const start = trace.spans.find((s) => s.operationName === `StartWorkflow:${PROXY_WORKFLOW_TYPE}`);
    assert.ok(start, `the API's workflow start among ${names}`);
    assert.equal(serviceOf(start), apiService);
    assert.equal(lineage(start).at(-1)?.spanID, root.spanID, 'the start is under the request span');
    const workflow = trace.spans.find((s) => s.operationName === `RunWorkflow:${PROXY_WORKFLOW_TYPE}`);
    assert.ok(workflow, `the proxy workflow's span among ${names}`);
    assert.equal(serviceOf(workflow), workerService, "the workflow span is the worker's");
    assert.equal(parentOf(workflow)?.spanID, start.spanID, "the workflow continues the API's start");
    for (const activity of ['surveyHosts', 'createProxyVm']) {
      const run = trace.spans.find((s) => s.operationName === `RunActivity:${activity}`);
      assert.ok(run, `the ${activity} activity among ${names}`);
      const chain = lineage(run).map((s) => s.operationName);
      assert.deepEqual(
        chain.slice(0, 3),
        [`RunActivity:${activity}`, `StartActivity:${activity}`, `RunWorkflow:${PROXY_WORKFLOW_TYPE}`],
        `${activity} hangs under the workflow (${chain.join(' <- ')})`,
      );
      const rpcs = trace.spans.filter((s) => s.operationName.startsWith('libvirt ') && parentOf(s) === run);
      assert.ok(rpcs.length > 0, `libvirt RPC spans under ${activity} (${names})`);
      for (const rpc of rpcs) assert.equal(lineage(rpc).at(-1)?.spanID, root.spanID, `${rpc.operationName} is in it`);
    }
    const defines = trace.spans.filter((s) => s.operationName.startsWith('libvirt DOMAIN_DEFINE_XML'));
    assert.ok(
      defines.some((s) => parentOf(s)?.operationName === 'RunActivity:createProxyVm'),
      `the VM's define among the libvirt spans (${names})`,
    );
    for (const s of trace.spans) {
      assert.equal(lineage(s).at(-1)?.spanID, root.spanID, `${s.operationName} descends from the request span`);
    }
  },
);
