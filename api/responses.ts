// The bodies the API answers with (docs/api.md), as types for its clients (egressctl). Built from
// the types the routes return, so a route that changes what it sends changes these too. Types
// only: importing this file loads nothing.
import type { PoolStatus } from '../contracts/pool.ts';
import type { DeleteAccepted, ProxyOutcome, ProxyStatus } from '../contracts/proxy.ts';
import type { GetHostResponse, HostActionResponse, ListHostsResponse } from './routes-hosts.ts';
import type { WarmView } from './routes-images.ts';
import type { DiscoveredProxy, PoolDiscovery } from './routes-ops.ts';
import type { PoolSummary, ProxySummary } from './store.ts';

export type { DiscoveredProxy, PoolStatus, PoolSummary, ProxySummary, WarmView };
/** `GET /v1/hosts`, `GET /v1/hosts/{entry}/{host}`, `POST .../cordon|drain|uncordon` (api/routes-hosts.ts). */
export type { GetHostResponse, HostActionResponse, ListHostsResponse };

/** Every 4xx and 5xx (api/schemas.ts errorSchema). */
export interface ErrorResponse {
  error: { code: string; message: string; field?: string };
}

/** `POST /v1/proxies`: 201 with created true, or 200 with the proxy that has the same spec. */
export interface CreateProxyResponse {
  created: boolean;
  proxy: ProxySummary;
}

/** `GET /v1/proxies`. */
export interface ListProxiesResponse {
  proxies: ProxySummary[];
  /** Present when there is another page: pass it back as pageToken with the same filters. */
  nextPageToken?: string;
}

/** `GET /v1/proxies/{entry}/{name}`: the workflow and its status query, or why the query failed. */
export type GetProxyResponse =
  | { proxy: ProxySummary; status: ProxyStatus; statusError?: undefined }
  | { proxy: ProxySummary; status?: undefined; statusError: string };

/** `DELETE /v1/proxies/{entry}/{name}`. */
export type DeleteProxyResponse =
  /** 200: the workflow had already ended (or was finishing its delete). */
  | { done: true; state: string; proxy: ProxySummary; fromState?: undefined }
  /** 202: accepted; without ?wait=true, or still deleting at the bound (then `message` says so). */
  | (DeleteAccepted & { workflowId: string; done: false; message?: string; state?: undefined })
  /** 200 with ?wait=true: the workflow ended. */
  | (DeleteAccepted & { workflowId: string; done: true; state: ProxyOutcome['state']; outcome: ProxyOutcome });

/** `POST /v1/proxies/{entry}/{name}/resize`: 200 applied (the new status), 202 still applying at the bound. */
export type ResizeProxyResponse = { done: true; status: ProxyStatus } | { done: false; message: string };

/** `POST /v1/images/{entry}/{key}/warm`: 202 Running when started without ?wait=true, else the warm's view. */
export type WarmResponse = WarmView | { workflowId: string; runId: string; state: 'Running' };

/** `GET /v1/discovery`. */
export interface DiscoveryResponse {
  proxies: DiscoveredProxy[];
  /** Listed as healthy but their status query failed: left out. */
  skipped: number;
}

/** `GET /v1/discovery?pool=<entry>/<pool>` (the ETag is a header; 304 has no body). */
export type PoolDiscoveryResponse = Omit<PoolDiscovery, 'etag'>;

/** `POST /v1/pools`: 201 with created true, or 200 with the pool that has the same spec. */
export interface CreatePoolResponse {
  created: boolean;
  pool: PoolSummary;
}

/** `GET /v1/pools`. */
export interface ListPoolsResponse {
  pools: PoolSummary[];
  nextPageToken?: string;
}

/** `GET /v1/pools/{entry}/{pool}`: the workflow and its status query, or why the query failed. */
export type GetPoolResponse =
  | { pool: PoolSummary; status: PoolStatus; statusError?: undefined }
  | { pool: PoolSummary; status?: undefined; statusError: string };

/** `PATCH /v1/pools/{entry}/{pool}` and `POST .../scale|pause|resume|rollback`: the status after it. */
export interface PoolUpdateResponse {
  status: PoolStatus;
}

/** `DELETE /v1/pools/{entry}/{pool}`. */
export type DeletePoolResponse =
  /** 200: the pool had already ended. */
  | { done: true; pool: PoolSummary; status?: undefined }
  /** 202: accepted (members are being deleted); or 200 with ?wait=true once the pool ended (its last status). */
  | { accepted: true; workflowId: string; done: boolean; status: PoolStatus; message?: string; pool?: undefined };
