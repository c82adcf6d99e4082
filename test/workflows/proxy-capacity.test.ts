/**
 * Waiting for capacity on the time-skipping test server with fake activities: no pool with room
 * (WaitingForCapacity, a durable backoff, leaving the wait by itself), and a create that meets a
 * full pool (compensation, a new placement, one attempt only), and a VM too big for every host's
 * memory, vCPUs or maxProxies (WaitingForCapacity naming each host's shortage, then Running once
 * a host has room).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PlacedProxy } from '../../activities/proxy.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';
import {
  capacityError,
  created,
  distinctStates,
  Fakes,
  fullSurvey,
  idle,
  resolvedProxy,
  roomySurvey,
  searchAttributes,
  skipUntil,
  fileEnv,
  status,
  statusWhen,
  TEST_TIMEOUT_MS,
  timerDurationsMs,
  upsertedStates,
  withProxy,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };
const waitingForCapacity = (s: ProxyStatus): boolean => s.state === 'WaitingForCapacity';

describe('proxy capacity wait', () => {
  it(
    'capacity wait and its exit: no pool space → WaitingForCapacity; space appears → Running by itself',
    opts,
    async () => {
      const f = new Fakes(e);
      f.survey = (_, n) => (n < 2 ? fullSurvey() : roomySurvey());
      await withProxy(e, f, async ({ handle: h }) => {
        const waiting = await statusWhen(h, (s) => s.state === 'WaitingForCapacity', 'WaitingForCapacity');
        assert.match(waiting.reason ?? '', /no host has \d+ bytes free in its pool/);
        assert.match(waiting.reason ?? '', /h1: 10485760 bytes free; h2: 20971520 bytes free/);
        assert.equal(waiting.host, undefined);
        assert.equal((await searchAttributes(h))['ProxyState'], 'WaitingForCapacity');
        assert.equal(f.count('createProxyVm'), 0);

        // Nothing but time: the durable timer re-checks (30 s, then 60 s) and leaves the wait itself.
        await idle(h, 'the first backoff timer', waitingForCapacity);
        await e.env.sleep(30_000);
        await pollUntilCount(f, 'surveyHosts', 2);
        await idle(h, 'the second backoff timer', waitingForCapacity);
        assert.equal((await status(h)).state, 'WaitingForCapacity');
        await e.env.sleep(60_000);
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running after space appeared');
        assert.equal(running.host, 'h2');
        assert.equal(running.reason, undefined);
        assert.equal(f.count('surveyHosts'), 3);
        // The surveys are local activities, timed by the worker's clock; the backoffs are the
        // workflow's timers: 30 s of workflow time, then doubled.
        assert.deepEqual((await timerDurationsMs(h)).slice(0, 2), [30_000, 60_000], 'backoffs of 30 s, then 60 s');
        assert.deepEqual(distinctStates(await upsertedStates(h)).slice(0, 5), [
          'Pending',
          'WaitingForCapacity',
          'Provisioning',
          'Booting',
          'Running',
        ]);
      });
    },
  );

  it(
    'create fails with KVM2_INSUFFICIENT_CAPACITY → compensation → WaitingForCapacity → later Running',
    opts,
    async () => {
      const f = new Fakes(e);
      let poolFull = true;
      f.create = (input) => {
        if (poolFull) throw capacityError();
        return created(input);
      };
      await withProxy(e, f, async ({ handle: h }) => {
        // The activity preset may retry the Transient capacity error first: skip that time.
        const waiting = await skipUntil(
          e,
          async () => {
            const s = await status(h);
            return s.state === 'WaitingForCapacity' ? s : undefined;
          },
          'WaitingForCapacity after the failed create',
          5_000,
        );
        assert.match(waiting.reason ?? '', /has 1048576 bytes available; 2147483648 are needed/);
        assert.equal(waiting.host, undefined, 'the host is released for a new placement');
        assert.equal(waiting.lastError?.code, 'KVM2_INSUFFICIENT_CAPACITY');
        assert.equal(waiting.lastError?.kind, 'Transient');
        const deletes = f.of<PlacedProxy>('deleteProxyVm');
        assert.equal(deletes.length, 1, 'the failed create was compensated');
        assert.equal(deletes[0]!.host, 'h2');
        const seq = f.sequence();
        assert.ok(seq.lastIndexOf('createProxyVm') < seq.indexOf('deleteProxyVm'));

        poolFull = false;
        await idle(h, 'the capacity backoff timer', waitingForCapacity);
        await e.env.sleep(30_000);
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running after the wait');
        assert.equal(running.host, 'h2');
        assert.equal(f.count('surveyHosts'), 2, 'placed again after the wait');
        assert.equal(f.count('deleteProxyVm'), 1);
        assert.deepEqual(
          f.of<PlacedProxy>('createProxyVm').map((c) => c.host),
          f.of<PlacedProxy>('createProxyVm').map(() => 'h2'),
        );
      });
    },
  );

  it('a capacity failure of createProxyVm is not retried: the wait starts after one attempt', opts, async () => {
    const f = new Fakes(e);
    f.create = () => {
      throw capacityError();
    };
    await withProxy(e, f, async ({ handle: h }) => {
      await skipUntil(
        e,
        async () => ((await status(h)).state === 'WaitingForCapacity' ? true : undefined),
        'WaitingForCapacity',
        5_000,
      );
      const first = f.calls.find((c) => c.activity === 'deleteProxyVm');
      const attempts = f.calls.filter(
        (c) => c.activity === 'createProxyVm' && (!first || c.scheduledMs <= first.scheduledMs),
      );
      assert.equal(
        attempts.length,
        1,
        `createProxyVm was attempted ${attempts.length} times (attempts ${attempts.map((c) => c.attempt).join(',')}) ` +
          'before the proxy showed WaitingForCapacity; the state said Provisioning meanwhile',
      );
    });
  });
});

/** Two hosts with capacity figures: h1 has 8 GiB and 2 CPUs, 6 GiB of it committed; h2 is at its maxProxies. */
function tightSurvey(h1CommittedMiB: number): HostSurvey[] {
  const sized = { memoryTotalMiB: 8192, memoryFreeMiB: 8000, cpus: 2, memoryOvercommit: 1, cpuOvercommit: 4 };
  return [
    {
      entry: 'e1',
      host: 'h1',
      weight: 1,
      reachable: true,
      poolAvailableBytes: 50 * 1024 ** 3,
      proxies: 1,
      ...sized,
      memoryCommittedMiB: h1CommittedMiB,
      vcpusCommitted: 2,
    },
    {
      entry: 'e1',
      host: 'h2',
      weight: 1,
      reachable: true,
      poolAvailableBytes: 80 * 1024 ** 3,
      proxies: 2,
      maxProxies: 2,
      ...sized,
      memoryCommittedMiB: 0,
      vcpusCommitted: 0,
    },
  ];
}

describe('proxy capacity: the VM must fit a host', () => {
  it(
    'a VM too big for every host waits in WaitingForCapacity with what each host lacks, never created; a host with room → Running there',
    opts,
    async () => {
      const f = new Fakes(e);
      f.resolve = (spec) => ({ ...resolvedProxy(spec), vm: { vcpus: 2, memoryMiB: 4096, diskGiB: 4 } });
      let h1CommittedMiB = 6144;
      f.survey = () => tightSurvey(h1CommittedMiB);
      await withProxy(e, f, async ({ handle: h }) => {
        const waiting = await statusWhen(h, waitingForCapacity, 'WaitingForCapacity');
        assert.equal(
          waiting.reason,
          'no host has room for a VM of 4096 MiB and 2 vCPUs (' +
            'h1: memory: 6144 of 8192 MiB committed (8192 MiB × 1), 4096 more do not fit; ' +
            'h2: 2 of 2 proxies)',
        );
        assert.equal(waiting.host, undefined);
        assert.equal((await searchAttributes(h))['ProxyState'], 'WaitingForCapacity');
        assert.equal(f.count('createProxyVm'), 0, 'no VM is created on a host it does not fit');
        assert.equal(f.count('ensureBaseImage') + f.count('findBaseImage'), 0);

        // A VM on h1 went away: 2048 + 4096 fit in 8192 at the next survey (after the 30 s backoff).
        h1CommittedMiB = 2048;
        await idle(h, 'the capacity backoff timer', waitingForCapacity);
        await e.env.sleep(30_000);
        const running = await statusWhen(h, (s) => s.state === 'Running', 'Running once h1 has room');
        assert.equal(running.host, 'h1');
        assert.equal(running.reason, undefined);
        assert.equal(f.count('surveyHosts'), 2);
        assert.deepEqual(
          f.of<PlacedProxy>('createProxyVm').map((c) => c.host),
          ['h1'],
        );
      });
    },
  );
});

async function pollUntilCount(f: Fakes, activity: string, n: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (f.count(activity) < n) {
    if (Date.now() > deadline) throw new Error(`${activity} was not called ${n} times`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
