// The proxy's search attributes (contracts/search-attributes.ts names them), kept current on every
// state change so the Web UI and the API's list filter on live values.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { upsertSearchAttributes } from '@temporalio/workflow';
import {
  SA_PROVIDER_ENTRY,
  SA_PROXY_HEALTH,
  SA_PROXY_HEALTHY,
  SA_PROXY_HOST,
  SA_PROXY_STATE,
} from '../contracts/search-attributes.ts';
import type { ProxyStatus } from '../contracts/proxy.ts';

export const PROXY_STATE_KEY = defineSearchAttributeKey(SA_PROXY_STATE, SearchAttributeType.KEYWORD);
export const PROXY_HEALTHY_KEY = defineSearchAttributeKey(SA_PROXY_HEALTHY, SearchAttributeType.BOOL);
export const PROVIDER_ENTRY_KEY = defineSearchAttributeKey(SA_PROVIDER_ENTRY, SearchAttributeType.KEYWORD);
export const PROXY_HOST_KEY = defineSearchAttributeKey(SA_PROXY_HOST, SearchAttributeType.KEYWORD);
export const PROXY_HEALTH_KEY = defineSearchAttributeKey(SA_PROXY_HEALTH, SearchAttributeType.KEYWORD);

export function upsertProxySearchAttributes(st: ProxyStatus): void {
  upsertSearchAttributes([
    { key: PROXY_STATE_KEY, value: st.state },
    { key: PROXY_HEALTHY_KEY, value: st.conditions.Healthy.status === 'True' },
    { key: PROVIDER_ENTRY_KEY, value: st.entry },
    { key: PROXY_HOST_KEY, value: st.host ?? null },
    { key: PROXY_HEALTH_KEY, value: st.conditions.Healthy.status },
  ]);
}
