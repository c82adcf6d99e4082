/**
 * `proxy list` and `proxy get` agree on health: the list reads the ProxyHealth Keyword
 * (True/False/Unknown), so a booting proxy (Healthy Unknown, ProxyHealthy false) lists as Unknown,
 * as its status query says; runs before ProxyHealth read True from the Bool and nothing else.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { summaryOf } from '../../client/proxies.ts';
import { listQuery } from '../../client/store.ts';

const info = (sa: Record<string, unknown[]>) =>
  summaryOf({
    workflowId: 'proxy/lab/p1',
    runId: 'r1',
    status: { name: 'RUNNING', code: 1 },
    startTime: new Date('2026-01-01T00:00:00Z'),
    closeTime: undefined,
    memo: {},
    searchAttributes: sa,
  } as unknown as Parameters<typeof summaryOf>[0]);

it('a booting proxy lists as Unknown, not false', () => {
  const s = info({ ProxyState: ['Booting'], ProxyHealthy: [false], ProxyHealth: ['Unknown'] });
  assert.equal(s.health, 'Unknown');
  assert.equal(s.healthy, false);
});

it('a run recorded before ProxyHealth: True from the Bool, nothing guessed for false', () => {
  assert.equal(info({ ProxyHealthy: [true] }).health, 'True');
  assert.equal(info({ ProxyHealthy: [false] }).health, undefined);
});

it('the list filters on ProxyHealth', () => {
  assert.match(listQuery({ health: 'Unknown' }), /ProxyHealth = 'Unknown'/);
});
