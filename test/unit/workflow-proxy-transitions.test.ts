/**
 * The proxy lifecycle's run state (workflows/proxy/state.ts) and the status transitions the
 * phases, handlers and cleanup apply (workflows/proxy/status.ts): boot, recreation, deletion, the
 * failure kept, and what the delete and resize updates refuse.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ProxyStatus, ResolvedProxy } from '../../contracts/proxy.ts';
import { ProxyRun } from '../../workflows/proxy/state.ts';
import {
  deleteProblem,
  detailsLine,
  failedError,
  initialStatus,
  isEnding,
  markDeleted,
  markRecreating,
  markVmRunning,
  memoOf,
  newCondition,
  resizeProblem,
  resizeTarget,
  vmLost,
  withImageProgress,
} from '../../workflows/proxy/status.ts';

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:01:00.000Z';
const SPEC = { name: 'p1', entry: 'e1', imageKey: 'img' };

function running(over: Partial<ProxyStatus> = {}): ProxyStatus {
  return {
    ...initialStatus(SPEC, T0),
    state: 'Running',
    host: 'h1',
    ip: '10.0.0.5',
    vm: { vcpus: 2, memoryMiB: 1024, diskGiB: 10 },
    conditions: {
      VmRunning: newCondition('True', 'Running', T0),
      AddressAssigned: newCondition('True', 'AddressRead', T0),
      Healthy: newCondition('True', 'ProbePassed', T0),
    },
    health: { consecutiveOk: 4, consecutiveFailed: 0, totalOk: 4, totalFailed: 0 },
    ...over,
  };
}

describe('status marks', () => {
  it('newCondition carries a message only when given one', () => {
    assert.deepEqual(newCondition('Unknown', 'NotCreated', T0), { status: 'Unknown', reason: 'NotCreated', since: T0 });
    assert.deepEqual(newCondition('False', 'X', T0, 'why'), {
      status: 'False',
      reason: 'X',
      message: 'why',
      since: T0,
    });
  });

  it('markVmRunning sets VmRunning True and leaves the other conditions', () => {
    const st = initialStatus(SPEC, T0);
    const next = markVmRunning(st, T1);
    assert.deepEqual(next.conditions.VmRunning, { status: 'True', reason: 'Running', since: T1 });
    assert.deepEqual(next.conditions.AddressAssigned, st.conditions.AddressAssigned);
    assert.deepEqual(next.conditions.Healthy, st.conditions.Healthy);
  });

  it('vmLost: Missing, Failed and Stopped are lost; Running, Provisioning and no reading are not', () => {
    for (const state of ['Missing', 'Failed', 'Stopped'] as const) assert.equal(vmLost({ state }), true, state);
    for (const state of ['Running', 'Provisioning'] as const) assert.equal(vmLost({ state }), false, state);
    assert.equal(vmLost(undefined), false);
  });

  it('markRecreating counts the recreation, drops the address and sets every condition False', () => {
    const next = markRecreating(running(), 'Missing', T1);
    assert.equal(next.recreations, 1);
    assert.equal(next.ip, undefined);
    assert.deepEqual(next.conditions, {
      VmRunning: { status: 'False', reason: 'Missing', since: T1 },
      AddressAssigned: { status: 'False', reason: 'Recreating', since: T1 },
      Healthy: { status: 'False', reason: 'Recreating', since: T1 },
    });
    assert.equal(next.health.consecutiveOk, 0);
    assert.equal(next.health.totalOk, 4, 'totals are kept');
  });

  it('markDeleted: no address, deletedAt, every condition False with reason Deleted', () => {
    const next = markDeleted(running(), T1);
    assert.equal(next.ip, undefined);
    assert.equal(next.deletedAt, T1);
    for (const c of Object.values(next.conditions))
      assert.deepEqual(c, { status: 'False', reason: 'Deleted', since: T1 });
  });

  it('withImageProgress records the progress fields only', () => {
    const p = { workflowId: 'image/h1/e1/img', bytes: 5, totalBytes: 10, bytesPerSecond: 2 };
    assert.deepEqual(withImageProgress(running(), { ...p, extra: 1 } as typeof p).image, p);
  });

  it('failedError keeps the last error when it has the failure code, else a Permanent one', () => {
    const last = { kind: 'Transient', code: 'BOOT_TIMEOUT', message: 'older words', at: T0 };
    assert.equal(failedError(last, 'BOOT_TIMEOUT', 'new words', T1), last);
    assert.deepEqual(failedError(last, 'VM_LOST', 'gone', T1), {
      kind: 'Permanent',
      code: 'VM_LOST',
      message: 'gone',
      at: T1,
    });
    assert.deepEqual(failedError(undefined, 'X', 'm', T1), { kind: 'Permanent', code: 'X', message: 'm', at: T1 });
  });

  it('memo and details name the proxy, its host and address (null or - when unknown)', () => {
    const st = initialStatus(SPEC, T0);
    assert.deepEqual(memoOf(st), { proxy: 'p1', entry: 'e1', host: null, ip: null, port: 0, runningSince: null });
    assert.equal(detailsLine(st), '**Pending** · proxy `p1` · entry `e1` · host `-` · ip `-` · Healthy Unknown');
    assert.equal(
      detailsLine(running({ reason: 'because' })),
      '**Running** · proxy `p1` · entry `e1` · host `h1` · ip `10.0.0.5` · Healthy True · because',
    );
  });
});

describe('what the updates refuse', () => {
  it('isEnding: Deleting, Deleted and Failed only', () => {
    const states = [
      'Pending',
      'WaitingForCapacity',
      'Provisioning',
      'Booting',
      'Running',
      'Deleting',
      'Deleted',
      'Failed',
    ] as const;
    assert.deepEqual(
      states.filter((s) => isEnding(s)),
      ['Deleting', 'Deleted', 'Failed'],
    );
  });

  it('delete is refused once Deleted or Failed, accepted before (Deleting included)', () => {
    assert.equal(deleteProblem('Deleted'), 'the proxy is already Deleted');
    assert.equal(deleteProblem('Failed'), 'the proxy is already Failed');
    for (const s of ['Pending', 'Running', 'Deleting'] as const) assert.equal(deleteProblem(s), undefined, s);
  });

  it('resize: the limits at and around their bounds, in the words of contracts/limits.ts', () => {
    assert.equal(resizeProblem({ vcpus: 1 }, 'Running'), undefined);
    assert.equal(resizeProblem({ vcpus: 64, memoryMiB: 262_144 }, 'Running'), undefined);
    assert.equal(resizeProblem({ memoryMiB: 128 }, 'Booting'), undefined, 'accepted before Running: it waits');
    assert.equal(resizeProblem({ vcpus: 0 }, 'Running'), 'vm.vcpus must be a whole number from 1 to 64, got 0');
    assert.equal(resizeProblem({ vcpus: 65 }, 'Running'), 'vm.vcpus must be a whole number from 1 to 64, got 65');
    assert.equal(resizeProblem({ vcpus: 1.5 }, 'Running'), 'vm.vcpus must be a whole number from 1 to 64, got 1.5');
    assert.equal(
      resizeProblem({ memoryMiB: 127 }, 'Running'),
      'vm.memoryMiB must be a whole number from 128 to 262144, got 127',
    );
    assert.equal(
      resizeProblem({ memoryMiB: 262_145 }, 'Running'),
      'vm.memoryMiB must be a whole number from 128 to 262144, got 262145',
    );
  });

  it('resize: a disk size, an empty size and an ending proxy are refused', () => {
    assert.equal(
      resizeProblem({ diskGiB: 20, vcpus: 2 }, 'Running'),
      'vm.diskGiB cannot be changed by a resize (memoryMiB and vcpus can)',
    );
    assert.equal(resizeProblem({}, 'Running'), 'give vm.vcpus, vm.memoryMiB or both');
    assert.equal(resizeProblem({ vcpus: 2 }, 'Deleting'), 'the proxy is Deleting: nothing to resize');
    assert.equal(resizeProblem({ vcpus: 2 }, 'Failed'), 'the proxy is Failed: nothing to resize');
  });

  it('resizeTarget: the given fields over the current size', () => {
    const vm = { vcpus: 2, memoryMiB: 1024, diskGiB: 10 };
    assert.deepEqual(resizeTarget({ vcpus: 4 }, vm), { vcpus: 4, memoryMiB: 1024 });
    assert.deepEqual(resizeTarget({ memoryMiB: 2048 }, vm), { vcpus: 2, memoryMiB: 2048 });
  });
});

describe('ProxyRun', () => {
  const resolved = { name: 'p1', entry: 'e1', imageKey: 'img' } as ResolvedProxy;

  it('a fresh run starts Pending with nothing created', () => {
    const run = new ProxyRun(SPEC, T0);
    assert.deepEqual(run.status, initialStatus(SPEC, T0));
    assert.equal(run.resolved, undefined);
    assert.equal(run.missedPolls, 0);
    assert.equal(run.addressedOnce, false);
    assert.equal(run.mayHaveCreated, false);
    assert.equal(run.deleteRequested, false);
    assert.equal(run.ending(), false);
  });

  it('a carried run resumes where the last one stopped, and carries the same again', () => {
    const carried = { resolved, status: running(), missedPolls: 1, startedAtMs: 42, addressedOnce: true };
    const run = new ProxyRun({ ...SPEC, carried }, T1);
    assert.equal(run.status, carried.status);
    assert.equal(run.resolved, resolved);
    assert.equal(run.mayHaveCreated, true, 'a placed, Running proxy may have a VM to delete');
    assert.deepEqual(run.carried(resolved), carried);
  });

  it('a carried proxy that was placed but still waits for capacity has created nothing', () => {
    const status = running({ state: 'WaitingForCapacity' });
    const run = new ProxyRun({ ...SPEC, carried: { resolved, status, missedPolls: 0, addressedOnce: false } }, T1);
    assert.equal(run.mayHaveCreated, false);
  });

  it('a resize is pending until done; its error lasts until the next request', () => {
    const run = new ProxyRun(SPEC, T0);
    run.requestResize({ vcpus: 4, memoryMiB: 2048 });
    assert.deepEqual(run.pendingResize, { vcpus: 4, memoryMiB: 2048 });
    run.resizeDone('host refused');
    assert.equal(run.pendingResize, undefined);
    assert.equal(run.lastResizeError(), 'host refused');
    run.requestResize({ vcpus: 2, memoryMiB: 1024 });
    assert.equal(run.lastResizeError(), undefined);
    run.resizeDone();
    assert.equal(run.lastResizeError(), undefined);
  });
});
