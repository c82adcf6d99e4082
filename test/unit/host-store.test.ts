/**
 * The host store's pure parts (client/host-store.ts): a survey still running (it surveys entry by
 * entry) is completed with the entries of the last complete run, each host keeping the time of
 * the run it comes from; the known hosts are the survey's and the open workflows', once each and
 * sorted; a HostView of a host never surveyed has no survey field; host workflow IDs and the
 * visibility query of the open ones.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  hostOfWorkflowId,
  hostView,
  knownHostsOf,
  openHostsQuery,
  surveyOf,
  surveysOf,
} from '../../client/host-store.ts';
import { schedulableHost } from '../../client/hosts.ts';
import type { ProviderHealthResult } from '../../contracts/fleet.ts';
import { fakeSurvey } from '../support/fake-hosts.ts';

const result = (at: string, entries: Record<string, string[]>): ProviderHealthResult => ({
  at,
  entries: Object.entries(entries).map(([entry, hosts]) => ({
    entry,
    ready: hosts.length,
    total: hosts.length,
    hosts: hosts.map((h) => fakeSurvey(entry, h)),
  })),
});

describe('host store', () => {
  const complete = result('2026-12-01T10:00:00.000Z', { lab: ['h1', 'h2'], edge: ['e1'] });
  const partial = result('2026-12-01T10:05:00.000Z', { edge: ['e1'] });

  it('a running survey keeps the hosts of the entries it has not reached from the last complete one', () => {
    const s = surveysOf({ result: partial, running: true }, complete);
    assert.equal(s.at, partial.at);
    assert.deepEqual(
      knownHostsOf(s, []).hosts.map((h) => `${h.entry}/${h.host}`),
      ['edge/e1', 'lab/h1', 'lab/h2'],
    );
    assert.equal(surveyOf(s, 'edge', 'e1')?.at, partial.at, 'surveyed by the running one');
    assert.equal(surveyOf(s, 'lab', 'h2')?.at, complete.at, 'from the last complete one');
    // Without a complete one to fill in from, the partial one is all there is.
    assert.deepEqual(
      knownHostsOf(surveysOf({ result: partial, running: true }, undefined), []).hosts.map((h) => h.host),
      ['e1'],
    );
    // A complete survey stands alone: a host no longer in it is gone.
    const after = surveysOf({ result: partial, running: false }, complete);
    assert.equal(surveyOf(after, 'lab', 'h1'), undefined);
  });

  it('known hosts: the survey and the open workflows, once each, sorted; surveyedAt only with a survey', () => {
    const s = surveysOf({ result: complete, running: false }, undefined);
    const k = knownHostsOf(s, [
      { entry: 'lab', host: 'h1' },
      { entry: 'lab', host: 'h0' },
    ]);
    assert.deepEqual(
      k.hosts.map((h) => `${h.entry}/${h.host}`),
      ['edge/e1', 'lab/h0', 'lab/h1', 'lab/h2'],
    );
    assert.equal(k.surveyedAt, complete.at);
    assert.deepEqual(knownHostsOf(undefined, [{ entry: 'lab', host: 'h0' }]), {
      hosts: [{ entry: 'lab', host: 'h0' }],
    });
  });

  it('a HostView: survey fields from the survey line, none for a host never surveyed', () => {
    const s = surveysOf({ result: complete, running: false }, undefined);
    const cordoned = { ...schedulableHost('lab', 'h1'), phase: 'Cordoned' as const, cordoned: true, reason: 'disk' };
    assert.deepEqual(hostView(cordoned, surveyOf(s, 'lab', 'h1'), 4), {
      entry: 'lab',
      host: 'h1',
      phase: 'Cordoned',
      cordoned: true,
      reason: 'disk',
      reachable: true,
      surveyedAt: complete.at,
      memoryTotalMiB: 4096,
      memoryFreeMiB: 2048,
      cpus: 4,
      proxies: 4,
    });
    assert.deepEqual(hostView(schedulableHost('lab', 'h9'), surveyOf(s, 'lab', 'h9'), 0), {
      entry: 'lab',
      host: 'h9',
      phase: 'Schedulable',
      cordoned: false,
      proxies: 0,
    });
  });

  it('host workflow IDs and the query of the open ones', () => {
    assert.deepEqual(hostOfWorkflowId('host/lab/hv1'), { entry: 'lab', host: 'hv1' });
    assert.equal(hostOfWorkflowId('pool/lab/crawl/x'), undefined);
    assert.equal(hostOfWorkflowId('host/lab'), undefined);
    assert.equal(openHostsQuery(), "WorkflowType = 'hostWorkflow' AND ExecutionStatus = 'Running'");
    assert.equal(
      openHostsQuery("q'1"),
      "WorkflowType = 'hostWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = 'q\\'1'",
    );
  });
});
