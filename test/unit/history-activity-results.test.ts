// activityResults (test/support/temporal.ts), which the e2e validation's cache-hit check reads:
// on recorded histories, it finds activity tasks and local activities (core_local_activity
// markers) alike, with their types, in order, and their JSON results.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { activityResults, PROJECT_ROOT } from '../support/temporal.ts';

const recorded = (name: string): Parameters<typeof activityResults>[0] =>
  historyFromJSON(JSON.parse(readFileSync(join(PROJECT_ROOT, 'test/replay', `${name}.sdk-1.24.0.json`), 'utf8')));

describe('activityResults: the completed activities of a history', () => {
  it('a run from the local-reads patch on: the three reads are local, the rest activity tasks', () => {
    const got = activityResults(recorded('proxy-local-reads'));
    assert.deepEqual(
      got.slice(0, 5).map((a) => [a.type, a.local]),
      [
        ['resolveProxy', true],
        ['surveyHosts', true],
        ['findBaseImage', true],
        ['joinImage', false],
        ['createProxyVm', false],
      ],
    );
    assert.equal(got.find((a) => a.type === 'findBaseImage')?.result, 'null', 'a miss: the image was joined');
    assert.equal((JSON.parse(got[0]!.result!) as { ownerUid?: string }).ownerUid, 'owner-test');
  });

  it('a run from before it: every read is an activity task, none local', () => {
    const got = activityResults(recorded('proxy-monitor-loop'));
    assert.deepEqual(
      got.slice(0, 3).map((a) => [a.type, a.local]),
      [
        ['resolveProxy', false],
        ['surveyHosts', false],
        ['findBaseImage', false],
      ],
    );
    assert.ok(
      got.some((a) => a.type === 'readProxyVm'),
      'the boot poll before created-runs',
    );
    assert.ok(got.every((a) => !a.local));
  });
});
