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
  it('a proxy run: the three reads are local activities (markers), the rest activity tasks, in order', () => {
    const got = activityResults(recorded('proxy-create-delete'));
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
    assert.equal((JSON.parse(got[0]!.result!) as { name?: string }).name, 'p1');
    assert.equal(got.at(-1)?.type, 'deleteProxyVm');
    assert.ok(
      got.slice(3).every((a) => !a.local),
      'everything after the reads is an activity task',
    );
  });
});
