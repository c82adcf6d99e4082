/**
 * The fleet workflows on the time-skipping test server with fake activities: orphan GC deletes
 * only our marked domains that are old enough and whose proxy has no open workflow, and reports
 * kept, deleted and refused per host; then volume sets without a domain by the same rules;
 * provider health reports every entry's hosts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ListedProxy } from '../../lib/kvm2/index.ts';
import { GC_WORKFLOW_TYPE, HEALTH_WORKFLOW_TYPE } from '../../contracts/fleet.ts';
import { gcResultQuery } from '../../contracts/messages.ts';
import type { GcResult, OrphanVolumeSet, ProviderHealthResult } from '../../contracts/fleet.ts';
import type { orphanGcWorkflow, providerHealthWorkflow } from '../../workflows/fleet.ts';
import { uniqueId } from '../support/temporal.ts';
import {
  ENTRY,
  Fakes,
  HOUR_MS,
  TEST_TIMEOUT_MS,
  failure,
  fullSurvey,
  roomySurvey,
  fileEnv,
  withWorker,
} from '../support/workflow-harness.ts';

const e = fileEnv();

const opts = { timeout: TEST_TIMEOUT_MS };
/** The volume activities of the GC with nothing to collect (tests about domains). */
const noOrphanVolumes = {
  listOrphanVolumes: () => Promise.resolve([]),
  deleteOrphanVolumes: () => Promise.resolve([]),
};
const MIN_AGE_MS = HOUR_MS;

function domain(host: string, name: string, createdAtMs: number): ListedProxy {
  return {
    domain: `ep-${ENTRY}-${name}`,
    uuid: `00000000-0000-4000-8000-${host.padStart(12, '0')}`,
    proxyName: name,
    ownerUid: 'owner-test',
    providerEntry: ENTRY,
    createdAt: new Date(createdAtMs).toISOString(),
  };
}

describe('orphan GC', () => {
  it('deletes only old domains without an open workflow; kept, deleted, refused per host', opts, async () => {
    const f = new Fakes(e);
    let onH1: ListedProxy[] = [];
    let onH2: ListedProxy[] = [];
    const open = new Set(['old-with-workflow', 'young-with-workflow']);
    f.hosts = () => [
      { entry: ENTRY, host: 'h1' },
      { entry: ENTRY, host: 'h2' },
      { entry: 'e2', host: 'h3' },
    ];
    f.marked = ({ host }) => {
      if (host === 'h3') throw failure('SSH_AUTH_FAILED', 'Permanent', 'authentication failed for h3');
      return host === 'h1' ? onH1 : onH2;
    };
    f.open = ({ name }) => open.has(name);
    f.deleteOrphan = ({ name }) => {
      if (name === 'guarded') throw failure('KVM2_ADOPTION_REFUSED', 'Permanent', 'the domain carries another owner');
      return { domain: 'deleted', overlay: 'deleted', seed: 'deleted' };
    };
    await withWorker(e, { ...f.activities(), ...noOrphanVolumes }, async (tq) => {
      // Ages relative to this test's server clock.
      const now = await e.env.currentTimeMs();
      const old = now - 2 * MIN_AGE_MS;
      onH1 = [
        domain('h1', 'old-orphan', old),
        domain('h1', 'old-with-workflow', old),
        domain('h1', 'young-orphan', now - MIN_AGE_MS + 60_000), // one minute short of the minimum age
        domain('h1', 'young-with-workflow', now - 60_000),
        domain('h1', 'at-min-age', now - MIN_AGE_MS), // exactly the minimum age: old enough
        domain('h1', 'guarded', old), // the adoption guard refuses it
      ];
      // A mark whose time cannot be read is kept (never deleted on a guess).
      onH2 = [domain('h2', 'old-orphan-2', old - 24 * HOUR_MS), { ...domain('h2', 'bad-date', old), createdAt: 'x' }];
      const handle = await e.env.client.workflow.start<typeof orphanGcWorkflow>(GC_WORKFLOW_TYPE, {
        taskQueue: tq,
        workflowId: uniqueId('gc'),
        args: [{ minAgeMs: MIN_AGE_MS }],
      });
      const result: GcResult = await handle.result();
      assert.equal(result.minAgeMs, MIN_AGE_MS);
      assert.deepEqual(result.hosts, [
        {
          entry: ENTRY,
          host: 'h1',
          kept: ['ep-e1-old-with-workflow', 'ep-e1-young-orphan', 'ep-e1-young-with-workflow'],
          deleted: ['ep-e1-old-orphan', 'ep-e1-at-min-age'],
          refused: ['ep-e1-guarded'],
          volumes: { kept: [], deleted: [] },
        },
        {
          entry: ENTRY,
          host: 'h2',
          kept: ['ep-e1-bad-date'],
          deleted: ['ep-e1-old-orphan-2'],
          refused: [],
          volumes: { kept: [], deleted: [] },
        },
        {
          entry: 'e2',
          host: 'h3',
          kept: [],
          deleted: [],
          refused: [],
          error: 'SSH_AUTH_FAILED: authentication failed for h3',
        },
      ]);
      assert.deepEqual(
        f
          .of<{ entry: string; host: string; name: string }>('deleteOrphan')
          .map((d) => `${d.entry}/${d.host}/${d.name}`),
        ['e1/h1/old-orphan', 'e1/h1/at-min-age', 'e1/h1/guarded', 'e1/h2/old-orphan-2'],
      );
      // Young domains are kept without asking Temporal about their workflow.
      const asked = f.of<{ name: string }>('proxyWorkflowOpen').map((q) => q.name);
      assert.ok(!asked.includes('young-orphan') && !asked.includes('young-with-workflow'), asked.join(','));
      assert.deepEqual(await handle.query(gcResultQuery), result, 'the result is queryable');
    });
  });
});

describe('orphan GC of volumes without a domain', () => {
  it('deletes old owner-recorded volume sets whose workflow is not open; keeps young and open ones', opts, async () => {
    const f = new Fakes(e);
    f.hosts = () => [{ entry: ENTRY, host: 'h1' }];
    const open = new Set(['old-open']);
    f.open = ({ name }) => open.has(name);
    let sets: OrphanVolumeSet[] = [];
    const deletes: { name: string; createdAt: string }[] = [];
    const volumeFakes = {
      listOrphanVolumes: () => Promise.resolve(sets),
      deleteOrphanVolumes: (input: { entry: string; host: string; name: string; createdAt: string }) => {
        deletes.push({ name: input.name, createdAt: input.createdAt });
        // The activity re-checks and found the set changed meanwhile: nothing deleted.
        return Promise.resolve(input.name === 'changed' ? [] : [`ep_${ENTRY}_${input.name}.qcow2`]);
      },
    };
    await withWorker(e, { ...f.activities(), ...volumeFakes }, async (tq) => {
      const now = await e.env.currentTimeMs();
      const set = (name: string, atMs: number): OrphanVolumeSet => ({
        name,
        createdAt: new Date(atMs).toISOString(),
        volumes: [`ep_${ENTRY}_${name}.owner`, `ep_${ENTRY}_${name}.qcow2`, `ep_${ENTRY}_${name}.seed.iso`],
      });
      sets = [
        set('old', now - 2 * MIN_AGE_MS),
        set('old-open', now - 2 * MIN_AGE_MS),
        set('young', now - 60_000),
        set('changed', now - 2 * MIN_AGE_MS),
        { ...set('bad-date', now), createdAt: 'x' },
      ];
      const result: GcResult = await e.env.client.workflow.execute<typeof orphanGcWorkflow>(GC_WORKFLOW_TYPE, {
        taskQueue: tq,
        workflowId: uniqueId('gc-volumes'),
        args: [{ minAgeMs: MIN_AGE_MS }],
      });
      assert.deepEqual(result.hosts[0]!.volumes, {
        kept: ['old-open', 'young', 'changed', 'bad-date'],
        deleted: ['old'],
      });
      assert.deepEqual(
        deletes.map((d) => d.name),
        ['old', 'changed'],
        'only old sets without an open workflow are deleted, with the createdAt listed',
      );
      assert.equal(deletes[0]!.createdAt, sets[0]!.createdAt);
      const asked = f.of<{ name: string }>('proxyWorkflowOpen').map((q) => q.name);
      assert.ok(!asked.includes('young'), asked.join(','));
    });
  });
});

describe('provider health', () => {
  it('surveys every entry once and reports Ready n/m with the hosts', opts, async () => {
    const f = new Fakes(e);
    f.hosts = () => [
      { entry: ENTRY, host: 'h1' },
      { entry: ENTRY, host: 'h2' },
      { entry: 'e2', host: 'h3' },
    ];
    f.survey = ({ entry }) =>
      entry === ENTRY
        ? roomySurvey()
        : [{ ...fullSurvey()[0]!, entry: 'e2', host: 'h3', reachable: false, error: 'SSH_CONNECT: refused' }];
    await withWorker(e, f.activities(), async (tq) => {
      const handle = await e.env.client.workflow.start<typeof providerHealthWorkflow>(HEALTH_WORKFLOW_TYPE, {
        taskQueue: tq,
        workflowId: uniqueId('health'),
      });
      const result: ProviderHealthResult = await handle.result();
      assert.deepEqual(
        result.entries.map((x) => [x.entry, x.ready, x.total]),
        [
          [ENTRY, 2, 2],
          ['e2', 0, 1],
        ],
      );
      assert.deepEqual(result.entries[0]!.hosts, roomySurvey());
      assert.deepEqual(
        f.of<{ entry: string }>('surveyHosts').map((s) => s.entry),
        [ENTRY, 'e2'],
      );
    });
  });
});
