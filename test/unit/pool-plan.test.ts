/**
 * The pool's reconciler (workflows/pool/plan.ts), policy by policy, with members played by the
 * simulator of test/support/pool-sim.ts (reports through applyReport, time from event to event).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PoolSpec } from '../../contracts/pool.ts';
import { POOL_DEFAULTS, poolSpecProblems, resolvePoolSpec } from '../../contracts/pool.ts';
import { applyDrainNotice, applySpec, isReady, reconcile } from '../../workflows/pool/plan.ts';
import { rollbackTarget } from '../../workflows/pool/status.ts';
import { PoolSim, T0, seeded } from '../support/pool-sim.ts';

const MIN = 60_000;

function poolSpec(over: Partial<PoolSpec> = {}): PoolSpec {
  return { entry: 'e1', name: 'p', size: 3, template: { imageKey: 'a' }, ...over };
}

/** A pool brought to Ready by the simulator. */
function readyPool(over: Partial<PoolSpec> = {}, seed = 1): PoolSim {
  const sim = new PoolSim(poolSpec(over), seed);
  sim.pass();
  sim.runUntil((s) => s.ready(), 'the pool Ready');
  return sim;
}

/** Changes the spec as the updateSpec update does. */
function update(sim: PoolSim, over: Partial<PoolSpec>): void {
  const s = sim.state.spec;
  applySpec(sim.state, resolvePoolSpec({ ...poolSpec(), ...s, ...over }), new Date(sim.now).toISOString());
}

function memberNames(sim: PoolSim): string[] {
  return sim.state.members.map((m) => m.name);
}

/** Checks at every step: discovery (the pool's view and the members' own) never below `floor`, and no more than `most` members not leaving. */
function guard(sim: PoolSim, floor: number, most: number): { minDiscovery: number; maxLive: number } {
  const seen = { minDiscovery: Infinity, maxLive: 0 };
  sim.checks.push((s) => {
    const listed = s.discovery();
    seen.minDiscovery = Math.min(seen.minDiscovery, listed.length, s.serving().length);
    const live = s.state.members.filter((m) => m.role !== 'leaving').length;
    seen.maxLive = Math.max(seen.maxLive, live);
    assert.ok(
      listed.length >= floor,
      `at ${new Date(s.now).toISOString()}: ${listed.length} in discovery, under ${floor}`,
    );
    assert.ok(s.serving().length >= floor, `at ${new Date(s.now).toISOString()}: ${s.serving().length} members serve`);
    for (const name of listed) assert.ok(!s.members.get(name)!.deleted, `${name} is listed after its deletion`);
    assert.ok(live <= most, `${live} members not leaving, over ${most}`);
  });
  return seen;
}

describe('scale up', () => {
  it('0 → N creates N members, out of discovery until each is ready and told to serve', () => {
    const sim = new PoolSim(poolSpec({ size: 0 }));
    assert.deepEqual(sim.pass().actions, []);
    assert.equal(sim.status().phase, 'Ready');
    update(sim, { size: 3 });
    const plan = sim.pass();
    assert.deepEqual(
      plan.actions.map((a) => a.kind),
      ['create', 'create', 'create'],
    );
    assert.ok(sim.state.members.every((m) => m.role === 'spare' && !m.sentServing));
    assert.deepEqual(sim.discovery(), []);
    sim.runUntil((s) => s.ready(), 'Ready');
    assert.equal(sim.discovery().length, 3);
    assert.equal(sim.state.stableRevision, 1);
    assert.ok(sim.actions('create').length === 3, 'no member created twice');
    // Each was told to serve only once it was ready (booted, Healthy for minHealthyMs).
    for (const l of sim.actions('serve')) {
      assert.ok(l.at >= T0 + sim.bootMs + POOL_DEFAULTS.minHealthyMs, `${l.action.kind} at ${l.at - T0} ms`);
    }
  });

  it('spares are booted and Healthy but never in discovery', () => {
    const sim = new PoolSim(poolSpec({ size: 2, spares: 1 }));
    sim.checks.push((s) => {
      assert.ok(s.discovery().length <= 2, 'at most size members in discovery');
      assert.ok(s.serving().length <= 2, 'at most size members serve');
    });
    sim.pass();
    assert.equal(sim.actions('create').length, 3);
    sim.runUntil((s) => s.ready(), 'Ready');
    sim.advance(30 * MIN);
    const spares = sim.state.members.filter((m) => m.role === 'spare');
    assert.equal(spares.length, 1);
    assert.ok(isReady(spares[0]!, sim.state.spec, sim.now), 'the spare is ready');
    assert.deepEqual(sim.members.get(spares[0]!.name)!.servedAtMs, [], 'the spare never served');
    assert.equal(sim.status().spares, 1);
  });
});

describe('replacement', () => {
  it('a Failed member is replaced at once; it counts against the loop guard only if it never became available', () => {
    const sim = readyPool();
    const victim = sim.discovery()[0]!;
    const plan = sim.play(victim, { state: 'Failed', lastError: 'KVM2_DOMAIN_GONE: destroyed' });
    assert.equal(plan.actions.filter((a) => a.kind === 'create').length, 1, 'the replacement is created in that pass');
    assert.ok(!memberNames(sim).includes(victim));
    assert.equal(sim.state.replacements, 1);
    assert.deepEqual(sim.state.failures, [], 'it had been available: not a failure of the guard');
    // A replacement that fails before it is ever available counts.
    const fresh = sim.state.members.find((m) => !m.everReady)!;
    sim.step(); // it boots
    sim.play(fresh.name, { state: 'Failed', lastError: 'KVM2_BOOT_TIMEOUT: no address' });
    assert.equal(sim.state.failures.length, 1);
    assert.match(JSON.stringify(sim.state.failures), /KVM2_BOOT_TIMEOUT/);
    assert.equal(sim.state.replacements, 2);
    sim.runUntil((s) => s.ready(), 'Ready again');
  });

  it('an Unhealthy member is replaced after unhealthyGraceMs, and deleted only once its replacement is ready', () => {
    const sim = readyPool({ size: 2 });
    guard(sim, 1, 3); // the Unhealthy member is out of discovery already; never more than size + maxSurge
    const sick = sim.discovery()[0]!;
    const since = sim.now;
    sim.play(sick, { health: 'False', lastError: 'PROBE_FAILED: connect refused' });
    assert.equal(sim.actions('create', since).length, 0, 'nothing within the grace');
    sim.advance(POOL_DEFAULTS.unhealthyGraceMs - 1);
    assert.equal(sim.actions('create', since).length, 0, 'nothing within the grace');
    sim.advance(1);
    const created = sim.actions('create', since);
    assert.equal(created.length, 1, 'one replacement at the end of the grace');
    assert.equal(created[0]!.at, since + POOL_DEFAULTS.unhealthyGraceMs);
    assert.match(sim.state.members.find((m) => m.name === sick)!.condemned ?? '', /^Unhealthy since .*PROBE_FAILED/);
    sim.runUntil((s) => s.members.get(sick)!.deleted, 'the sick member deleted');
    const replacement = created[0]!.action.name;
    const deleted = sim.actions('delete', since).find((l) => l.action.name === sick)!;
    const readyAt = sim.members.get(replacement)!.healthSinceMs + POOL_DEFAULTS.minHealthyMs;
    assert.ok(
      deleted.at >= readyAt,
      `deleted at +${deleted.at - since} ms, its replacement ready at +${readyAt - since} ms`,
    );
    sim.runUntil((s) => s.ready(), 'Ready');
    assert.equal(sim.state.replacements, 1);
    assert.equal(sim.discovery().length, 2);
  });

  it('a member never Healthy yet (booting, its Squid not up) is not replaced before startupGraceMs from its creation', () => {
    const sim = new PoolSim(poolSpec({ size: 1 }));
    sim.fate = () => 'unhealthy';
    sim.pass();
    const first = sim.state.members[0]!;
    const created = first.createdAtMs;
    sim.advance(POOL_DEFAULTS.startupGraceMs - 1);
    assert.equal(sim.actions('create').length, 1, 'no replacement while it may still be starting');
    assert.equal(first.condemned, undefined);
    sim.advance(1);
    const next = sim.actions('create').filter((l) => l.at > created);
    assert.equal(next.length, 1, 'replaced once the startup grace ran out');
    assert.equal(next[0]!.at, created + POOL_DEFAULTS.startupGraceMs);
  });

  it('a member that recovered (Healthy, not yet for minHealthyMs) outlives a newcomer still booting on scale-down', () => {
    // Over several seeds: the choice between the two must not be the random policy's.
    for (let seed = 1; seed <= 8; seed++) {
      const sim = readyPool({ size: 2, rollout: { minHealthyMs: 60_000 } }, seed);
      const [a] = sim.discovery();
      sim.play(a!, { health: 'False' });
      sim.advance(POOL_DEFAULTS.unhealthyGraceMs);
      const newcomer = sim.actions('create').at(-1)!.action.name;
      assert.equal(sim.state.members.length, 3, 'a replacement is on its way');
      // The sick member recovers before its replacement is up: one of the two must go.
      sim.play(a!, { health: 'True' });
      const leaving = sim.state.members.filter((m) => m.role === 'leaving').map((m) => m.name);
      assert.deepEqual(
        leaving,
        [newcomer],
        `seed ${seed}: the newcomer still booting leaves, not the member that recovered`,
      );
    }
  });

  it('a member that reports the other role after it was told (it lost it) is told again', () => {
    const sim = readyPool({ size: 2 });
    const [m] = sim.discovery();
    sim.advance(1_000);
    const since = sim.now;
    sim.play(m!, { serving: false });
    const again = sim.actions('serve', since).filter((l) => l.action.kind === 'serve' && l.action.name === m);
    assert.deepEqual(
      again.map((l) => (l.action.kind === 'serve' ? l.action.serving : undefined)),
      [true],
      'told to serve once more',
    );
    sim.runUntil((s) => s.discovery().includes(m!), 'back in discovery');
  });

  it('a Running member whose health stays Unknown does not make the reconciler wake in a loop', () => {
    const sim = readyPool({ size: 1 });
    const m = sim.discovery()[0]!;
    sim.play(m, { health: 'Unknown' });
    sim.advance(2 * POOL_DEFAULTS.unhealthyGraceMs); // pass() throws on a wake not after now
    assert.ok(sim.steps < 50, `${sim.steps} steps`);
  });
});

describe('the loop guard', () => {
  it('K members that never become available stop creation (Degraded, with reasons), back off doubling, then create again', () => {
    const sim = new PoolSim(poolSpec({ size: 1 }));
    sim.fate = () => 'fail';
    const { maxFailures, backoffMs } = POOL_DEFAULTS;
    sim.pass();
    sim.runUntil((s) => s.status().phase === 'Degraded', 'Degraded');
    const at1 = sim.now;
    assert.equal(sim.actions('create').length, maxFailures);
    const st = sim.status();
    const degraded = st.degraded;
    assert.ok(degraded, 'status.degraded is set');
    assert.equal(degraded.failures.length, maxFailures);
    assert.ok(degraded.failures.every((f) => /KVM2_BOOT_TIMEOUT/.test(f.reason)));
    assert.equal(degraded.until, new Date(at1 + backoffMs).toISOString());
    assert.match(st.reason ?? '', /never became healthy/);
    sim.advance(backoffMs - 1);
    assert.equal(sim.actions('create', at1).length, 0, 'nothing created during the backoff');
    sim.advance(1);
    assert.equal(sim.actions('create', at1).length, 1, 'creation again after it');
    sim.runUntil((s) => s.status().phase === 'Degraded', 'Degraded again');
    const at2 = sim.now;
    assert.equal(sim.status().degraded!.until, new Date(at2 + 2 * backoffMs).toISOString(), 'the backoff doubled');
    sim.fate = () => 'healthy';
    sim.advance(2 * backoffMs - 1);
    assert.equal(sim.actions('create', at2).length, 0);
    sim.runUntil((s) => s.ready(), 'Ready once members come up');
    assert.equal(sim.state.backoffs, 0, 'a member that came up resets the backoff');
    // Never a create/delete loop: creates bounded by the failures allowed.
    assert.equal(sim.actions('create').length, 2 * maxFailures + 1);
  });

  it('the backoff doubles even while other members of the pool are healthy (one bad host)', () => {
    const sim = readyPool({ size: 2 });
    sim.fate = () => 'fail';
    sim.play(sim.discovery()[0]!, { state: 'Failed' });
    sim.runUntil((s) => s.status().phase === 'Degraded', 'Degraded');
    const at1 = sim.now;
    sim.runUntil((s) => (s.state.degradedSinceMs ?? 0) > at1, 'Degraded again', 2 * 3_600_000);
    const st = sim.status();
    assert.equal(Date.parse(st.degraded!.until) - Date.parse(st.degraded!.since), 2 * POOL_DEFAULTS.backoffMs);
    assert.equal(sim.discovery().length, 1, 'the healthy member stays in discovery meanwhile');
  });
});

describe('the loop guard with members that boot but never turn Healthy', () => {
  it('replaces each after its grace and stops at K (no create/destroy loop)', () => {
    const sim = new PoolSim(poolSpec({ size: 1 }));
    sim.fate = () => 'unhealthy';
    sim.pass();
    sim.runUntil((s) => s.status().phase === 'Degraded', 'Degraded');
    assert.equal(sim.state.failures.length, POOL_DEFAULTS.maxFailures);
    const at = sim.now;
    sim.advance(POOL_DEFAULTS.backoffMs - 1);
    assert.equal(sim.actions('create', at + 1).length, 0, 'nothing created during the backoff');
    assert.ok(sim.actions('create').length <= POOL_DEFAULTS.maxFailures + 1);
  });
});

describe('rollback targets', () => {
  it('a requested revision, else the stable one, else the one before; refusals say why', () => {
    const sim = readyPool({ size: 1 });
    update(sim, { template: { imageKey: 'b' } });
    assert.equal(rollbackTarget(sim.state, undefined), 1, 'the stable revision');
    assert.match(String(rollbackTarget(sim.state, 2)), /is the current one/);
    assert.match(String(rollbackTarget(sim.state, 7)), /not known to this pool \(known: 1, 2\)/);
    assert.match(String(rollbackTarget(sim.state, 1.5)), /whole number/);
    sim.pass();
    sim.runUntil((s) => s.ready() && s.state.stableRevision === 2, 'rolled to 2');
    update(sim, { template: { imageKey: 'c' } });
    assert.equal(rollbackTarget(sim.state, undefined), 2);
    assert.equal(rollbackTarget(sim.state, 1), 1);
  });

  it('the stable revision is kept however many revisions follow', () => {
    const sim = readyPool({ size: 1 });
    sim.state.paused = true; // nothing rolls: revision 1 stays the stable one
    for (let i = 0; i < 12; i++) update(sim, { template: { imageKey: `t${i}` } });
    assert.equal(sim.state.revisions.length, 11, 'the last 10 and the stable one');
    assert.ok(sim.state.revisions.some((r) => r.revision === 1));
    assert.equal(rollbackTarget(sim.state, undefined), 1);
  });
});

describe('rolling update', () => {
  it('the same template with its keys in another order, nested too, is no new revision', () => {
    const sim = readyPool({
      size: 2,
      template: { imageKey: 'a', vm: { vcpus: 2, memoryMiB: 1024 }, squid: { port: 3128, mode: 'report' } },
    });
    const old = memberNames(sim);
    update(sim, {
      template: { squid: { mode: 'report', port: 3128 }, vm: { memoryMiB: 1024, vcpus: 2 }, imageKey: 'a' },
    });
    assert.equal(sim.state.revision, 1, 'no new revision');
    assert.deepEqual(
      sim.state.revisions.map((r) => r.revision),
      [1],
    );
    assert.deepEqual(sim.pass().actions, [], 'nothing replaced');
    assert.deepEqual(memberNames(sim), old);
  });

  it('maxSurge 1, maxUnavailable 0: never fewer than N in discovery, never more than N + 1 members', () => {
    const sim = readyPool({ size: 3 });
    const seen = guard(sim, 3, 4);
    const old = memberNames(sim);
    update(sim, { template: { imageKey: 'b' } });
    assert.equal(sim.state.revision, 2);
    sim.pass();
    sim.runUntil((s) => s.ready() && s.state.members.every((m) => m.revision === 2), 'rolled out');
    assert.equal(seen.minDiscovery, 3);
    assert.equal(seen.maxLive, 4, 'the surge was used');
    assert.ok(
      old.every((n) => sim.members.get(n)!.deleted),
      'every old member deleted',
    );
    assert.equal(sim.state.stableRevision, 2);
    assert.equal(sim.status().updated, 3);
    assert.equal(sim.actions('create').length, 6);
  });

  it('maxSurge 0, maxUnavailable 1: never fewer than N - 1 in discovery, never more than N members', () => {
    const sim = readyPool({ size: 3, rollout: { maxSurge: 0, maxUnavailable: 1 } });
    const seen = guard(sim, 2, 3);
    update(sim, { template: { imageKey: 'b' } });
    sim.pass();
    sim.runUntil((s) => s.ready() && s.state.members.every((m) => m.revision === 2), 'rolled out');
    assert.equal(seen.minDiscovery, 2);
    assert.equal(seen.maxLive, 3);
  });

  it('with spares, the spares are rolled too and discovery never drops below N', () => {
    const sim = readyPool({ size: 2, spares: 1 });
    guard(sim, 2, 4);
    update(sim, { template: { imageKey: 'b' } });
    sim.pass();
    sim.runUntil((s) => s.ready() && s.state.members.every((m) => m.revision === 2), 'rolled out');
    assert.equal(sim.state.members.filter((m) => m.role === 'spare').length, 1);
  });
});

describe('progress deadline', () => {
  it('a rollout without progress rolls back to the stable revision', () => {
    const sim = readyPool({ size: 2 });
    guard(sim, 2, 3);
    sim.fate = (m) => (m.imageKey === 'bad' ? 'hang' : 'healthy');
    const at = sim.now;
    update(sim, { template: { imageKey: 'bad' } });
    sim.pass();
    sim.runUntil((s) => s.state.rollbacks === 1, 'rolled back');
    assert.equal(sim.now, at + POOL_DEFAULTS.progressDeadlineMs);
    assert.equal(sim.state.revision, 1);
    assert.match(sim.state.reason ?? '', /rolled back to revision 1/);
    sim.runUntil((s) => s.ready(), 'Ready on revision 1');
    assert.ok(sim.state.members.every((m) => m.revision === 1));
    assert.ok(
      [...sim.members.values()].filter((m) => m.imageKey === 'bad').every((m) => m.deleted),
      'the stuck member of the bad revision deleted',
    );
  });

  it('a template whose members fail at once (the loop guard in force) is still rolled back at the deadline', () => {
    const sim = readyPool({ size: 2 });
    guard(sim, 2, 3);
    sim.fate = (m) => (m.imageKey === 'bad' ? 'fail' : 'healthy');
    const at = sim.now;
    update(sim, { template: { imageKey: 'bad' } });
    sim.pass();
    sim.runUntil((s) => s.state.rollbacks === 1, 'rolled back', 2 * POOL_DEFAULTS.progressDeadlineMs);
    assert.ok(sim.now <= at + POOL_DEFAULTS.progressDeadlineMs, `rolled back after ${sim.now - at} ms`);
    assert.notEqual(sim.status().phase, 'Degraded', 'the rollback ends the backoff: the stable template may create');
    sim.runUntil((s) => s.ready(), 'Ready on revision 1');
  });

  it('no rollback without a stable revision: the pool says it makes no progress', () => {
    const sim = new PoolSim(poolSpec({ size: 1 }));
    sim.fate = () => 'hang';
    sim.pass();
    sim.advance(POOL_DEFAULTS.progressDeadlineMs + 1);
    assert.equal(sim.state.rollbacks, 0);
    assert.equal(sim.state.revision, 1);
    assert.match(sim.state.reason ?? '', /no progress/);
    assert.equal(rollbackTarget(sim.state, undefined), 'the pool has only one revision: nothing to roll back to');
  });
});

describe('pause', () => {
  it('stops the rollout (and its deadline) but not the replacement of a failed member', () => {
    const sim = readyPool({ size: 2 });
    guard(sim, 1, 3);
    sim.state.paused = true;
    update(sim, { template: { imageKey: 'b' } });
    const at = sim.now;
    sim.pass();
    assert.equal(sim.status().phase, 'Paused');
    sim.advance(2 * POOL_DEFAULTS.progressDeadlineMs);
    assert.equal(sim.actions('create', at).length, 0, 'no rollout while paused');
    assert.equal(sim.state.rollbacks, 0, 'no rollback while paused');
    sim.play(sim.discovery()[0]!, { state: 'Failed' });
    assert.equal(sim.actions('create', at).length, 1, 'a failed member is replaced while paused');
    sim.runUntil((s) => s.discovery().length === 2, 'whole again');
    assert.equal(sim.state.members.filter((m) => m.revision === 1).length, 1, 'the other old member stays');
    sim.state.paused = false;
    sim.pass();
    sim.runUntil((s) => s.ready() && s.state.members.every((m) => m.revision === 2), 'rolled out after resume');
  });
});

describe('rotation', () => {
  it('replaces members past maxAgeMs (shortened by jitter) one at a time, oldest first', () => {
    const maxAgeMs = 3_600_000;
    const sim = new PoolSim(poolSpec({ size: 1, rotation: { maxAgeMs, jitter: 0.1 } }));
    sim.pass();
    sim.runUntil((s) => s.ready(), 'Ready');
    for (const size of [2, 3]) {
      sim.advance(10 * MIN); // created 10 min apart: more than the jitter (6 min) can reorder
      update(sim, { size });
      sim.pass();
      sim.runUntil((s) => s.ready(), `Ready at ${size}`);
    }
    const first = [...sim.state.members].sort((a, b) => a.createdAtMs - b.createdAtMs).map((m) => m.name);
    for (const m of sim.state.members) {
      const age = m.expiresAtMs! - m.createdAtMs;
      assert.ok(age <= maxAgeMs && age >= maxAgeMs * 0.9, `age limit ${age}`);
    }
    guard(sim, 3, 4);
    sim.checks.push((s) => {
      const rotating = s.state.members.filter((m) => m.role !== 'leaving' && /rotation/.test(m.condemned ?? ''));
      assert.ok(rotating.length <= 1, `${rotating.length} members rotating at once`);
    });
    sim.advance(2 * maxAgeMs);
    const deletions = sim.actions('delete').map((l) => l.action.name);
    assert.deepEqual(
      deletions.filter((n) => first.includes(n)),
      first,
      'the first members were rotated oldest first',
    );
  });
});

describe('scale down', () => {
  /** A Ready pool of 4 whose members were created 1 min apart (oldest first in the result). */
  function four(over: Partial<PoolSpec>, seed = 1): { sim: PoolSim; byAge: string[] } {
    const sim = new PoolSim(poolSpec({ size: 1, ...over }), seed);
    sim.pass();
    sim.runUntil((s) => s.ready(), 'Ready');
    for (const size of [2, 3, 4]) {
      sim.advance(MIN);
      update(sim, { size });
      sim.pass();
      sim.runUntil((s) => s.ready(), `Ready at ${size}`);
    }
    const byAge = [...sim.state.members].sort((a, b) => a.createdAtMs - b.createdAtMs).map((m) => m.name);
    return { sim, byAge };
  }
  const leaving = (sim: PoolSim): string[] =>
    sim.state.members
      .filter((m) => m.role === 'leaving')
      .map((m) => m.name)
      .sort();

  it('oldest: the oldest members leave', () => {
    const { sim, byAge } = four({ scaleDownPolicy: 'oldest' });
    update(sim, { size: 2 });
    sim.pass();
    assert.deepEqual(leaving(sim), byAge.slice(0, 2).sort());
  });

  it('newest: the newest members leave', () => {
    const { sim, byAge } = four({ scaleDownPolicy: 'newest' });
    update(sim, { size: 2 });
    sim.pass();
    assert.deepEqual(leaving(sim), byAge.slice(2).sort());
  });

  it('random (the default): not always the same ages kept', () => {
    const kept = new Set<string>();
    for (let seed = 1; seed <= 12; seed++) {
      const { sim, byAge } = four({}, seed);
      update(sim, { size: 1 });
      sim.pass();
      const stays = sim.state.members.find((m) => m.role !== 'leaving')!.name;
      kept.add(String(byAge.indexOf(stays)));
    }
    assert.ok(kept.size >= 3, `the member kept was of age rank ${[...kept].join(', ')} over 12 seeds`);
  });

  it('an Unhealthy member leaves first, then spares, then by the policy', () => {
    const { sim, byAge } = four({ scaleDownPolicy: 'oldest' });
    sim.play(byAge[3]!, { health: 'False' }); // the newest, within its grace
    update(sim, { size: 3 });
    sim.pass();
    assert.deepEqual(leaving(sim), [byAge[3]!]);
    sim.runUntil((s) => s.ready(), 'Ready at 3');
    update(sim, { size: 2, spares: 1 }); // one of the three serving members becomes the spare
    sim.pass();
    sim.runUntil((s) => s.ready(), 'Ready at 2 + 1');
    assert.equal(sim.serving().length, 2, 'Ready: the spare has stopped serving');
    sim.advance(POOL_DEFAULTS.drainDelayMs); // it has drained as a spare
    const spare = sim.state.members.find((m) => m.role === 'spare')!.name;
    update(sim, { size: 2, spares: 0 });
    sim.pass();
    assert.deepEqual(leaving(sim), [spare], 'the spare leaves, not the oldest');
    assert.ok(
      sim.actions('delete', sim.now).some((l) => l.action.name === spare),
      'a drained spare is deleted at once',
    );
  });

  it('a leaving member is told serving=false first, deleted only after it acknowledged and drainDelayMs passed', () => {
    const sim = readyPool({ size: 3 });
    sim.signalMs = 5_000;
    const at = sim.now;
    update(sim, { size: 2 });
    const plan = sim.pass();
    const gone = leaving(sim)[0]!;
    assert.deepEqual(plan.actions, [{ kind: 'serve', name: gone, serving: false }]);
    assert.ok(!sim.discovery().includes(gone), 'out of the pool’s discovery at once');
    sim.runUntil((s) => s.members.get(gone)!.deleted, 'deleted');
    const ack = sim.members.get(gone)!.servedAtMs.at(-1)!;
    assert.equal(ack, at + 5_000);
    const del = sim.actions('delete', at).find((l) => l.action.name === gone)!;
    assert.equal(del.at, ack + POOL_DEFAULTS.drainDelayMs);
  });
});

describe('spares', () => {
  it('a failure promotes a spare (in discovery a signal later, not a boot later) and boots a new spare', () => {
    const sim = readyPool({ size: 2, spares: 1 });
    const spare = sim.state.members.find((m) => m.role === 'spare')!.name;
    const victim = sim.discovery()[0]!;
    const at = sim.now;
    const plan = sim.play(victim, { state: 'Failed' });
    assert.deepEqual(
      plan.actions.map((a) => a.kind),
      ['create', 'serve'],
    );
    assert.deepEqual(plan.actions[1], { kind: 'serve', name: spare, serving: true });
    sim.advance(sim.signalMs);
    assert.ok(sim.discovery().includes(spare), 'the spare in discovery a signal after the failure');
    assert.equal(sim.discovery().length, 2);
    assert.ok(sim.now - at < sim.bootMs);
    sim.runUntil((s) => s.ready(), 'a new spare booted');
    assert.equal(sim.state.members.filter((m) => m.role === 'spare').length, 1);
  });
});

describe('placement and deletion', () => {
  it('members on an avoided host are replaced elsewhere without a gap', () => {
    const sim = readyPool({ size: 2 });
    sim.hostOf = () => 'h2';
    guard(sim, 2, 3);
    const onH1 = [...sim.members.values()].filter((m) => m.host === 'h1').map((m) => m.name);
    assert.ok(onH1.length > 0);
    update(sim, { placement: { avoidHosts: ['h1'] } });
    sim.pass();
    sim.runUntil((s) => s.ready() && s.alive().every((m) => m.host === 'h2'), 'off h1');
    assert.ok(onH1.every((n) => sim.members.get(n)!.deleted));
  });

  it('deleting the pool removes every member: spares at once, serving ones after the drain', () => {
    const sim = readyPool({ size: 2, spares: 1 });
    const spare = sim.state.members.find((m) => m.role === 'spare')!.name;
    sim.state.deleting = true;
    const at = sim.now;
    const plan = sim.pass();
    assert.ok(plan.actions.some((a) => a.kind === 'delete' && a.name === spare));
    assert.equal(plan.actions.filter((a) => a.kind === 'serve' && !a.serving).length, 2);
    assert.equal(sim.status().phase, 'Deleting');
    sim.runUntil((s) => s.state.members.length === 0, 'no members');
    assert.ok([...sim.members.values()].every((m) => m.deleted));
    assert.equal(sim.actions('create', at).length, 0);
    assert.equal(sim.now, at + sim.signalMs + POOL_DEFAULTS.drainDelayMs + sim.deleteMs);
  });

  it('a pass with nothing to do asks for nothing', () => {
    const sim = readyPool({ size: 2 });
    sim.advance(MIN);
    const plan = reconcile(sim.state, sim.now, () => 0.5);
    assert.deepEqual(plan.actions, []);
  });
});

describe('under a random mix of events', () => {
  it('stays within its surge, deletes only leaving members, and comes back to Ready (bad templates rolled back)', () => {
    let rollbacks = 0;
    for (let seed = 1; seed <= 25; seed++) {
      const sim = readyPool({ size: 3, spares: 1 }, seed);
      const rnd = seeded(1000 + seed);
      sim.fate = (m) => (m.imageKey.startsWith('bad') ? 'fail' : 'healthy');
      sim.checks.push((s) => {
        const { size, spares, rollout } = s.state.spec;
        const live = s.state.members.filter((m) => m.role !== 'leaving').length;
        assert.ok(live <= size + spares + rollout.maxSurge, `seed ${seed}: ${live} members not leaving`);
        for (const l of s.lastPlan.actions) {
          if (l.kind !== 'delete') continue;
          const m = s.state.members.find((x) => x.name === l.name);
          assert.equal(m?.role, 'leaving', `seed ${seed}: ${l.name} deleted while ${m?.role}`);
        }
      });
      let image = 0;
      for (let i = 0; i < 8; i++) {
        sim.advance(Math.floor(rnd() * 5 * MIN));
        const alive = sim.alive().filter((m) => m.state === 'Running');
        const pick = alive[Math.floor(rnd() * alive.length)];
        const r = rnd();
        if (r < 0.3 && pick) sim.play(pick.name, { state: 'Failed' });
        else if (r < 0.5 && pick) sim.play(pick.name, { health: 'False' });
        else if (r < 0.6) update(sim, { template: { imageKey: `i${++image}` } });
        else if (r < 0.7)
          update(sim, { template: { imageKey: `bad${++image}` } }); // rolled back at its deadline
        else update(sim, { size: 2 + Math.floor(rnd() * 3) });
        sim.pass();
      }
      sim.runUntil((s) => s.ready(), `seed ${seed}: Ready after the events`, 12 * 3_600_000);
      const { size, spares } = sim.state.spec;
      assert.equal(sim.discovery().length, size, `seed ${seed}`);
      assert.equal(sim.alive().length, size + spares, `seed ${seed}: no VM left behind`);
      assert.ok(!sim.state.spec.template.imageKey.startsWith('bad'), `seed ${seed}: a bad template current`);
      rollbacks += sim.state.rollbacks;
    }
    assert.ok(rollbacks > 0, 'some runs rolled a bad template back');
  });
});

/** The members the simulator placed on `host` (alive). */
function onHost(sim: PoolSim, host: string): string[] {
  return sim
    .alive()
    .filter((m) => m.host === host)
    .map((m) => m.name);
}

/** A drain notice as the host workflow sends it, then a pass. */
function drain(sim: PoolSim, host: string, draining: boolean): void {
  assert.equal(
    applyDrainNotice(sim.state, { host, draining }),
    true,
    `the notice (${host}, ${draining}) changed the state`,
  );
  sim.pass();
}

describe('drain (a host workflow’s notice)', () => {
  it('members on a draining host are replaced new-first: never below N in discovery, never over N + maxSurge', () => {
    const sim = readyPool({ size: 3 });
    const seen = guard(sim, 3, 4);
    const leaving = onHost(sim, 'h1');
    assert.ok(leaving.length >= 1);
    const at = sim.now;
    drain(sim, 'h1', true);
    assert.deepEqual(sim.status().drainingHosts, ['h1']);
    assert.match(
      sim.status().members.find((m) => m.name === leaving[0])?.condemned ?? '',
      /h1, which is being drained/,
    );
    sim.runUntil((s) => s.ready() && onHost(s, 'h1').length === 0, 'off h1');
    assert.ok(
      leaving.every((n) => sim.members.get(n)!.deleted),
      'the drained members were deleted',
    );
    const creates = sim.actions('create', at);
    assert.equal(creates.length, leaving.length, 'one new member per drained one');
    for (const c of creates)
      assert.ok(c.action.kind === 'create' && c.action.avoidHosts.includes('h1'), 'new members avoid h1');
    assert.equal(seen.minDiscovery, 3);
    assert.equal(sim.state.replacements, 0, 'a drain is not a replacement of failed members');
    assert.deepEqual(sim.state.failures, []);
    assert.deepEqual(sim.status().drainingHosts, ['h1'], 'still draining until told otherwise');
  });

  it('maxSurge 0, maxUnavailable 1: never below N − 1 in discovery, never more than N members', () => {
    const sim = readyPool({ size: 3, rollout: { maxSurge: 0, maxUnavailable: 1 } });
    guard(sim, 2, 3);
    const leaving = onHost(sim, 'h1');
    drain(sim, 'h1', true);
    sim.runUntil((s) => s.ready() && onHost(s, 'h1').length === 0, 'off h1');
    assert.ok(leaving.every((n) => sim.members.get(n)!.deleted));
  });

  it('draining: false stops it: members not yet replaced stay, the extra newcomer goes', () => {
    const sim = readyPool({ size: 3 });
    guard(sim, 3, 4);
    const before = memberNames(sim).sort();
    const stay = onHost(sim, 'h1');
    drain(sim, 'h1', true);
    assert.equal(sim.lastPlan.actions.filter((a) => a.kind === 'create').length, 1, 'one new member (maxSurge 1)');
    sim.step(); // it boots
    drain(sim, 'h1', false);
    assert.deepEqual(sim.status().drainingHosts, []);
    assert.ok(
      sim.status().members.every((m) => m.condemned === undefined),
      'nothing condemned any more',
    );
    sim.runUntil((s) => s.ready(), 'Ready');
    assert.deepEqual(memberNames(sim).sort(), before, 'the original members stay; the newcomer was removed');
    assert.ok(stay.every((n) => !sim.members.get(n)!.deleted));
    const later = sim.now;
    sim.advance(30 * MIN);
    assert.equal(sim.actions('create', later).length, 0, 'and nothing more happens');
  });

  it('a notice changes the state only when it changes the set; a malformed one is ignored', () => {
    const sim = readyPool({ size: 1 });
    assert.equal(applyDrainNotice(sim.state, { host: 'h2', draining: true }), true);
    assert.equal(applyDrainNotice(sim.state, { host: 'h1', draining: true }), true);
    assert.equal(applyDrainNotice(sim.state, { host: 'h1', draining: true }), false, 'again: no change');
    assert.equal(applyDrainNotice(sim.state, { host: 'h9', draining: false }), false);
    assert.equal(applyDrainNotice(sim.state, { host: 'Not A Host', draining: true }), false);
    assert.equal(applyDrainNotice(sim.state, null as never), false);
    assert.deepEqual(sim.status().drainingHosts, ['h1', 'h2'], 'sorted');
  });

  it('spec avoidHosts and draining hosts together: new members avoid both', () => {
    const sim = readyPool({ size: 2, placement: { avoidHosts: ['h3'] } });
    drain(sim, 'h1', true);
    const create = sim.lastPlan.actions.find((a) => a.kind === 'create');
    assert.ok(create?.kind === 'create');
    assert.deepEqual(create.avoidHosts, ['h1', 'h3']);
    sim.runUntil((s) => s.ready() && onHost(s, 'h1').length === 0, 'off h1');
    assert.ok(sim.alive().every((m) => m.host === 'h2'));
  });
});

describe('probes failing', () => {
  it('a member whose last two probes failed is out of discovery at once, its Healthy still True', () => {
    const sim = new PoolSim(poolSpec({ size: 2 }));
    sim.pass();
    sim.runUntil((s) => s.ready(), 'Ready');
    sim.advance(30 * MIN);
    const m = sim.state.members.find((x) => x.role === 'serving')!;
    assert.ok(isReady(m, sim.state.spec, sim.now));
    m.report = { ...m.report!, probesFailing: true };
    assert.equal(m.report.health, 'True');
    assert.equal(isReady(m, sim.state.spec, sim.now), false, 'not ready whatever its Healthy says');
    assert.ok(!sim.status().members.find((x) => x.name === m.name)!.available, 'not in discovery');
    const { probesFailing: _f, ...back } = m.report;
    m.report = back;
    assert.ok(isReady(m, sim.state.spec, sim.now), 'ready again when a probe passes');
  });
});

describe('host failure', () => {
  it('members whose host stopped answering are replaced elsewhere after hostFailureGraceMs, not before', () => {
    // An Unhealthy grace shorter than the host's: the host rule decides, not the members' health.
    const sim = readyPool({ size: 3, replacement: { unhealthyGraceMs: 10_000 } });
    const dead = onHost(sim, 'h1');
    const alive = onHost(sim, 'h2');
    assert.ok(dead.length >= 1 && alive.length >= 1);
    guard(sim, alive.length, 4);
    const at = sim.now;
    sim.hostDown('h1');
    sim.advance(POOL_DEFAULTS.hostFailureGraceMs - 1);
    assert.equal(sim.actions('create', at).length, 0, 'nothing replaced within the grace');
    assert.ok(sim.status().members.every((m) => m.condemned === undefined));
    assert.ok(
      sim
        .status()
        .members.filter((m) => dead.includes(m.name))
        .every((m) => m.hostUnreachableSince !== undefined),
    );
    sim.advance(1);
    const first = sim.actions('create', at);
    assert.equal(first.length, 1, 'the first replacement at the grace (within maxSurge 1)');
    assert.ok(first[0]!.action.kind === 'create' && first[0]!.action.avoidHosts.includes('h1'));
    assert.match(sim.status().members.find((m) => m.name === dead[0])?.condemned ?? '', /host unreachable: h1/);
    sim.runUntil(
      (s) => s.discovery().length === 3 && s.discovery().every((n) => s.members.get(n)!.host !== 'h1'),
      '3 in discovery off h1',
    );
    assert.equal(sim.state.replacements, dead.length);
    assert.deepEqual(sim.state.failures, [], 'they had been available: not a failure of the guard');
    const stranded = sim.state.members.filter((m) => dead.includes(m.name));
    assert.ok(stranded.length === dead.length && stranded.every((m) => m.role === 'leaving' && m.deleteSent));
    assert.ok(
      dead.every((n) => !sim.members.get(n)!.deleted),
      'their VMs wait for the host',
    );
    assert.notEqual(sim.status().phase, 'Ready', 'not Ready while members are leaving');
    sim.advance(10 * MIN);
    sim.hostUp('h1');
    sim.runUntil((s) => s.ready(), 'Ready once the host answered');
    assert.ok(
      dead.every((n) => sim.members.get(n)!.deleted),
      'the stranded VMs deleted',
    );
    assert.equal(sim.alive().length, 3);
  });

  it('a host that answers again within the grace: nothing is replaced', () => {
    const sim = readyPool({ size: 2 });
    const at = sim.now;
    sim.hostDown('h1');
    sim.advance(POOL_DEFAULTS.hostFailureGraceMs / 2);
    sim.hostUp('h1');
    sim.advance(30 * MIN);
    assert.equal(sim.actions('create', at).length, 0);
    assert.ok(sim.ready());
  });

  it('members on one dead host that never became available count once for the loop guard', () => {
    // Four members; those on h1 never come up. With maxSurge 2 both are replaced in one pass
    // (before a replacement is up to reset the count): counted each, they would stop creation.
    const sim = new PoolSim(poolSpec({ size: 4, rollout: { maxSurge: 2 }, replacement: { maxFailures: 2 } }));
    sim.fate = (m) => (m.index % 2 === 0 && m.index < 4 ? 'hang' : 'healthy');
    sim.pass();
    sim.advance(MIN);
    const dead = onHost(sim, 'h1');
    assert.equal(dead.length, 2);
    sim.hostDown('h1');
    sim.runUntil((s) => s.discovery().length === 4, '4 in discovery off h1');
    assert.equal(sim.state.failures.length, 1, JSON.stringify(sim.state.failures));
    assert.equal(sim.state.failures[0]!.host, 'h1');
    assert.notEqual(sim.status().phase, 'Degraded');
    assert.ok(sim.discovery().every((n) => sim.members.get(n)!.host !== 'h1'));
  });

  it('without the host-failure rule (a run from before it) the report is read as health only', () => {
    const sim = readyPool({ size: 2, replacement: { hostFailureGraceMs: 10_000 } });
    sim.hostDown('h1');
    const past = (ms: number): ReturnType<typeof reconcile> =>
      reconcile(structuredClone(sim.state), sim.now + ms, () => 0.5, { hostFailure: false });
    assert.ok(
      past(30_000).actions.every((x) => x.kind === 'serve' && !x.serving),
      'past the host grace, within unhealthyGraceMs: only out of discovery (Unhealthy), not replaced',
    );
    assert.ok(
      reconcile(structuredClone(sim.state), sim.now + 30_000, () => 0.5).actions.some((a) => a.kind === 'create'),
      'with the rule: replaced',
    );
    const state = structuredClone(sim.state);
    const later = reconcile(state, sim.now + POOL_DEFAULTS.unhealthyGraceMs, () => 0.5, { hostFailure: false });
    assert.match(state.members.find((m) => m.condemned !== undefined)?.condemned ?? '', /^Unhealthy/);
    assert.ok(later.actions.some((a) => a.kind === 'create'));
  });

  it('replacement.hostFailureGraceMs: default 60 s, refused out of range with the field named', () => {
    assert.equal(resolvePoolSpec(poolSpec()).replacement.hostFailureGraceMs, 60_000);
    assert.equal(
      resolvePoolSpec(poolSpec({ replacement: { hostFailureGraceMs: 5_000 } })).replacement.hostFailureGraceMs,
      5_000,
    );
    const problems = poolSpecProblems(poolSpec({ replacement: { hostFailureGraceMs: -1 } }));
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^replacement\.hostFailureGraceMs must be a whole number from 0 to \d+, got -1$/);
  });
});
