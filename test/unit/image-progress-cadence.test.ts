/**
 * The upload activity's progress cadence (activities/image.ts ProgressCadence) on a made-up clock:
 * the first sample goes out at once, then the newest at most and at least every interval while
 * samples arrive (a clock tick sends what a burst held back), one send at a time, the last byte at
 * once, and a repeated byte count never twice.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PROGRESS_SIGNAL_INTERVAL_MS, ProgressCadence } from '../../activities/image.ts';
import type { ImageProgressSignal } from '../../contracts/image.ts';

const sample = (bytes: number, totalBytes = 100) => ({
  phase: 'download' as const,
  bytes,
  totalBytes,
  bytesPerSecond: 10,
});

describe('image progress cadence', () => {
  it('sends the first sample, then the newest once per interval, and the last byte at once', async () => {
    const sent: ImageProgressSignal[] = [];
    const c = new ProgressCadence('image/h/e/k', (p) => {
      sent.push(p);
      return Promise.resolve();
    });
    const I = PROGRESS_SIGNAL_INTERVAL_MS;
    c.sample(sample(1), 0);
    await Promise.resolve();
    c.sample(sample(2), 10);
    c.sample(sample(3), I - 1);
    assert.deepEqual(
      sent.map((p) => p.bytes),
      [1],
      'held back inside the interval',
    );
    c.tick(I); // a quiet spell: the clock sends the newest sample
    await Promise.resolve();
    assert.deepEqual(
      sent.map((p) => p.bytes),
      [1, 3],
    );
    assert.equal(sent[1]!.at, new Date(I - 1).toISOString(), 'the time the sample was taken');
    c.tick(2 * I); // nothing new: nothing sent
    c.sample(sample(100), 2 * I + 1); // the last byte: at once
    await Promise.resolve();
    assert.deepEqual(
      sent.map((p) => p.bytes),
      [1, 3, 100],
    );
    assert.equal(sent[2]!.workflowId, 'image/h/e/k');
  });

  it('never has two sends in flight', async () => {
    let release!: () => void;
    const sent: number[] = [];
    const c = new ProgressCadence('w', (p) => {
      sent.push(p.bytes);
      return new Promise<void>((r) => (release = r));
    });
    c.sample(sample(1), 0);
    c.sample(sample(2), 10 * PROGRESS_SIGNAL_INTERVAL_MS);
    assert.deepEqual(sent, [1], 'the first send is still in flight');
    release();
    await new Promise((r) => setImmediate(r));
    c.tick(20 * PROGRESS_SIGNAL_INTERVAL_MS);
    assert.deepEqual(sent, [1, 2]);
  });
});
