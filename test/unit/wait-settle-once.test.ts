// settleOnce: every way the promise can settle (a value, an error, the time bound, an abort before
// and during, a settle while start runs, a throwing start), each releasing exactly once, before
// the promise settles, with the timer and the abort listener gone; later settles are ignored.
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, it } from 'node:test';
import { settleOnce } from '../../lib/wait.ts';
import type { Settle, SettleBounds } from '../../lib/wait.ts';

class TimedOut extends Error {}
class Aborted extends Error {}

/** A start that keeps `settle` and logs each release (and each promise outcome) in `log`. */
function harness<T>(bounds: SettleBounds = {}) {
  const log: string[] = [];
  const releases: (Error | undefined)[] = [];
  let settle: Settle<T> | undefined;
  const p = settleOnce<T>(bounds, (s) => {
    log.push('start');
    settle = s;
    return (err) => {
      releases.push(err);
      log.push('release');
    };
  });
  p.then(
    () => log.push('resolved'),
    () => log.push('rejected'),
  );
  return { p, log, releases, settle: (err: Error | undefined, value?: T) => settle!(err, value) };
}

const abortListeners = (signal: AbortSignal): number => getEventListeners(signal, 'abort').length;

describe('settleOnce', () => {
  it('resolves with the value, releasing once before it settles', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const ac = new AbortController();
    const h = harness<string>({ timeoutMs: 100, onTimeout: () => new TimedOut(), signal: ac.signal });
    assert.equal(abortListeners(ac.signal), 1);
    assert.equal(h.settle(undefined, 'v'), true);
    assert.equal(await h.p, 'v');
    assert.deepEqual(h.releases, [undefined]);
    assert.deepEqual(h.log, ['start', 'release', 'resolved']);
    assert.equal(abortListeners(ac.signal), 0, 'the abort listener is removed');
    t.mock.timers.tick(1000);
    ac.abort();
    await Promise.resolve();
    assert.deepEqual(h.releases, [undefined], 'neither the timer nor the abort runs later');
  });

  it('rejects with the error given to settle, telling the release', async () => {
    const ac = new AbortController();
    const h = harness<string>({ signal: ac.signal });
    const err = new Error('boom');
    h.settle(err);
    await assert.rejects(h.p, (e) => e === err);
    assert.deepEqual(h.releases, [err]);
    assert.deepEqual(h.log, ['start', 'release', 'rejected']);
    assert.equal(abortListeners(ac.signal), 0);
  });

  it('ignores every settle after the first', async () => {
    const h = harness<string>();
    assert.equal(h.settle(undefined, 'first'), true);
    assert.equal(h.settle(undefined, 'second'), false);
    assert.equal(h.settle(new Error('late')), false);
    assert.equal(await h.p, 'first');
    assert.equal(h.releases.length, 1);
  });

  it('the time bound rejects with onTimeout, then runs afterTimeout once it settled', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const ac = new AbortController();
    const after: { err: Error; releases: number; lateSettle: boolean }[] = [];
    const h: ReturnType<typeof harness<string>> = harness<string>({
      timeoutMs: 100,
      onTimeout: () => new TimedOut('late'),
      afterTimeout: (err) => after.push({ err, releases: h.releases.length, lateSettle: h.settle(undefined, 'x') }),
      signal: ac.signal,
    });
    t.mock.timers.tick(99);
    assert.equal(h.releases.length, 0);
    t.mock.timers.tick(1);
    await assert.rejects(h.p, (e) => e instanceof TimedOut && e.message === 'late');
    assert.equal(after.length, 1);
    assert.deepEqual(after[0], { err: h.releases[0], releases: 1, lateSettle: false });
    assert.ok(h.releases[0] instanceof TimedOut);
    assert.equal(abortListeners(ac.signal), 0);
  });

  it('afterTimeout does not run when something else settled first', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let afterCalls = 0;
    const h = harness<string>({ timeoutMs: 100, afterTimeout: () => afterCalls++ });
    h.settle(undefined, 'v');
    t.mock.timers.tick(200);
    assert.equal(await h.p, 'v');
    assert.equal(afterCalls, 0);
  });

  it('without onTimeout the time bound says how long it waited', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const h = harness<string>({ timeoutMs: 50 });
    t.mock.timers.tick(50);
    await assert.rejects(h.p, /no result within 50 ms/);
    assert.equal(h.releases.length, 1);
  });

  it('an abort already fired rejects with onAbort and never calls start', async () => {
    const ac = new AbortController();
    ac.abort(new Error('reason'));
    let started = false;
    const p = settleOnce<string>({ signal: ac.signal, onAbort: () => new Aborted('stop') }, () => {
      started = true;
      return () => undefined;
    });
    await assert.rejects(p, (e) => e instanceof Aborted && e.message === 'stop');
    assert.equal(started, false);
    assert.equal(abortListeners(ac.signal), 0);
  });

  it('an abort while waiting rejects with onAbort, releasing once and clearing the timer', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const ac = new AbortController();
    let timeouts = 0;
    const h = harness<string>({
      timeoutMs: 100,
      onTimeout: () => new TimedOut(String(++timeouts)),
      signal: ac.signal,
      onAbort: () => new Aborted('stop'),
    });
    ac.abort();
    await assert.rejects(h.p, (e) => e instanceof Aborted);
    assert.equal(h.releases.length, 1);
    assert.ok(h.releases[0] instanceof Aborted);
    assert.deepEqual(h.log, ['start', 'release', 'rejected']);
    t.mock.timers.tick(1000);
    assert.equal(timeouts, 0, 'the timer is cleared');
    assert.equal(h.settle(undefined, 'late'), false);
    assert.equal(h.releases.length, 1);
  });

  it('without onAbort the abort error carries the reason', async () => {
    const ac = new AbortController();
    const h = harness<string>({ signal: ac.signal });
    const reason = new Error('why');
    ac.abort(reason);
    await assert.rejects(h.p, (e) => e instanceof Error && e.message === 'aborted' && e.cause === reason);
  });

  it('a settle while start still runs takes effect once start returned its release', async () => {
    const ac = new AbortController();
    const log: string[] = [];
    let released = 0;
    const p = settleOnce<string>({ signal: ac.signal, timeoutMs: 10_000 }, (settle) => {
      assert.equal(settle(undefined, 'sync'), true);
      assert.equal(settle(undefined, 'again'), false);
      log.push('start returns');
      return () => {
        released++;
        log.push('release');
      };
    });
    log.push('settleOnce returned');
    assert.equal(await p, 'sync');
    assert.equal(released, 1);
    assert.deepEqual(log, ['start returns', 'release', 'settleOnce returned']);
    assert.equal(abortListeners(ac.signal), 0);
  });

  it('a start that throws rejects with its error and leaves nothing behind', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const ac = new AbortController();
    let timeouts = 0;
    const err = new Error('cannot start');
    const p = settleOnce<string>(
      { signal: ac.signal, timeoutMs: 100, onTimeout: () => new TimedOut(String(++timeouts)) },
      () => {
        throw err;
      },
    );
    await assert.rejects(p, (e) => e === err);
    assert.equal(abortListeners(ac.signal), 0);
    t.mock.timers.tick(1000);
    assert.equal(timeouts, 0);
  });

  it('a start that settles and then throws keeps the first outcome', async () => {
    const p = settleOnce<string>({}, (settle) => {
      settle(undefined, 'kept');
      throw new Error('ignored');
    });
    assert.equal(await p, 'kept');
  });
});
