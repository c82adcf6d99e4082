// Custom search attributes of this project: the fields the API filters proxies on (docs/design.md).
// Plain constants only, no imports: workflows, activities, the API and the client all read this
// one list. client/search-attributes.ts registers each entry (the worker does it before it polls,
// on the dev server and a production cluster alike; see docs/temporal.md).

/** A search attribute's type, spelled as the Temporal CLI's `--search-attribute` flag spells it. */
export type SearchAttributeKind = 'Text' | 'Keyword' | 'Int' | 'Double' | 'Bool' | 'Datetime' | 'KeywordList';

/** The proxy's lifecycle state (e.g. `Provisioning`, `Running`, `Deleting`). */
export const SA_PROXY_STATE = 'ProxyState';
/**
 * Whether the last health checks through the proxy passed (a Bool: a proxy whose Healthy condition
 * is Unknown, e.g. booting, reads false). Kept for runs before ProxyHealth and for filters.
 */
export const SA_PROXY_HEALTHY = 'ProxyHealthy';
/** The proxy's Healthy condition as `True`, `False` or `Unknown`: what `proxy get` shows too. */
export const SA_PROXY_HEALTH = 'ProxyHealth';
/** The provider entry (configured libvirt host group and image set) the proxy belongs to. */
export const SA_PROVIDER_ENTRY = 'ProviderEntry';
/** The libvirt host that runs the proxy's VM. */
export const SA_PROXY_HOST = 'ProxyHost';

/** The pool (`<entry>/<pool>`) a proxy is a member of, and the pool workflow's own. */
export const SA_PROXY_POOL = 'ProxyPool';

/** Every custom search attribute with its kind. The single source for registration. */
export const CUSTOM_SEARCH_ATTRIBUTES = {
  [SA_PROXY_STATE]: 'Keyword',
  [SA_PROXY_HEALTHY]: 'Bool',
  [SA_PROXY_HEALTH]: 'Keyword',
  [SA_PROVIDER_ENTRY]: 'Keyword',
  [SA_PROXY_HOST]: 'Keyword',
  [SA_PROXY_POOL]: 'Keyword',
} as const satisfies Record<string, SearchAttributeKind>;

export type CustomSearchAttributeName = keyof typeof CUSTOM_SEARCH_ATTRIBUTES;
