// What the API asks of Temporal: the `ProxyStore` and `PoolStore` interfaces routes are written
// against (a unit test stands in for them), and the visibility query of a list. The real store and every Temporal
// call behind it are in client/ (client/store.ts, client/proxies.ts, client/pools.ts).
export { canonicalJson } from '../contracts/canonical-json.ts';
export { canonicalSpec } from '../client/proxies.ts';
export { listQuery } from '../client/store.ts';
export { poolListQuery } from '../client/pools.ts';
export type {
  PoolDeleteResult,
  PoolStore,
  PoolSummary,
  PoolUpdate,
  PoolUpdateResult,
  StartPoolResult,
} from '../client/pools.ts';
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
