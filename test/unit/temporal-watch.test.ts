import assert from 'node:assert/strict';
import { it } from 'node:test';
import { watchTemporal } from '../../runtime/temporal-watch.ts';

/** A log that keeps [level, msg, fields]. */
function recorder(): {
  lines: [string, string, Record<string, unknown>][];
  log: Parameters<typeof watchTemporal>[0]['log'];
} {
  const lines: [string, string, Record<string, unknown>][] = [];
  return {
    lines,
    log: {
      warn: (obj, msg) => lines.push(['warn', msg, obj as Record<string, unknown>]),
      info: (obj, msg) => lines.push(['info', msg, obj as Record<string, unknown>]),
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Waits (bounded) until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await sleep(10);
  assert.ok(cond(), what);
}

it('one warning when Temporal stops answering, reminders while down, one line when it is back', async () => {
  let clock = 1_000;
  let up = true;
  let calls = 0;
  const { lines, log } = recorder();
  const watch = watchTemporal({
    check: () => {
      calls++;
      return up ? Promise.resolve() : Promise.reject(new Error('14 UNAVAILABLE: connection refused'));
    },
    log,
    intervalMs: 5,
    remindMs: 60_000,
    now: () => clock,
  });
  try {
    await until(() => calls >= 3, 'checks ran');
    assert.equal(watch.available, true);
    assert.deepEqual(lines, [], 'nothing logged while Temporal answers');

    up = false;
    await until(() => !watch.available, 'the failure was seen');
    const failedAt = calls;
    await until(() => calls >= failedAt + 3, 'more checks while down');
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0]![0], 'warn');
    assert.match(lines[0]![1], /^Temporal unavailable/);
    assert.match(String(lines[0]![2]['err']), /connection refused/);

    clock += 61_000; // past remindMs
    await until(() => lines.length === 2, 'a reminder');
    assert.equal(lines[1]![1], 'Temporal still unavailable');
    assert.equal(lines[1]![2]['downForMs'], 61_000);

    clock += 5_000;
    up = true;
    await until(() => watch.available, 'the recovery was seen');
    assert.equal(lines.length, 3);
    assert.deepEqual(lines[2], ['info', 'Temporal reachable again', { downForMs: 66_000 }]);
  } finally {
    await watch.stop();
  }
  const after = calls;
  await sleep(30);
  assert.equal(calls, after, 'no check after stop()');
});
