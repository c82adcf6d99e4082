/**
 * A proxy whose VM does not come up within bootMs, on the time-skipping test server with fake
 * activities: never running, running without an address, and a console read that fails; each
 * ends Failed with BOOT_TIMEOUT after compensation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { PlacedProxy } from '../../activities/proxy.ts';
import type { ProxyOutcome } from '../../contracts/proxy.ts';
import {
  failure,
  failureOf,
  Fakes,
  created,
  resolvedProxy,
  searchAttributes,
  fileEnv,
  status,
  TEST_TIMEOUT_MS,
  withProxy,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };

describe('proxy boot timeout', () => {
  it('boot timeout: the VM never runs → Failed with BOOT_TIMEOUT after bootMs; compensation ran', opts, async () => {
    const f = new Fakes(e);
    const bootMs = 20_000;
    f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs } });
    // The create found the domain there already (it did not start it): the workflow polls.
    f.create = (input) => ({ ...created(input), started: false });
    f.read = () => ({ state: 'Provisioning' });
    await withProxy(e, f, async ({ handle: h }) => {
      const err = await failureOf(h.result());
      assert.ok(err.cause instanceof ApplicationFailure);
      assert.equal(err.cause.type, 'BOOT_TIMEOUT');
      assert.equal(err.cause.nonRetryable, true);
      const outcome = err.cause.details?.[0] as ProxyOutcome;
      assert.equal(outcome.state, 'Failed');
      assert.equal(outcome.host, 'h2');
      assert.match(outcome.reason ?? '', /did not run within bootMs \(20000 ms\)/);

      const s = await status(h);
      assert.equal(s.state, 'Failed');
      assert.equal(s.lastError?.code, 'BOOT_TIMEOUT');
      assert.deepEqual(s.consoleTail, ['[  OK  ] Reached target Cloud-init', 'login:'], "the console's last lines");
      const deletes = f.of<PlacedProxy>('deleteProxyVm');
      assert.equal(deletes.length, 1, 'compensation deleted what the create made');
      assert.equal(deletes[0]!.host, 'h2');
      const createdAt = f.calls.find((c) => c.activity === 'createProxyVm')!.scheduledMs;
      const lastRead = f.calls.filter((c) => c.activity === 'readProxyVm').at(-1)!.scheduledMs;
      assert.ok(lastRead - createdAt >= bootMs, `gave up ${lastRead - createdAt} ms after create, before bootMs`);
      assert.ok(lastRead - createdAt < bootMs + 10_000, `gave up ${lastRead - createdAt} ms after create`);
      assert.equal((await searchAttributes(h))['ProxyState'], 'Failed');
    });
  });

  it(
    'boot timeout: Running but never an address → Failed with BOOT_TIMEOUT after bootMs; compensation ran',
    opts,
    async () => {
      const f = new Fakes(e);
      const bootMs = 60_000;
      const intervalMs = 10_000;
      f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs }, health: { intervalMs } });
      f.read = () => ({ state: 'Running' });
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'BOOT_TIMEOUT');
        assert.match(err.cause.message, /no address was read within bootMs \(60000 ms\)/);
        const s = await status(h);
        assert.equal(s.state, 'Failed');
        assert.equal(s.ip, undefined);
        assert.equal(s.conditions.AddressAssigned.status, 'False');
        assert.equal(f.count('probeProxy'), 0, 'nothing to probe without an address');
        assert.equal(f.of<PlacedProxy>('deleteProxyVm').length, 1);
        assert.equal(f.of<PlacedProxy>('deleteProxyVm')[0]!.host, 'h2');
        const createdAt = f.calls.find((c) => c.activity === 'createProxyVm')!.scheduledMs;
        const lastRead = f.calls.filter((c) => c.activity === 'readProxyVm').at(-1)!.scheduledMs;
        assert.ok(lastRead - createdAt > bootMs, `gave up ${lastRead - createdAt} ms after create, before bootMs`);
        assert.ok(
          lastRead - createdAt <= bootMs + intervalMs + 5_000,
          `gave up ${lastRead - createdAt} ms after create`,
        );
      });
    },
  );

  it(
    'boot timeout whose console read fails: compensation still runs, the failure stays BOOT_TIMEOUT',
    opts,
    async () => {
      const f = new Fakes(e);
      f.resolve = (spec) => resolvedProxy(spec, { timeouts: { bootMs: 20_000 } });
      f.read = () => ({ state: 'Provisioning' });
      // PROBE_ACTIVITY allows one attempt: a worker restart during the read is an activity failure.
      f.consoleTail = () => {
        throw failure('UNCLASSIFIED', 'Transient', 'activity StartToClose timeout');
      };
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.equal(
          f.count('deleteProxyVm'),
          1,
          `compensation did not run: the VM is left behind (the workflow ended with ${String(err.cause)})`,
        );
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'BOOT_TIMEOUT');
      });
    },
  );
});
