/**
 * The cadence of a booting proxy's health monitor across its returns, as the proxy workflow runs it
 * (workflows/proxy/monitor-loop.ts: the first monitor polls at once, each after a return is started
 * with `waitFirst`): a booting proxy's monitor returns on its first poll (no address yet), on the
 * address and on Healthy, and each monitor after such a return keeps the booting proxy's fast poll
 * (contracts/health.ts pollWaitMs) before its first poll, instead of waiting a whole health
 * interval; once Healthy the next monitor waits the interval. The real loop
 * (activities/monitor.ts runMonitor) over a scripted read and probe; what is asserted is each wait
 * the loop asks for, not how long anything took.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { runMonitor } from '../../activities/monitor.ts';
import type { MonitorIo } from '../../activities/monitor.ts';
import { BOOT_POLL_MS } from '../../contracts/health.ts';
import type { MonitorInput, MonitorResult, MonitorState } from '../../contracts/health.ts';
import type { ProbeOutcome, VmReading } from '../../contracts/proxy.ts';
import { initialStatus, markBooting, markVmRunning } from '../../workflows/proxy/status.ts';
import { resolvedProxy } from '../support/workflow-harness.ts';

const INTERVAL_MS = 3_000; // the embedded default's (dev/providers.ts)
const OK: ProbeOutcome = { ok: true, latencyMs: 4 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_FAILED', message: 'connect ECONNREFUSED' };

describe('a booting proxy across its monitor returns', () => {
  it('each monitor after a return while booting polls at the boot cadence; after Healthy, at the interval', async () => {
    const proxy = resolvedProxy({ name: 'p1', imageKey: 'proxy' }, { health: { intervalMs: INTERVAL_MS } });
    const at = new Date().toISOString();
    const booting = markBooting(
      markVmRunning(
        { ...initialStatus({ name: 'p1', entry: proxy.entry, imageKey: 'proxy' }, at), state: 'Running' },
        at,
      ),
      at,
    );
    // Two polls without an address, then the address with Squid refusing twice, then passes.
    const reads: VmReading[] = [
      { state: 'Running', ip: undefined },
      { state: 'Running', ip: undefined },
    ];
    const probes: ProbeOutcome[] = [REFUSED, REFUSED, OK, OK];
    const waits: number[][] = [];
    let monitor = -1;
    const io: MonitorIo = {
      read: () =>
        Promise.resolve<VmReading>(
          monitor === 3
            ? { state: 'Missing' }
            : (reads.shift() ?? { state: 'Running', ip: '10.0.0.5', source: 'lease' }),
        ),
      probe: () => Promise.resolve(probes.shift() ?? OK),
      now: () => Date.now(),
      wait: (ms) => {
        waits[monitor]!.push(ms);
        return Promise.resolve();
      },
      heartbeat: () => undefined,
      resumed: () => undefined,
    };
    const env = new MockActivityEnvironment();
    let state: MonitorState = { status: booting, missedPolls: 0, addressedOnce: false, polls: 0 };
    const returns: MonitorResult[] = [];
    for (const waitFirst of [false, true, true, true]) {
      monitor++;
      waits.push([]);
      const input: MonitorInput & { waitFirst: boolean } = {
        proxy,
        host: 'h1',
        state,
        checkpointAtMs: Date.now() + 3_600_000,
        waitFirst,
      };
      const r = await env.run<[], MonitorResult, () => Promise<MonitorResult>>(() => runMonitor(input, io));
      returns.push(r);
      state = r.state;
    }

    assert.deepEqual(
      returns.map((r) => [
        r.reason,
        r.state.status.conditions.AddressAssigned.status,
        r.state.status.conditions.Healthy.status,
      ]),
      [
        ['Transition', 'False', 'Unknown'],
        ['Transition', 'True', 'Unknown'],
        ['Transition', 'True', 'True'],
        ['VmLost', 'True', 'True'],
      ],
      'returns: no address yet, the address, Healthy, then (to see the next wait) the VM gone',
    );
    const boot = Math.min(INTERVAL_MS, BOOT_POLL_MS);
    assert.deepEqual(waits[0], [], 'the first monitor polls at once');
    assert.deepEqual(waits[1], [boot, boot], 'after the no-address return: the boot cadence, first poll included');
    assert.deepEqual(waits[2], [boot, boot, boot], 'after the address return: the boot cadence, first poll included');
    assert.deepEqual(waits[3], [INTERVAL_MS], 'after the Healthy return: the interval');
  });
});
