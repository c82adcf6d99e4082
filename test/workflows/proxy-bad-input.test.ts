/**
 * A proxy spec the worker cannot resolve, on the time-skipping test server with fake activities:
 * Failed at once with the field named, nothing surveyed, created or deleted.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { ProxySpecError, toFailure } from '../../activities/errors.ts';
import {
  failureOf,
  Fakes,
  searchAttributes,
  fileEnv,
  status,
  TEST_TIMEOUT_MS,
  withProxy,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };

describe('proxy bad input', () => {
  it(
    'bad input: resolveProxy fails with PROXY_SPEC_INVALID naming imageKey → Failed at once, nothing created',
    opts,
    async () => {
      const f = new Fakes(e);
      f.resolve = () => {
        throw toFailure(new ProxySpecError('imageKey', 'entry e1 has no image "nope" (known: img)'));
      };
      await withProxy(e, f, async ({ handle: h }) => {
        const err = await failureOf(h.result());
        assert.ok(err.cause instanceof ApplicationFailure);
        assert.equal(err.cause.type, 'PROXY_SPEC_INVALID');
        assert.equal(err.cause.nonRetryable, true);
        assert.match(err.cause.message, /imageKey: entry e1 has no image "nope"/);
        assert.deepEqual(f.sequence(), ['resolveProxy'], 'one attempt, then nothing: no survey, create or delete');
        const s = await status(h);
        assert.equal(s.state, 'Failed');
        assert.equal(s.host, undefined);
        assert.deepEqual(
          { kind: s.lastError?.kind, code: s.lastError?.code },
          { kind: 'Permanent', code: 'PROXY_SPEC_INVALID' },
        );
        assert.equal((await searchAttributes(h))['ProxyState'], 'Failed');
      });
    },
  );
});
