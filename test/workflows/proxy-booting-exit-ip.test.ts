/**
 * Two health rules on the monitor loop (time-skipping test server, fake reads and probes, the real
 * monitor loop of activities/monitor.ts): a booting proxy stays Healthy=Unknown (Booting) through
 * the failing probes of a Squid still starting, until its first pass or its boot deadline, and
 * never records False before; an exit-IP change is published once (one monitor return, one memo
 * upsert, the current details) while a steady exit IP adds no history.
 *
 * The boot deadline is measured by the monitor's clock (real time here) against the VM's start
 * (workflow time): this file never skips server time, so the two agree.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { freshProxyStatus } from '../../client/health.ts';
import type { PlacedProxy } from '../../activities/proxy.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import type { ProbeOutcome, ProxyStatus } from '../../contracts/proxy.ts';
import { REPORT_SINK_WORKFLOW_TYPE, sinkReportsQuery } from '../support/report-sink-workflow.ts';
import { memberFileEnv } from '../support/member-env.ts';
import { pollUntil, uniqueId } from '../support/temporal.ts';
import {
  ENTRY,
  events,
  Fakes,
  monitorStep,
  monitorWaiting,
  resolvedProxy,
  searchAttributes,
  startProxy,
  status,
  statusWhen,
  TEST_TIMEOUT_MS,
  WAIT_MS,
  withWorker,
} from '../support/workflow-harness.ts';

// The report sink (a stand-in pool) is in the bundle: one case is a pool member's.
const e = memberFileEnv();
const opts = { timeout: TEST_TIMEOUT_MS };
const OK: ProbeOutcome = { ok: true, latencyMs: 12 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'squid is still starting' };

/** The values of one search attribute (or memo field) the run upserted, in order (JSON-decoded). */
async function upserted(h: WorkflowHandle, key: string, what: 'sa' | 'memo'): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const ev of await events(h)) {
    const fields =
      what === 'sa'
        ? ev.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields
        : ev.workflowPropertiesModifiedEventAttributes?.upsertedMemo?.fields;
    const p = fields?.[key];
    if (p?.data) out.push(JSON.parse(Buffer.from(p.data).toString('utf8')));
  }
  return out;
}

/** How many monitor activities the run scheduled. */
async function monitors(h: WorkflowHandle): Promise<number> {
  return (await events(h)).filter(
    (ev) => ev.activityTaskScheduledEventAttributes?.activityType?.name === 'monitorProxy',
  ).length;
}

async function running(f: Fakes, tq: string, started: WorkflowHandle[], extra = {}) {
  f.taskQueue = tq;
  const p = await startProxy(e, tq, started, { healthLoop: 'monitor', ...extra });
  await statusWhen(p.handle, (s) => s.state === 'Running', 'Running');
  await monitorWaiting(f, 0, 'the first health poll');
  return p.handle;
}

describe('Healthy=Unknown (Booting) on the monitor loop', () => {
  it('failing probes after the VM starts keep Unknown (Booting); False only at the boot deadline', opts, async () => {
    const f = new Fakes(e);
    const bootMs = 4_000;
    f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs } });
    f.probe = () => REFUSED;
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const h = await running(f, tq, started);
        const booting = await status(h);
        assert.equal(booting.conditions.Healthy.status, 'Unknown');
        assert.equal(booting.conditions.Healthy.reason, 'Booting');
        let s: ProxyStatus = await freshProxyStatus(h);
        for (let i = 2; i <= 4; i++) s = await monitorStep(e, f, h, `failing probe ${i}`);
        assert.equal(s.health.consecutiveFailed, 4, 'four failures, over unhealthyAfter (3)');
        assert.equal(s.conditions.Healthy.status, 'Unknown', 'still booting: not False');
        assert.equal(s.conditions.Healthy.reason, 'Booting');
        const seen = await upserted(h, 'ProxyHealth', 'sa');
        assert.ok(seen.length > 0 && seen.every((v) => v === 'Unknown'), `ProxyHealth upserts ${JSON.stringify(seen)}`);
        assert.equal((await searchAttributes(h))['ProxyHealth'], 'Unknown');
        // Past bootMs since the VM started, the next failing probe makes it False.
        const since = Date.parse(booting.conditions.Healthy.since);
        await sleep(Math.max(0, since + bootMs - Date.now()) + 200);
        s = await monitorStep(e, f, h, 'a failing probe past the boot deadline');
        const failed = await statusWhen(h, (st) => st.conditions.Healthy.status === 'False', 'Healthy False recorded');
        assert.equal(failed.conditions.Healthy.reason, 'ProbeFailed');
        assert.ok(Date.parse(failed.conditions.Healthy.since) >= since + bootMs, 'not before the boot deadline');
        assert.equal(s.state, 'Running');
      },
      started,
    );
  });

  it('a Squid that passes after a few failures goes Unknown (Booting) → True, never False', opts, async () => {
    const f = new Fakes(e);
    f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs: 300_000 } });
    f.probe = (_input, n) => (n < 3 ? REFUSED : OK);
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const h = await running(f, tq, started);
        let s = await freshProxyStatus(h);
        for (let i = 2; i <= 5; i++) s = await monitorStep(e, f, h, `probe ${i}`);
        assert.equal(s.conditions.Healthy.status, 'True', 'failures ×3, passes ×2: Healthy');
        await statusWhen(h, (st) => st.conditions.Healthy.status === 'True', 'Healthy True recorded');
        const seen = await upserted(h, 'ProxyHealth', 'sa');
        assert.ok(!seen.includes('False'), `ProxyHealth upserts ${JSON.stringify(seen)} include no False`);
        assert.equal(seen.at(-1), 'True');
        // Returns: the address, then Healthy True; the failures below the deadline are no transition.
        assert.equal(await monitors(h), 3);
      },
      started,
    );
  });
});

describe('exit IP on the monitor loop', () => {
  it('an exit-IP change is published once; a steady exit IP adds no history', opts, async () => {
    const f = new Fakes(e);
    f.resolve = (spec) =>
      resolvedProxy(spec, { health: { egressIpUrl: 'http://198.51.100.7/ip', egressIpIntervalMs: 1 } });
    let exitIp = '203.0.113.9';
    const reads: string[] = [];
    f.probe = (input: PlacedProxy & { ip: string; readExitIp?: boolean }) => {
      if (input.readExitIp !== true) return OK;
      reads.push(exitIp);
      return { ...OK, exitIp };
    };
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const h = await running(f, tq, started);
        assert.equal(reads.length, 0, 'the first probe does not make it Healthy (healthyAfter 2): no read yet');
        let s = await monitorStep(e, f, h, 'probe 2: Healthy, the first read');
        assert.equal(s.exitIp, '203.0.113.9');
        const first = await statusWhen(h, (st) => st.exitIp === '203.0.113.9', 'the exit IP in the status query');
        assert.equal(first.conditions.Healthy.status, 'True', 'recorded with the Healthy transition, in one return');
        assert.equal(await monitors(h), 3, 'returns: the address, Healthy with the exit IP');
        assert.deepEqual(f.exitIpChanges, [{ to: '203.0.113.9' }]);
        const eventsSteady = (await events(h)).length;
        for (let i = 0; i < 5; i++) s = await monitorStep(e, f, h, `steady read ${i + 1}`);
        assert.equal(reads.length, 6, 'read with every probe (egressIpIntervalMs 1)');
        assert.equal((await events(h)).length, eventsSteady, 'five steady reads: no history events');
        assert.equal(await monitors(h), 3);

        exitIp = '198.51.100.44';
        s = await monitorStep(e, f, h, 'the exit IP changes');
        assert.equal(s.exitIp, '198.51.100.44');
        const changed = await statusWhen(h, (st) => st.exitIp === '198.51.100.44', 'the new exit IP recorded');
        assert.equal(changed.conditions.Healthy.status, 'True');
        assert.deepEqual(f.exitIpChanges.at(-1), { from: '203.0.113.9', to: '198.51.100.44' });
        for (let i = 0; i < 3; i++) s = await monitorStep(e, f, h, `steady on the new address ${i + 1}`);
        assert.equal(await monitors(h), 4, 'one return for the change, none for the steady reads after');
        assert.deepEqual(await upserted(h, 'exitIp', 'memo'), ['203.0.113.9', '198.51.100.44'], 'one memo upsert each');
        const meta = await pollUntil(
          async () => {
            const m = await h.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
            return m.currentDetails?.includes('exit `198.51.100.44`') === true ? m : undefined;
          },
          { timeoutMs: WAIT_MS, what: 'the current details with the new exit IP' },
        );
        assert.match(meta.currentDetails ?? '', /Healthy True/);
      },
      started,
    );
  });

  it('a pool member reports its exit IP to its pool, once per address', opts, async () => {
    const f = new Fakes(e);
    f.resolve = (spec) =>
      resolvedProxy(spec, { health: { egressIpUrl: 'http://198.51.100.7/ip', egressIpIntervalMs: 1 } });
    let exitIp = '203.0.113.9';
    f.probe = (input: PlacedProxy & { ip: string; readExitIp?: boolean }) =>
      input.readExitIp === true ? { ...OK, exitIp } : OK;
    const started: WorkflowHandle[] = [];
    await withWorker(
      e,
      f.activities(),
      async (tq) => {
        const pool = await e.env.client.workflow.start(REPORT_SINK_WORKFLOW_TYPE, {
          taskQueue: tq,
          workflowId: `pool/${ENTRY}/${uniqueId('sink').toLowerCase()}`,
          args: [],
        });
        started.push(pool);
        const reports = (): Promise<MemberReport[]> => pool.query(sinkReportsQuery);
        const h = await running(f, tq, started, { pool: { workflowId: pool.workflowId, serving: true } });
        await monitorStep(e, f, h, 'Healthy, the first read');
        const first = await pollUntil(
          async () => ((await reports()).some((r) => r.exitIp === exitIp) ? reports() : undefined),
          { timeoutMs: WAIT_MS, what: 'a report with the exit IP' },
        );
        assert.equal(first.at(-1)!.exitIp, '203.0.113.9');
        assert.equal(first.at(-1)!.health, 'True');
        for (let i = 0; i < 3; i++) await monitorStep(e, f, h, `steady ${i + 1}`);
        exitIp = '198.51.100.44';
        await monitorStep(e, f, h, 'the exit IP changes');
        const after = await pollUntil(
          async () => ((await reports()).some((r) => r.exitIp === exitIp) ? reports() : undefined),
          { timeoutMs: WAIT_MS, what: 'a report with the new exit IP' },
        );
        const withExit = after.filter((r) => r.exitIp !== undefined).map((r) => r.exitIp);
        assert.deepEqual(withExit, ['203.0.113.9', '198.51.100.44'], 'one report per address');
      },
      started,
    );
  });
});
