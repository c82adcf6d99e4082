/**
 * The worker as an operator runs it: `--help`, a bad providers file (exit 2, the field named, in a
 * JSON line), and a running worker whose every output line is JSON that `jq` would parse (the
 * Temporal SDK's and Core's lines included), stopped cleanly by SIGTERM.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, it } from 'node:test';
import { fleetConfig, spawnWorker, writeProvidersFile } from '../support/fleet.ts';
import { connectClient, PROJECT_ROOT, uniqueId } from '../support/temporal.ts';
import { HEALTH_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const WORKER = join(PROJECT_ROOT, 'bin/worker');
let tmp: string;

before(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'ep-worker-'));
});
after(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

it('--help lists every option and exits 0', async () => {
  const { stdout } = await pexec(process.execPath, [WORKER, '--help'], { timeout: 30_000 });
  for (const option of [
    '--providers',
    '--task-queue',
    '--max-activities',
    '--max-workflow-tasks',
    '--shutdown-grace-ms',
    '--no-schedules',
  ]) {
    assert.ok(stdout.includes(option), `--help mentions ${option}`);
  }
});

it('a bad providers file exits 2 with one JSON line naming the field and the fix', async () => {
  const file = join(tmp, 'bad.yaml');
  await writeFile(file, 'providers:\n  - name: Lab\n    type: kvm2\n');
  const err = await pexec(process.execPath, [WORKER, '--providers', file], { timeout: 30_000 }).then(
    () => undefined,
    (e: unknown) => e as { code: number; stdout: string },
  );
  assert.ok(err, 'the worker refused the file');
  assert.equal(err.code, 2);
  const lines = err.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { level: string; msg: string });
  const fatal = lines.find((l) => l.level === 'fatal');
  assert.ok(fatal, err.stdout);
  assert.match(fatal.msg, /providers\[0\]\.name/);
  assert.match(fatal.msg, /hosts/);
});

it('a running worker writes only JSON lines and stops cleanly on SIGTERM', { timeout: 120_000 }, async () => {
  const run = Date.now().toString(36);
  const config = fleetConfig({
    entry: `wp${run}`,
    ownerUid: `uid-${run}`,
    hosts: [loadTestHosts()[0]!],
    images: { empty: { url: 'http://127.0.0.1:9/empty.qcow2' } },
  });
  const worker = await spawnWorker(await writeProvidersFile(tmp, config), uniqueId('wp'));
  await worker.stop();
  assert.equal(worker.child.exitCode, 0, worker.lines.slice(-10).join('\n'));
  assert.ok(worker.lines.length >= 2, 'the worker said something');
  for (const line of worker.lines) {
    const parsed = JSON.parse(line) as { time?: string; level?: string };
    assert.match(parsed.time ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, `RFC 3339 time in ${line}`);
    assert.equal(typeof parsed.level, 'string');
  }
  assert.ok(
    worker.lines.some((l) => l.includes('"worker stopped"')),
    'the worker logged its stop',
  );
});

it('--metrics-listen serves libvirt RPC latency by procedure and link counters', { timeout: 120_000 }, async () => {
  const run = Date.now().toString(36);
  const host = loadTestHosts()[0]!;
  const entry = `wm${run}`;
  const config = fleetConfig({
    entry,
    ownerUid: `uid-${run}`,
    hosts: [host],
    images: { empty: { url: 'http://127.0.0.1:9/e.qcow2' } },
  });
  const taskQueue = uniqueId('wm');
  const worker = await spawnWorker(await writeProvidersFile(tmp, config), taskQueue, 60_000, {
    EP_WORKER_METRICS_LISTEN: '127.0.0.1:0',
  });
  const client = await connectClient();
  try {
    const served = worker.lines
      .map((l) => JSON.parse(l) as { msg?: string; url?: string })
      .find((l) => l.msg === 'metrics served');
    assert.ok(served?.url, 'the worker logged where its metrics are');
    await client.workflow.execute(HEALTH_WORKFLOW_TYPE, {
      workflowId: uniqueId('wm-health'),
      taskQueue,
      args: [],
      workflowExecutionTimeout: '60 seconds',
    });
    const text = await (await fetch(served.url)).text();
    const count = new RegExp(
      `^egress_libvirt_rpc_duration_seconds_count\\{procedure="CONNECT_GET_LIB_VERSION",outcome="ok",host="${entry}/${host.name}"\\} (\\d+)$`,
      'm',
    ).exec(text);
    assert.ok(
      count && Number(count[1]) >= 1,
      text
        .split('\n')
        .filter((l) => l.includes('libvirt'))
        .slice(0, 10)
        .join('\n'),
    );
    assert.match(text, /^# TYPE egress_ssh_link_deaths_total counter$/m);
    assert.match(text, /^# TYPE egress_health_probe_duration_seconds histogram$/m);
    assert.match(text, /^# TYPE egress_image_upload_bytes_total counter$/m);
    assert.match(text, /^egress_worker_process_resident_memory_bytes \d+/m);
  } finally {
    await client.connection.close();
    await worker.stop();
  }
});
