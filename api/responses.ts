// The bodies the API answers with (docs/api.md), as types for its clients (egressctl). Built from
// the types the routes return, so a route that changes what it sends changes these too. Types
// only: importing this file loads nothing.
import type { DeleteAccepted, ProxyOutcome, ProxyStatus } from '../contracts/proxy.ts';
import type { WarmView } from './routes-images.ts';
import type { DiscoveredProxy } from './routes-ops.ts';
import type { ProxySummary } from './store.ts';

export type { DiscoveredProxy, ProxySummary, WarmView };

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
