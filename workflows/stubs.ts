// The activity stubs the workflows call, one per option preset (activity-options.ts). The
// ensure-image workflow makes its own: its attempt bound comes with its input.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import {
  CLEANUP_ACTIVITY,
  LOCAL_READ_ACTIVITY,
  POLL_ACTIVITY,
  PROBE_ACTIVITY,
  QUICK_ACTIVITY,
  RPC_ACTIVITY,
} from './activity-options.ts';

export const quick = proxyActivities<Activities>(QUICK_ACTIVITY);
export const rpc = proxyActivities<Activities>(RPC_ACTIVITY);
export const poll = proxyActivities<Activities>(POLL_ACTIVITY);
export const probe = proxyActivities<Activities>(PROBE_ACTIVITY);
export const cleanup = proxyActivities<Activities>(CLEANUP_ACTIVITY);
/** The reads before a proxy's create, as local activities (activity-options.ts LOCAL_READ_ACTIVITY). */
export const localReads = proxyLocalActivities<Activities>(LOCAL_READ_ACTIVITY);
