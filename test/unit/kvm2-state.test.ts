/** The (state, reason) → proxy state table, row by row (literal values from libvirt.h). */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { proxyVmState } from '../../lib/kvm2/proxy/vm-state.ts';
import type { ProxyVmState } from '../../lib/kvm2/proxy/vm-state.ts';

// [state, reason, expected, what]
const rows: [number, number, ProxyVmState, string][] = [
  [0, 0, 'Provisioning', 'NOSTATE'],
  [1, 0, 'Running', 'RUNNING unknown'],
  [1, 1, 'Running', 'RUNNING booted'],
  [1, 5, 'Running', 'RUNNING unpaused'],
  [1, 9, 'Running', 'RUNNING after a crash (crash action restart)'],
  [2, 0, 'Running', 'BLOCKED'],
  [3, 11, 'Provisioning', 'PAUSED starting up'],
  [3, 5, 'Failed', 'PAUSED on an I/O error'],
  [3, 10, 'Failed', 'PAUSED crashed'],
  [3, 13, 'Failed', 'PAUSED post-copy failed'],
  [3, 14, 'Failed', 'PAUSED API error'],
  [3, 1, 'Stopped', 'PAUSED by a user'],
  [3, 8, 'Stopped', 'PAUSED shutting down'],
  [4, 1, 'Stopped', 'SHUTDOWN in progress'],
  [5, 0, 'Stopped', 'SHUTOFF, never started'],
  [5, 1, 'Stopped', 'SHUTOFF after shutdown'],
  [5, 2, 'Stopped', 'SHUTOFF destroyed'],
  [5, 3, 'Failed', 'SHUTOFF crashed'],
  [5, 6, 'Failed', 'SHUTOFF failed to start'],
  [6, 0, 'Failed', 'CRASHED'],
  [7, 0, 'Stopped', 'PMSUSPENDED'],
  [99, 0, 'Failed', 'a state this table does not know'],
];

for (const [state, reason, expected, what] of rows) {
  it(`${what} (${state}/${reason}) is ${expected}`, () => {
    assert.equal(proxyVmState(state, reason), expected);
  });
}
