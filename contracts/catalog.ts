// The installation's catalog as the workers publish it for the API: which entries exist, their
// image keys, VM defaults and limits, and which Squid overrides each entry allows. The API may not
// read the providers file (its import zone), so each worker, at start-up and then every
// CATALOG_REPUBLISH_MS, signals its catalog (with a digest of its providers file) to the
// long-lived `catalog/<taskQueue>` workflow; the API reads it with the `catalog` query, keeps it a
// short while, and refuses writes when two fresh publications disagree (docs/api.md, "Catalog").
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { VmSize } from './proxy.ts';

export const CATALOG_WORKFLOW_TYPE = 'catalogWorkflow';

/** `catalog/<taskQueue>`: one per task queue (the workers of one queue share one providers file). */
export function catalogWorkflowId(taskQueue: string): string {
  return `catalog/${taskQueue}`;
}

/** A worker republishes this often, in ms. */
export const CATALOG_REPUBLISH_MS = 60_000;
/** A publication older than this is a worker that went away: left out, in ms. */
export const CATALOG_FRESH_MS = 3 * CATALOG_REPUBLISH_MS;
/** The workflow continues as new after this many publications. */
export const CATALOG_SIGNALS_PER_RUN = 500;

/** The Squid fields a request may override. */
export type SquidOverrideField = 'port' | 'allowedClientCidrs';

export interface CatalogEntry {
  name: string;
  /** The entry's image keys, sorted. */
  images: string[];
  /** The VM size a request's omitted fields take. */
  vm: Required<VmSize>;
  /** The Squid fields a request may override (the whole proxy spec's `squid`). */
  squidOverrides: SquidOverrideField[];
  /** Whether allowedClientCidrs may admit every address (the file's allowOpenProxy). */
  allowOpenProxy: boolean;
}

export interface Catalog {
  /** SHA-256 of the providers file the worker read, hex. */
  digest: string;
  /** Sorted by name. */
  entries: CatalogEntry[];
}

export interface CatalogPublication {
  /** The worker's identity (host and pid). */
  publisher: string;
  /** When it published, ISO 8601. */
  publishedAt: string;
  catalog: Catalog;
}

export interface CatalogWorkflowInput {
  publications: CatalogPublication[];
}

/** A worker's catalog; replaces the same publisher's earlier one. */
export const catalogPublishSignal = defineSignal<[CatalogPublication]>('publish');
/** A worker stops: its publication goes. */
export const catalogWithdrawSignal = defineSignal<[string]>('withdraw');
/** The fresh publications. */
export const catalogQuery = defineQuery<CatalogPublication[]>('catalog');
