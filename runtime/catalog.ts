// The worker's side of the catalog (contracts/catalog.ts): what the providers file offers a
// request, and the publisher that signals it at start-up, every CATALOG_REPUBLISH_MS, and
// withdraws it at shutdown.
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import type { Client } from '@temporalio/client';
import { publishCatalog, withdrawCatalog } from '../client/catalog.ts';
import { canonicalJson } from '../contracts/canonical-json.ts';
import { CATALOG_REPUBLISH_MS } from '../contracts/catalog.ts';
import type { Catalog, CatalogPublication } from '../contracts/catalog.ts';
import type { ProvidersConfig } from '../lib/config/index.ts';

/** The catalog of a providers file; its digest is of the whole parsed file (keys sorted, defaults applied). */
export function catalogOf(config: ProvidersConfig): Catalog {
  return {
    digest: createHash('sha256').update(canonicalJson(config)).digest('hex'),
    entries: config.providers
      .map((e) => ({
        name: e.name,
        images: Object.keys(e.images).sort(),
        vm: { vcpus: e.vm.vcpus, memoryMiB: e.vm.memoryMiB, diskGiB: e.vm.diskGiB },
        squidOverrides: ['allowedClientCidrs' as const, 'port' as const],
        allowOpenProxy: config.allowOpenProxy,
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
}

interface Log {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * Publishes `catalog` now (a failure is thrown: the worker does not start without it), then every
 * `everyMs`; stop() withdraws it.
 */
export async function startCatalogPublisher(
  client: Client,
  taskQueue: string,
  catalog: Catalog,
  log: Log,
  everyMs = CATALOG_REPUBLISH_MS,
): Promise<{ publisher: string; stop(): Promise<void> }> {
  const publisher = `${hostname()}:${process.pid}`;
  const publication = (): CatalogPublication => ({ publisher, publishedAt: new Date().toISOString(), catalog });
  await publishCatalog(client, taskQueue, publication());
  log.info({ taskQueue, digest: catalog.digest, entries: catalog.entries.length }, 'catalog published');
  const timer = setInterval(() => {
    publishCatalog(client, taskQueue, publication()).catch((err: unknown) =>
      log.warn({ err, taskQueue }, 'catalog not republished; retrying at the next interval'),
    );
  }, everyMs);
  timer.unref();
  return {
    publisher,
    async stop() {
      clearInterval(timer);
      await withdrawCatalog(client, taskQueue, publisher).catch((err: unknown) =>
        log.warn({ err, taskQueue }, 'catalog not withdrawn; it goes stale in 3 minutes'),
      );
    },
  };
}
