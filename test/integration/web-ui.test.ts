/**
 * The Temporal Web UI of the embedded stack, seen by a real browser (Debian's chromium, headless):
 * a Running proxy is listed when the list is filtered on its search attributes (ProxyState,
 * ProviderEntry) and absent under a filter it does not match, so the UI really reads the
 * attributes the workflow keeps current. A screenshot of the list filtered on the proxy's entry
 * is kept under .data/artifacts/ for a person to look at (a running workflow's own page keeps a
 * long poll open, which headless chromium's virtual time never gets past).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import {
  PROXY_DELETE_UPDATE,
  PROXY_STATUS_QUERY,
  PROXY_WORKFLOW_TYPE,
  proxyWorkflowId,
} from '../../contracts/proxy.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import { fleetConfig, startFleetWorker } from '../support/fleet.ts';
import type { RunningWorker } from '../support/fleet.ts';
import { ImageMirror } from '../support/mirror.ts';
import {
  connectClient,
  connectWorker,
  installTestRuntime,
  pollUntil,
  PROJECT_ROOT,
  uniqueId,
} from '../support/temporal.ts';
import { loadTestHosts } from '../support/testhosts.ts';

const pexec = promisify(execFile);
const UI = `http://127.0.0.1:${process.env['TEMPORAL_UI_PORT'] || '8233'}`;
const ARTIFACTS = join(PROJECT_ROOT, '.data/artifacts');
const CHROMIUM = ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--virtual-time-budget=15000'];

let client: Client;
let connection: NativeConnection;
let mirror: ImageMirror;
let worker: RunningWorker | undefined;
let tmp: string;

before(async () => {
  installTestRuntime();
  client = await connectClient();
  connection = await connectWorker();
  mirror = await ImageMirror.start();
  tmp = await mkdtemp(join(tmpdir(), 'ep-ui-'));
});
after(async () => {
  await worker?.stop();
  await mirror?.close();
  await connection?.close();
  await client?.connection.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** The DOM of `url` after the single-page app rendered (bounded by chromium's virtual time and a timeout). */
async function dom(url: string): Promise<string> {
  return (await chromium('--dump-dom', url)).stdout;
}

/** Runs headless chromium with a profile of its own (a shared one hands off to a running instance). */
async function chromium(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const profile = await mkdtemp(join(tmp, 'profile-'));
  return pexec('chromium', [...CHROMIUM, `--user-data-dir=${profile}`, ...args], {
    timeout: 60_000,
    maxBuffer: 32 * 1024 * 1024,
  });
}

it(
  'the Web UI lists a Running proxy under a filter on its search attributes, and a screenshot is kept',
  { timeout: 240_000 },
  async () => {
    const run = Date.now().toString(36);
    const entry = `ui${run}`;
    const file = join(tmp, 'empty.qcow2');
    await pexec('qemu-img', ['create', '-q', '-f', 'qcow2', file, '64M'], { timeout: 20_000 });
    const url = mirror.serve(`/${entry}/empty.qcow2`, await readFile(file));
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts: [loadTestHosts()[0]!],
      images: { empty: { url } },
    });
    const taskQueue = uniqueId('ui');
    worker = await startFleetWorker(connection, client, config, taskQueue);
    const id = proxyWorkflowId(entry, 'web');
    const handle = await client.workflow.start(PROXY_WORKFLOW_TYPE, {
      workflowId: id,
      taskQueue,
      args: [{ name: 'web', entry, imageKey: 'empty' }],
    });
    try {
      await pollUntil(
        async () => ((await handle.query<ProxyStatus>(PROXY_STATUS_QUERY)).state === 'Running' ? true : undefined),
        { timeoutMs: 120_000, intervalMs: 250, what: 'the proxy to run' },
      );
      const list = (query: string): string => `${UI}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;
      // Visibility is eventually consistent: allow the UI a few bounded tries.
      const listed = await pollUntil(
        async () =>
          (await dom(list(`ProxyState="Running" AND ProviderEntry="${entry}"`))).includes(id) ? true : undefined,
        { timeoutMs: 90_000, intervalMs: 1000, what: 'the proxy in the Web UI list filtered on ProxyState=Running' },
      );
      assert.equal(listed, true);
      const other = await dom(list(`ProxyState="Deleted" AND ProviderEntry="${entry}"`));
      assert.ok(!other.includes(id), 'a filter the proxy does not match does not list it');
      assert.match(other, /<html/i, 'the page rendered');

      await mkdir(ARTIFACTS, { recursive: true });
      const shot = join(ARTIFACTS, `web-ui-${entry}.png`);
      const out = await chromium('--window-size=1440,1000', `--screenshot=${shot}`, list(`ProviderEntry="${entry}"`));
      const written = await stat(shot).catch(() => undefined);
      const said = out.stderr
        .split('\n')
        .filter((l) => !l.includes('dbus'))
        .join('\n');
      assert.ok(written && written.size > 10_000, `no screenshot at ${shot}: ${out.stdout}${said.slice(-3000)}`);
    } finally {
      await handle.executeUpdate(PROXY_DELETE_UPDATE).catch(() => undefined);
      await handle.result().catch(() => undefined);
    }
  },
);
