/**
 * The pieces of client/ that need no server: the deadline helper's error mapping, the settings'
 * defaults, the start policy's spec comparison, and the search attribute kinds.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_TEMPORAL_ADDRESS, temporalSettings, withDeadline } from '../../client/connection.ts';
import { TemporalUnavailableError } from '../../client/errors.ts';
import { sameSpec } from '../../client/proxies.ts';
import type { ProxySummary } from '../../client/proxies.ts';
import { INDEXED_VALUE_TYPES, kindName } from '../../client/search-attributes.ts';
import { CUSTOM_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import { TASK_QUEUE } from '../../contracts/task-queues.ts';

/** A stand-in for Client.withDeadline: records the deadline and runs the call. */
const fakeClient = (seen: number[] = []) => ({
  withDeadline<R>(deadline: number | Date, fn: () => Promise<R>): Promise<R> {
    seen.push(Number(deadline));
    return fn();
  },
});

describe('withDeadline', () => {
  it('gives the call a deadline timeoutMs from now', async () => {
    const seen: number[] = [];
    const before = Date.now();
    assert.equal(await withDeadline(fakeClient(seen), 'x', 5_000, () => Promise.resolve(7)), 7);
    assert.ok(seen[0]! >= before + 5_000 && seen[0]! <= Date.now() + 5_000);
  });

  it('turns a deadline or an unreachable server into TemporalUnavailableError naming the call', async () => {
    const grpc = Object.assign(new Error('deadline exceeded'), { code: 4 });
    await assert.rejects(
      withDeadline(fakeClient(), 'the status query', 5_000, () => Promise.reject(grpc)),
      (err: unknown) => err instanceof TemporalUnavailableError && /the status query within 5000 ms/.test(err.message),
    );
  });

  it('passes any other error through unchanged', async () => {
    const other = new Error('workflow not found');
    await assert.rejects(
      withDeadline(fakeClient(), 'describe', 5_000, () => Promise.reject(other)),
      (err: unknown) => err === other,
    );
  });
});

describe('temporalSettings', () => {
  it('defaults to the dev server, namespace default and the project task queue', () => {
    assert.deepEqual(temporalSettings({}), {
      address: DEFAULT_TEMPORAL_ADDRESS,
      namespace: 'default',
      taskQueue: TASK_QUEUE,
    });
  });

  it('reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_TASK_QUEUE', () => {
    const env = { TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_NAMESPACE: 'ops', TEMPORAL_TASK_QUEUE: 'q' };
    assert.deepEqual(temporalSettings(env), { address: 'temporal:7233', namespace: 'ops', taskQueue: 'q' });
  });
});

describe('the start policy', () => {
  const proxy = { name: 'a', entry: 'lab' } as ProxySummary;
  const spec = { name: 'a', entry: 'lab', imageKey: 'deb', vm: { vcpus: 2, memoryMiB: 512 } };

  it('the same spec, whatever the key order, is the open run', () => {
    const recorded = { vm: { memoryMiB: 512, vcpus: 2 }, imageKey: 'deb', entry: 'lab', name: 'a' };
    assert.equal(sameSpec({ started: false, proxy, spec: recorded }, spec), true);
  });

  it('another spec, or one that cannot be read, is a conflict', () => {
    const other = { ...spec, vm: { vcpus: 4, memoryMiB: 512 } };
    assert.equal(sameSpec({ started: false, proxy, spec: other }, spec), false);
    assert.equal(sameSpec({ started: false, proxy, spec: undefined }, spec), false);
  });
});

describe('search attribute kinds', () => {
  it('every kind of contracts/search-attributes.ts has its server number, and back', () => {
    for (const kind of Object.values(CUSTOM_SEARCH_ATTRIBUTES)) {
      assert.equal(kindName(INDEXED_VALUE_TYPES[kind]), kind);
    }
    assert.equal(kindName(99), 'unknown(99)');
  });
});
