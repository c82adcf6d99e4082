// What the API asks of Temporal: the `ProxyStore` interface routes are written against (a unit
// test stands in for it), and the visibility query of a list. The real store and every Temporal
// call behind it are in client/ (client/store.ts, client/proxies.ts).
export { canonicalJson, canonicalSpec } from '../client/proxies.ts';
export { listQuery } from '../client/store.ts';
export type {
  DeleteResult,
  Pollers,
  ProviderHealthView,
  ProxyStore,
  ProxySummary,
  ResizeResult,
  StartResult,
  TemporalStoreOptions,
} from '../client/store.ts';
