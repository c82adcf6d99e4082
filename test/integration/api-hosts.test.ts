/**
 * /v1/hosts end to end against the dev server and a real worker (in-process: the real host and
 * provider-health workflows and activities over one namespaced test host, an entry of its own):
 * the real provider-health survey of the test host feeds the API's known hosts; the list and get
 * show it reachable, Schedulable, with its memory and no proxies; an unknown host is a 404 naming
 * it and starts nothing; a read token cannot cordon; an admin cordons it with a reason (the host
 * workflow starts), reads it back Cordoned (API and egressctl), /metrics shows it cordoned and
 * reachable; a drain of the empty host reaches Drained; uncordon makes it Schedulable, ends the
 * workflow, and /metrics shows it uncordoned. No VM is created.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { hostWorkflowId } from '../../contracts/host.ts';
import type { HostView } from '../../contracts/host.ts';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import { apiError, http } from '../support/api.ts';
import { startApiWorld } from '../support/api-world.ts';
import type { ApiWorld } from '../support/api-world.ts';
import { PROJECT_ROOT, pollUntil } from '../support/temporal.ts';

const pexec = promisify(execFile);

describe('host routes (dev server, real worker, one test host)', { timeout: 300_000 }, () => {
  let w: ApiWorld;
  let survey: ProviderHealthResult | undefined;
  let host: string;
  const call = (method: string, p: string, body?: unknown, token?: string) =>
    http(w.api.url, method, p, { token: token ?? w.tokens.admin, ...(body === undefined ? {} : { body }) });
  /** The egress_host_* lines of this run's entry on /metrics. */
  const metricLines = async (): Promise<string[]> => {
    const text = (await call('GET', '/metrics', undefined, w.tokens.reader)).text;
    return text.split('\n').filter((l) => l.startsWith('egress_host_') && l.includes(`entry="${w.entry}"`));
  };
  const egressctl = (...args: string[]) =>
    pexec(
      process.execPath,
      [`${PROJECT_ROOT}/bin/egressctl`, ...args, '--api', w.api.url, '--token-file', w.tokens.file],
      {
        timeout: 60_000,
      },
    );

  before(async () => {
    w = await startApiWorld({ prefix: 'hs', surveyOwnHosts: true });
    survey = w.surveyed;
    host = w.hosts[0]!.name;
  });
  after(async () => {
    await w?.close();
  });

  it('lists the surveyed host: reachable, Schedulable, its memory, no proxies', async () => {
    const r = await call('GET', `/v1/hosts?entry=${w.entry}`, undefined, w.tokens.reader);
    assert.equal(r.status, 200, r.text);
    const hosts = r.body['hosts'] as HostView[];
    assert.deepEqual(
      hosts.map((h) => h.host),
      [host],
    );
    const h = hosts[0]!;
    assert.deepEqual(
      [h.phase, h.cordoned, h.reachable, h.proxies, h.surveyedAt],
      ['Schedulable', false, true, 0, survey!.at],
    );
    assert.ok((h.memoryTotalMiB ?? 0) > 0 && (h.memoryFreeMiB ?? 0) > 0, r.text);
  });

  it('an unknown host is a 404 naming the known one, and no workflow is started for it', async () => {
    const r = await call('POST', `/v1/hosts/${w.entry}/nohost/cordon`, { reason: 'typo' });
    assert.deepEqual([r.status, apiError(r).code], [404, 'NOT_FOUND'], r.text);
    assert.match(apiError(r).message, new RegExp(`the known hosts of ${w.entry} are ${host} `));
    await assert.rejects(w.client.workflow.getHandle(hostWorkflowId(w.entry, 'nohost')).describe(), /not found/i);
    const reader = await call('POST', `/v1/hosts/${w.entry}/${host}/cordon`, {}, w.tokens.reader);
    assert.equal(reader.status, 403, reader.text);
  });

  it('cordon: read back Cordoned with its reason (API and egressctl); /metrics shows it cordoned', async () => {
    const r = await call('POST', `/v1/hosts/${w.entry}/${host}/cordon`, { reason: 'integration test' });
    assert.equal(r.status, 200, r.text);
    const st = r.body['status'] as HostView;
    assert.deepEqual([st.phase, st.cordoned, st.reason], ['Cordoned', true, 'integration test']);
    const got = await call('GET', `/v1/hosts/${w.entry}/${host}`, undefined, w.tokens.reader);
    const view = got.body['host'] as HostView;
    assert.deepEqual(
      [view.phase, view.reason, view.reachable, view.proxies],
      ['Cordoned', 'integration test', true, 0],
    );
    const { stdout } = await egressctl('host', 'get', `${w.entry}/${host}`, '--output', 'json');
    assert.equal((JSON.parse(stdout) as HostView).phase, 'Cordoned');
    // The list finds the open workflow in visibility (which may lag a moment behind the update).
    const lines = await pollUntil(
      async () => {
        const l = await metricLines();
        return l.includes(`egress_host_cordoned{entry="${w.entry}",host="${host}"} 1`) ? l : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500, what: 'egress_host_cordoned 1' },
    );
    assert.ok(lines.includes(`egress_host_reachable{entry="${w.entry}",host="${host}"} 1`), lines.join('\n'));
    assert.ok(lines.includes(`egress_host_proxies{entry="${w.entry}",host="${host}"} 0`), lines.join('\n'));
    const free = lines.find((l) => l.startsWith(`egress_host_memory_free_bytes{entry="${w.entry}",host="${host}"} `));
    assert.ok(free !== undefined && Number(free.split(' ')[1]) > 0, lines.join('\n'));
  });

  it('drain of the empty host reaches Drained (egressctl host drain --wait)', async () => {
    const { stdout } = await egressctl(
      'host',
      'drain',
      `${w.entry}/${host}`,
      '--wait',
      '--wait-ms',
      '60000',
      '--interval-ms',
      '500',
    );
    assert.match(stdout.trim().split('\n').at(-1)!, / Drained remaining=0 proxies=0/);
    const view = (await call('GET', `/v1/hosts/${w.entry}/${host}`)).body['host'] as HostView;
    assert.deepEqual([view.phase, view.cordoned, view.drain?.remaining], ['Drained', true, 0]);
  });

  it('uncordon: Schedulable, the workflow ends, /metrics shows it uncordoned', async () => {
    const r = await call('POST', `/v1/hosts/${w.entry}/${host}/uncordon`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      [(r.body['status'] as HostView).phase, (r.body['status'] as HostView).cordoned],
      ['Schedulable', false],
    );
    const desc = await pollUntil(
      async () => {
        const d = await w.client.workflow.getHandle(hostWorkflowId(w.entry, host)).describe();
        return d.status.name === 'RUNNING' ? undefined : d;
      },
      { timeoutMs: 20_000, intervalMs: 500, what: 'the host workflow to end' },
    );
    assert.equal(desc.status.name, 'COMPLETED');
    const got = (await call('GET', `/v1/hosts/${w.entry}/${host}`)).body['host'] as HostView;
    assert.deepEqual([got.phase, got.cordoned], ['Schedulable', false]);
    await pollUntil(
      async () =>
        (await metricLines()).includes(`egress_host_cordoned{entry="${w.entry}",host="${host}"} 0`) ? true : undefined,
      { timeoutMs: 20_000, intervalMs: 500, what: 'egress_host_cordoned 0' },
    );
  });
});
