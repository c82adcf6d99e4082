/**
 * The catalog workflow on the time-skipping test server: it keeps each worker's latest
 * publication, answers them by query, drops a withdrawn one and one gone stale, and keeps the fresh
 * ones across continue-as-new; client/catalog.ts's publish and reader against it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { catalogReader, publishCatalog, withdrawCatalog } from '../../client/catalog.ts';
import { CATALOG_FRESH_MS, catalogQuery, catalogWorkflowId } from '../../contracts/catalog.ts';
import type { CatalogPublication } from '../../contracts/catalog.ts';
import { fakeCatalog } from '../support/fake-store.ts';
import { fileEnv, TEST_TIMEOUT_MS, withWorker } from '../support/workflow-harness.ts';

const e = fileEnv();

describe('catalog workflow', () => {
  it(
    'keeps the latest publication per worker; withdraw and staleness drop them; the reader sees conflicts',
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      await withWorker(e, {}, async (taskQueue) => {
        const client = e.env.client;
        const pub = (publisher: string, images: string[], digest: string): CatalogPublication => ({
          publisher,
          publishedAt: new Date(Date.now()).toISOString(),
          catalog: fakeCatalog({ lab: images }, digest),
        });
        const h = client.workflow.getHandle(catalogWorkflowId(taskQueue));
        await publishCatalog(client, taskQueue, pub('w1', ['deb'], 'd1'));
        await publishCatalog(client, taskQueue, pub('w1', ['deb'], 'd1'));
        await publishCatalog(client, taskQueue, pub('w2', ['deb'], 'd1'));
        assert.deepEqual(
          (await h.query(catalogQuery)).map((p) => p.publisher),
          ['w1', 'w2'],
        );
        const read = catalogReader(client, { cacheMs: 0 });
        assert.equal((await read(taskQueue)).kind, 'ok');

        await publishCatalog(client, taskQueue, pub('w3', ['deb', 'alp'], 'd2'));
        const conflict = await read(taskQueue);
        assert.equal(conflict.kind, 'conflict');
        assert.match(conflict.kind === 'conflict' ? conflict.difference : '', /entry lab images/);

        await withdrawCatalog(client, taskQueue, 'w3');
        assert.deepEqual(
          (await h.query(catalogQuery)).map((p) => p.publisher),
          ['w1', 'w2'],
        );

        // A worker that stopped publishing goes stale: the query leaves it out.
        const old = {
          ...pub('w0', ['x'], 'd0'),
          publishedAt: new Date(Date.now() - CATALOG_FRESH_MS - 60_000).toISOString(),
        };
        await publishCatalog(client, taskQueue, old);
        assert.deepEqual(
          (await h.query(catalogQuery)).map((p) => p.publisher),
          ['w1', 'w2'],
        );
        await h.terminate('test over');
      });
    },
  );

  it('no workflow: the reader says none, naming the queue', { timeout: TEST_TIMEOUT_MS }, async () => {
    await withWorker(e, {}, async (taskQueue) => {
      const view = await catalogReader(e.env.client, { cacheMs: 0 })(taskQueue);
      assert.equal(view.kind, 'none');
      assert.match(view.kind === 'none' ? view.reason : '', new RegExp(`catalog/${taskQueue}`));
    });
  });
});
