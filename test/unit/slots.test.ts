/**
 * The slots (lib/slots.ts) and the host's domain start slots on them (HostLinks.start): at most
 * `max` at once, granted in arrival order, a queued wait bounded by its deadline and its signal,
 * a slot given back when the work throws, queued callers failed by close(). The call slots of the
 * pooled link run on the same class; test/unit/ssh-pool.test.ts covers them over a real sshd.
 * No network: HostLinks.start dials nothing (the start's own calls would). Every wait is bounded.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FALLBACK_MAX_CONCURRENT_STARTS } from '../../contracts/fleet.ts';
import { errorKind } from '../../lib/errors.ts';
import { SshPoolClosedError, SshPoolQueueTimeoutError } from '../../lib/hostlink/errors.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import { SshAbortedError } from '../../lib/ssh/errors.ts';
import { Slots } from '../../lib/slots.ts';

const T = { timeout: 10_000 };

const errors = {
  timeout: (q: { max: number; inUse: number; queued: number; waitedMs: number }) =>
    new Error(`timeout max=${q.max} inUse=${q.inUse} queued=${q.queued}`),
  aborted: (_reason: unknown, queued: boolean) => new Error(queued ? 'aborted queued' : 'aborted early'),
};

/** A promise and its resolver, for work the test finishes by hand. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
const far = (): number => Date.now() + 5_000;

describe('Slots', () => {
  it('refuses a count that is not a positive integer', () => {
    assert.throws(() => new Slots(0, errors), RangeError);
    assert.throws(() => new Slots(1.5, errors), RangeError);
  });

  it('runs at most max at once and grants the rest in arrival order', T, async () => {
    const slots = new Slots(2, errors);
    const gates = Array.from({ length: 5 }, gate);
    const order: number[] = [];
    const runs = gates.map((g, i) =>
      slots.run(async () => {
        order.push(i);
        await g.promise;
      }, far()),
    );
    await tick();
    assert.deepEqual(order, [0, 1]);
    assert.equal(slots.inUse, 2);
    assert.equal(slots.queued, 3);
    gates[1]!.open();
    await tick();
    await tick();
    assert.deepEqual(order, [0, 1, 2]);
    gates[0]!.open();
    gates[2]!.open();
    await tick();
    await tick();
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    gates[3]!.open();
    gates[4]!.open();
    await Promise.all(runs);
    assert.equal(slots.inUse, 0);
    assert.equal(slots.maxInUse, 2);
  });

  it('a queued wait ends at its deadline with the error the owner gives; the work never runs', T, async () => {
    const slots = new Slots(1, errors);
    const hold = gate();
    const first = slots.run(() => hold.promise, far());
    let ran = false;
    const began = Date.now();
    await assert.rejects(
      slots.run(() => Promise.resolve(void (ran = true)), Date.now() + 100),
      /timeout max=1 inUse=1 queued=1/,
    );
    assert.ok(Date.now() - began >= 90, 'waited out the deadline');
    assert.equal(ran, false);
    assert.equal(slots.queued, 0);
    hold.open();
    await first;
  });

  it('a queued wait whose signal aborts leaves the queue at once; one already aborted never queues', T, async () => {
    const slots = new Slots(1, errors);
    const hold = gate();
    const first = slots.run(() => hold.promise, far());
    const ac = new AbortController();
    const queued = slots.acquire(far(), ac.signal);
    const behind = slots.run(() => Promise.resolve('behind'), far());
    await tick();
    assert.equal(slots.queued, 2);
    ac.abort(new Error('stop'));
    await assert.rejects(queued, /aborted queued/);
    assert.equal(slots.queued, 1);
    await assert.rejects(slots.acquire(far(), AbortSignal.abort()), /aborted early/);
    assert.equal(slots.queued, 1);
    hold.open();
    await first;
    assert.equal(await behind, 'behind', 'the next one in line still runs');
  });

  it('a slot comes back when the work throws', T, async () => {
    const slots = new Slots(1, errors);
    await assert.rejects(
      slots.run(() => Promise.reject(new Error('boom')), far()),
      /boom/,
    );
    assert.equal(slots.inUse, 0);
    assert.equal(await slots.run(() => Promise.resolve(7), far()), 7);
  });

  it('resize: more slots grant queued callers at once; fewer let the running finish first', T, async () => {
    const slots = new Slots(1, errors);
    const hold = gate();
    const first = slots.run(() => hold.promise, far());
    const order: string[] = [];
    const a = slots.run(() => Promise.resolve(void order.push('a')), far());
    const b = slots.run(() => Promise.resolve(void order.push('b')), far());
    const c = slots.run(() => hold.promise.then(() => void order.push('c')), far());
    await tick();
    assert.equal(slots.queued, 3);
    slots.resize(3);
    await Promise.all([a, b]);
    assert.deepEqual(order, ['a', 'b'], 'granted in their order without waiting for the first');
    assert.equal(slots.inUse, 2);
    slots.resize(1);
    const d = slots.run(() => Promise.resolve(void order.push('d')), far());
    await tick();
    assert.equal(slots.queued, 1, 'two in use, one slot: d waits');
    hold.open();
    await Promise.all([first, c, d]);
    assert.deepEqual(order, ['a', 'b', 'c', 'd']);
    assert.throws(() => slots.resize(0), RangeError);
  });

  it('failQueued fails every queued caller; the ones running keep their slots', T, async () => {
    const slots = new Slots(1, errors);
    const hold = gate();
    const first = slots.run(() => hold.promise, far());
    const a = slots.acquire(far());
    const b = slots.acquire(far());
    slots.failQueued(() => new Error('closed'));
    await assert.rejects(a, /closed/);
    await assert.rejects(b, /closed/);
    assert.equal(slots.inUse, 1);
    hold.open();
    await first;
    assert.equal(slots.inUse, 0);
  });
});

describe('HostLinks.start: the host domain start slots', () => {
  const target = {
    name: 'e/h1',
    host: '127.0.0.1',
    port: 1,
    user: 'root',
    keyPath: '/nonexistent',
    knownHostsPath: '/nonexistent',
  };

  it('refuses a maxConcurrentStarts that is not a positive integer', () => {
    assert.throws(
      () => new HostLinks(target, { maxConcurrentStarts: 0 }),
      /maxConcurrentStarts must be a positive integer/,
    );
  });

  it('runs maxConcurrentStarts starts at once, the rest in turn, and reads nothing from the host', T, async () => {
    const links = new HostLinks(target, { maxConcurrentStarts: 2 });
    try {
      let running = 0;
      let most = 0;
      const starts = Array.from({ length: 6 }, () =>
        links.start(async () => {
          running++;
          most = Math.max(most, running);
          await new Promise((r) => setTimeout(r, 20));
          running--;
        }),
      );
      await tick();
      assert.equal(links.stats().starts.inFlight, 2);
      assert.equal(links.stats().starts.queued, 6 - 2);
      await Promise.all(starts);
      assert.equal(most, 2);
      assert.deepEqual(links.stats().starts, { slots: 2, inFlight: 0, queued: 0, maxInFlight: 2 });
      assert.equal(links.stats().dials, 0, 'a given count: no dial to read the host CPUs');
    } finally {
      links.close();
    }
  });

  it('without maxConcurrentStarts and the host unreadable, starts run in the fallback slots', T, async () => {
    const links = new HostLinks(target, { defaultTimeoutMs: 2_000 });
    try {
      assert.equal(links.stats().starts.slots, FALLBACK_MAX_CONCURRENT_STARTS);
      assert.equal(await links.start(() => Promise.resolve('started')), 'started');
      assert.equal(await links.start(() => Promise.resolve('again')), 'again');
      assert.equal(links.stats().dials, 2, 'the CPUs were asked for before each start (the dial failed)');
      assert.equal(links.stats().starts.slots, FALLBACK_MAX_CONCURRENT_STARTS);
    } finally {
      links.close();
    }
  });

  it('a queued start times out as a Transient SshPoolQueueTimeoutError naming the setting', T, async () => {
    const links = new HostLinks(target, { maxConcurrentStarts: 1 });
    const hold = gate();
    try {
      const first = links.start(() => hold.promise);
      const err = await links
        .start(() => Promise.resolve(), { timeoutMs: 50 })
        .then(
          () => assert.fail('the queued start ran'),
          (e: unknown) => e,
        );
      assert.ok(err instanceof SshPoolQueueTimeoutError);
      assert.equal(errorKind(err), 'Transient');
      assert.match(
        err.message,
        /e\/h1: no domain start slot after 0 s \(1 starts at once, 1 queued; providers\[\]\.hosts\[\]\.maxConcurrentStarts\)/,
      );
      hold.open();
      await first;
    } finally {
      links.close();
    }
  });

  it('an aborted start leaves the queue; close() fails the queued ones and refuses new ones', T, async () => {
    const links = new HostLinks(target, { maxConcurrentStarts: 1 });
    const hold = gate();
    const first = links.start(() => hold.promise);
    const ac = new AbortController();
    const aborted = links.start(() => Promise.resolve(), { signal: ac.signal });
    const queued = links.start(() => Promise.resolve());
    await tick();
    ac.abort(new Error('activity cancelled'));
    await assert.rejects(aborted, (e: unknown) => e instanceof SshAbortedError && /while queued/.test(e.message));
    links.close();
    await assert.rejects(queued, SshPoolClosedError);
    await assert.rejects(
      links.start(() => Promise.resolve()),
      SshPoolClosedError,
    );
    hold.open();
    await first;
  });
});
