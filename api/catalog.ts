// Validation before start: a write names an entry, an image key and overrides the installation's
// catalog (published by its workers, client/catalog.ts) must have, or it is refused with a 422
// naming the field and the known values, and nothing starts. No catalog (no worker ran) or two
// that differ is a 503: the API never starts what it cannot validate. The workflow's own checks
// (the resolveProxy activity) stay as the second line.
import type { CatalogEntry } from '../contracts/catalog.ts';
import type { ProxySpec } from '../contracts/proxy.ts';
import { ApiError } from './errors.ts';
import type { ProxyStore } from './store.ts';

/** The catalog entry `entry` of the task queue's workers; throws the 503 or 422 that says why not. */
export async function catalogEntry(
  store: ProxyStore,
  taskQueue: string,
  entry: string,
  field = 'entry',
): Promise<CatalogEntry> {
  const view = await store.catalog(taskQueue);
  if (view.kind === 'none') {
    throw new ApiError(
      'CATALOG_UNAVAILABLE',
      `the API cannot validate the request: ${view.reason}; start a worker on task queue ${taskQueue} (it publishes its providers file's catalog) and retry`,
    );
  }
  if (view.kind === 'conflict') {
    throw new ApiError(
      'CATALOG_CONFLICT',
      `${view.difference}; give every worker of ${taskQueue} the same providers file`,
    );
  }
  const found = view.catalog.entries.find((e) => e.name === entry);
  if (found === undefined) {
    const known = view.catalog.entries.map((e) => e.name).join(', ') || '(none)';
    throw new ApiError(
      'UNKNOWN_ENTRY',
      `${field} ${entry} is not an entry of the providers file (known: ${known})`,
      field,
    );
  }
  return found;
}

/** The image key `key` of `entry`, or the 422 naming `field` and the known keys. */
export function checkImage(entry: CatalogEntry, key: string, field: string): void {
  if (entry.images.includes(key)) return;
  throw new ApiError(
    'UNKNOWN_IMAGE',
    `${field} ${key} is not an image of entry ${entry.name} (known: ${entry.images.join(', ')})`,
    field,
  );
}

/**
 * A proxy spec the catalog can serve: entry, image key, Squid overrides the entry allows. `prefix`
 * goes before the fields an error names (a pool's template: `template.`).
 */
export async function checkSpec(
  store: ProxyStore,
  taskQueue: string,
  spec: ProxySpec,
  prefix = '',
): Promise<CatalogEntry> {
  const entry = await catalogEntry(store, taskQueue, spec.entry);
  checkImage(entry, spec.imageKey, `${prefix}imageKey`);
  for (const field of Object.keys(spec.squid ?? {})) {
    if (!(entry.squidOverrides as string[]).includes(field)) {
      throw new ApiError(
        'OVERRIDE_REFUSED',
        `entry ${entry.name} does not allow overriding ${prefix}squid.${field} (allowed: ${entry.squidOverrides.join(', ') || 'none'})`,
        `${prefix}squid.${field}`,
      );
    }
  }
  return entry;
}
