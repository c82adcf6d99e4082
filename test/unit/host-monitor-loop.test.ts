/**
 * The host monitor's loop (activities/host-monitor.ts runHostMonitor) over a fake world in virtual
 * time: the proxies of a host are polled in rounds with one heartbeat per round, verdicts are told
 * once each and in order (again when the signal failed), a VM gone ends its watch, a retry resumes
 * the counters from the heartbeat, a closed workflow is reported gone, and nothing to watch returns.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { IDLE_RETURN_MS, nextDueMs, runHostMonitor } from '../../activities/host-monitor.ts';
import type { HostMonitorIo } from '../../activities/host-monitor.ts';
import { BOOT_POLL_MS } from '../../contracts/health.ts';
import type { MonitorState } from '../../contracts/health.ts';
import type {
  HostMonitorActivityResult,
  HostMonitorDetails,
  HostVerdict,
  HostWatch,
} from '../../contracts/host-monitor.ts';
import type { ProbeOutcome, VmReading } from '../../contracts/proxy.ts';
import { initialStatus, markBooting, markVmRunning } from '../../workflows/proxy/status.ts';
import { resolvedProxy } from '../support/workflow-harness.ts';

const INTERVAL = 15_000;
const T0 = Date.parse('2026-12-04T00:00:00Z');
const OK: ProbeOutcome = { ok: true, latencyMs: 2 };
const REFUSED: ProbeOutcome = { ok: false, code: 'PROBE_REFUSED', message: 'refused' };
const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

function watch(name: string, token = `run/${name}/1`): HostWatch {
  const proxy = resolvedProxy({ name, imageKey: 'img' }, { health: { intervalMs: INTERVAL, monitor: 'host' } });
  const status = {
    ...initialStatus({ name, entry: proxy.entry, imageKey: 'img' }, new Date(T0).toISOString()),
    state: 'Running' as const,
    host: 'h1',
  };
  const state: MonitorState = { status, missedPolls: 0, addressedOnce: false, polls: 0 };
  return { workflowId: `proxy/e1/${name}`, token, input: { proxy, host: 'h1', state, checkpointAtMs: T0 + 3_600_000 } };
}

/** A fake world in virtual time: `wait` moves the clock. */
class World implements HostMonitorIo {
  clock = T0;
  list: HostWatch[] = [];
  version = 0;
  reads = new Map<string, VmReading>();
  probes = new Map<string, ProbeOutcome>();
  polls = new Map<string, number>();
  told: { name: string; v: HostVerdict }[] = [];
  failTells = 0;
  goneNames = new Set<string>();
  beats: HostMonitorDetails[] = [];
  resumedDetails: HostMonitorDetails | undefined;
  /** Called at every wait with the clock (a test's script: add watches, change answers). */
  onWait: (clock: number) => void = () => undefined;

  set(list: HostWatch[]): void {
    this.list = list;
    this.version++;
  }
  watches(version: number) {
    return Promise.resolve(version === this.version ? { version } : { version: this.version, watches: this.list });
  }
  read(w: HostWatch) {
    const running: VmReading = { state: 'Running', ip: '10.0.0.5', source: 'lease' };
    return Promise.resolve(this.reads.get(w.input.proxy.name) ?? running);
  }
  probe(w: HostWatch) {
    const n = w.input.proxy.name;
    this.polls.set(n, (this.polls.get(n) ?? 0) + 1);
    return Promise.resolve(this.probes.get(n) ?? OK);
  }
  tell(w: HostWatch, v: HostVerdict): Promise<'told' | 'gone'> {
    if (this.goneNames.has(w.input.proxy.name)) return Promise.resolve('gone');
    if (this.failTells > 0) {
      this.failTells--;
      return Promise.reject(new Error('server unavailable'));
    }
    this.told.push({ name: w.input.proxy.name, v });
    return Promise.resolve('told');
  }
  now() {
    return this.clock;
  }
  wait(ms: number) {
    this.clock += ms;
    this.onWait(this.clock);
    return Promise.resolve();
  }
  heartbeat(d: HostMonitorDetails) {
    this.beats.push(structuredClone(d));
  }
  resumed() {
    return this.resumedDetails;
  }
  busy<T>(fn: () => Promise<T>) {
    return fn();
  }
}

function run(world: World, untilMs: number): Promise<HostMonitorActivityResult> {
  return new MockActivityEnvironment(undefined, { logger: silent }).run(
    () => runHostMonitor({ entry: 'e1', host: 'h1', checkpointAtMs: untilMs, heartbeatEveryMs: INTERVAL }, world),
    undefined,
  );
}

describe('the host monitor loop', () => {
  it('polls the host proxies in rounds: one heartbeat per round, not one per proxy', async () => {
    const w = new World();
    // 20 proxies joining over the first minute, 5 at a time.
    const all = Array.from({ length: 20 }, (_, i) => watch(`p${i}`));
    w.set(all.slice(0, 5));
    w.onWait = (clock) => {
      const k = Math.min(20, 5 * (1 + Math.floor((clock - T0) / 13_000)));
      if (k > w.list.length) w.set(all.slice(0, k));
    };
    const hours = 0.25;
    const res = await run(w, T0 + hours * 3_600_000);
    assert.equal(res.reason, 'Checkpoint');
    const polls = [...w.polls.values()].reduce((a, b) => a + b, 0);
    const rounds = (hours * 3_600_000) / INTERVAL;
    assert.ok(polls >= 20 * (rounds - 6), `${polls} polls in ${rounds} intervals for 20 proxies`);
    // Joining proxies add a few extra rounds at first; after that one heartbeat per interval.
    const late = w.beats.length;
    assert.ok(late <= rounds + 12, `${late} heartbeats for ${rounds} intervals (one per round expected, not ${polls})`);
    // Every proxy told twice: its address (seq 1), then Healthy (healthyAfter 2, seq 2).
    assert.equal(w.told.length, 40);
    for (const t of w.told) {
      assert.equal(t.v.reason, 'Transition');
      assert.equal(t.v.state.status.conditions.Healthy.status, t.v.seq === 1 ? 'Unknown' : 'True');
    }
    assert.equal(res.states['proxy/e1/p7']!.state.status.conditions.Healthy.status, 'True');
  });

  it('nextDueMs snaps an interval wait to the host grid and leaves a booting second alone', () => {
    assert.equal(nextDueMs(T0 + 3_000, 1_000, INTERVAL, T0), T0 + 4_000);
    assert.equal(nextDueMs(T0 + 3_000, INTERVAL, INTERVAL, T0), T0 + 15_000);
    assert.equal(nextDueMs(T0 + 8_000, INTERVAL, INTERVAL, T0), T0 + 30_000);
    assert.equal(nextDueMs(T0 + 15_100, INTERVAL, INTERVAL, T0), T0 + 30_000);
  });

  it('tells each transition once, in order, and again after a failed signal', async () => {
    const w = new World();
    const a = watch('a');
    w.set([a]);
    let armed = false;
    w.onWait = (clock) => {
      const t = clock - T0;
      if (t > 60_000 && t < 120_000) w.probes.set('a', REFUSED);
      else w.probes.delete('a');
      // The first signal after the probes begin to fail (the Unhealthy one) is not taken.
      if (t > 60_000 && !armed) {
        armed = true;
        w.failTells = 1;
      }
    };
    await run(w, T0 + 240_000);
    assert.equal(w.failTells, 0, 'a signal failed');
    const seen = w.told.map((t) => `${t.v.seq}:${t.v.state.status.conditions.Healthy.status}`);
    // The address (Healthy still Unknown), Healthy, Unhealthy after 3 failures (told at the poll
    // after the failed signal), Healthy again.
    assert.deepEqual(seen, ['1:Unknown', '2:True', '3:False', '4:True']);
  });

  it('a VM gone is told once and its watch ends; a closed workflow is reported gone', async () => {
    const w = new World();
    w.set([watch('a'), watch('b')]);
    w.goneNames.add('b');
    w.onWait = (clock) => {
      if (clock - T0 > 40_000) w.reads.set('a', { state: 'Missing' });
    };
    const res = await run(w, T0 + 120_000);
    const a = w.told.filter((t) => t.name === 'a').map((t) => t.v.reason);
    assert.deepEqual(a, ['Transition', 'Transition', 'VmLost']); // the address, Healthy, the VM gone
    const pollsAtLoss = w.polls.get('a');
    assert.equal(res.states['proxy/e1/a']!.done, true);
    assert.deepEqual(res.gone, ['proxy/e1/b']);
    assert.equal(res.states['proxy/e1/b']!.done, true);
    assert.equal(w.polls.get('a'), pollsAtLoss, 'not polled after its VM was gone');
  });

  it('a retry resumes every watch from the last heartbeat: the counters go on', async () => {
    const first = new World();
    first.set([watch('a')]);
    await run(first, T0 + 90_000);
    const last = first.beats.at(-1)!;
    const okBefore = last.watches['proxy/e1/a']!.state.status.health.totalOk;
    assert.ok(okBefore >= 5);
    const second = new World();
    second.clock = T0 + 100_000;
    second.set([watch('a')]);
    second.resumedDetails = last;
    await run(second, T0 + 160_000);
    const st = second.beats.at(-1)!.watches['proxy/e1/a']!;
    assert.ok(st.state.status.health.totalOk >= okBefore + 3, `${okBefore} → ${st.state.status.health.totalOk}`);
    assert.equal(second.told.length, 0, 'Healthy was told before the retry: not again');
  });

  it('a booting watch that waits first polls at the boot cadence, not after a whole interval', async () => {
    const w = new World();
    const base = watch('b');
    const at = new Date(T0).toISOString();
    const booting = { ...base.input.state, status: markBooting(markVmRunning(base.input.state.status, at), at) };
    w.set([{ ...base, input: { ...base.input, state: booting, waitFirst: true } }]);
    const res = await run(w, T0 + 3 * BOOT_POLL_MS);
    assert.equal(res.reason, 'Checkpoint');
    assert.ok((w.polls.get('b') ?? 0) >= 1, `polled ${w.polls.get('b') ?? 0} times in ${3 * BOOT_POLL_MS} ms`);
  });

  it('a new token replaces the watch; with nothing to watch the loop returns Idle', async () => {
    const w = new World();
    w.set([watch('a')]);
    w.onWait = (clock) => {
      const t = clock - T0;
      if (t > 30_000 && t < 60_000 && w.list[0]?.token === 'run/a/1') w.set([watch('a', 'run/a/2')]);
      if (t >= 60_000 && w.list.length > 0) w.set([]);
    };
    const res = await run(w, T0 + 3_600_000);
    assert.equal(res.reason, 'Idle');
    assert.ok(w.clock - T0 >= 60_000 + IDLE_RETURN_MS && w.clock - T0 < 60_000 + IDLE_RETURN_MS + 10_000);
    assert.deepEqual(
      w.told.map((t) => t.v.token),
      ['run/a/1', 'run/a/1', 'run/a/2', 'run/a/2'],
      'each watch told its own address and Healthy (the second starts from the state it was given)',
    );
    assert.deepEqual(res.states, {});
  });
});
