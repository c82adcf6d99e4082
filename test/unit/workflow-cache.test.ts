/**
 * The worker's workflow cache option (runtime/workflow-cache.ts): the default when not given, a
 * given size taken, and a bad one (not a number, below 2, below the workflow tasks in flight) an
 * OptionError naming --max-cached-workflows and what to do.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OptionError } from '../../runtime/options.ts';
import { DEFAULT_MAX_CACHED_WORKFLOWS, workflowCacheOptions } from '../../runtime/workflow-cache.ts';

describe('workflowCacheOptions', () => {
  it('takes the default when the option is not given, with the workflow tasks as given', () => {
    assert.deepEqual(workflowCacheOptions(undefined, 40), {
      maxCachedWorkflows: DEFAULT_MAX_CACHED_WORKFLOWS,
      maxConcurrentWorkflowTaskExecutions: 40,
    });
    assert.ok(DEFAULT_MAX_CACHED_WORKFLOWS >= 40, 'the default holds the worker default --max-workflow-tasks');
  });

  it('takes a given size', () => {
    assert.deepEqual(workflowCacheOptions('1000', 40), {
      maxCachedWorkflows: 1000,
      maxConcurrentWorkflowTaskExecutions: 40,
    });
  });

  it('refuses a size that is not a whole number of at least 2, naming the option', () => {
    for (const bad of ['x', '1', '0', '-5', '2.5']) {
      assert.throws(
        () => workflowCacheOptions(bad, 1),
        (err: unknown) =>
          err instanceof OptionError && /--max-cached-workflows must be a whole number ≥ 2/.test(err.message),
        bad,
      );
    }
  });

  it('refuses a cache smaller than the workflow tasks in flight, naming both options', () => {
    assert.throws(
      () => workflowCacheOptions('20', 40),
      (err: unknown) =>
        err instanceof OptionError &&
        /--max-cached-workflows \(20\) must be at least --max-workflow-tasks \(40\)/.test(err.message),
    );
  });
});
