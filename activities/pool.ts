// Activities of the pool workflow: starting a member (a proxy workflow that reports to the pool),
// asking a member to delete itself, and listing the pool's open members (the pool's audit).
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { PoolTemplate } from '../contracts/pool.ts';
import { CODES } from '../contracts/errors.ts';
import { requestProxyDelete, sameSpec, startProxy } from '../client/proxies.ts';
import { listQuery } from '../client/store.ts';
import type { ProxySpec } from '../contracts/proxy.ts';
import { mapped } from './errors.ts';

export interface StartMemberInput {
  /** The pool workflow's ID (the member reports there). */
  pool: string;
  poolName: string;
  entry: string;
  name: string;
  template: PoolTemplate;
  ownerUid?: string;
  avoidHosts: string[];
  /** The pool's staying members per host (the member prefers the fewest). */
  hostCounts: Record<string, number>;
  /** The member's place among those created in one pass (they spread over the hosts tied for fewest). */
  spreadSlot?: number;
  maxPerHost?: number;
}

export function createPoolActivities(client: Client, taskQueue: string) {
  return {
    /** Starts a member's proxy workflow; a run already open with the same spec is that member. */
    async startPoolMember(input: StartMemberInput): Promise<{ started: boolean }> {
      return mapped(async () => {
        const spec: ProxySpec = { name: input.name, entry: input.entry, ...input.template };
        const result = await startProxy(client, spec, {
          taskQueue,
          pool: `${input.entry}/${input.poolName}`,
          staticSummary: `pool ${input.entry}/${input.poolName} member ${input.name} (${input.template.imageKey})`,
          extra: {
            ...(input.ownerUid === undefined ? {} : { ownerUid: input.ownerUid }),
            pool: {
              workflowId: input.pool,
              serving: false,
              avoidHosts: input.avoidHosts,
              hostCounts: input.hostCounts,
              ...(input.spreadSlot === undefined ? {} : { spreadSlot: input.spreadSlot }),
              ...(input.maxPerHost === undefined ? {} : { maxPerHost: input.maxPerHost }),
            },
          },
        });
        if (!result.started && !sameSpec(result, spec)) {
          throw ApplicationFailure.create({
            type: CODES.poolMemberConflict,
            message: `proxy ${input.entry}/${input.name} exists with another spec`,
            nonRetryable: true,
          });
        }
        return { started: result.started };
      });
    },

    /** Asks a member to delete itself (accepted, or already ended or gone: done either way). */
    async deletePoolMember(input: { entry: string; name: string }): Promise<string> {
      return mapped(async () => {
        const r = await requestProxyDelete(client, input.entry, input.name);
        return r === undefined ? 'absent' : r.kind;
      });
    },

    /** Names of the pool's members whose workflow is open. */
    async listPoolMembers(input: { entry: string; pool: string }): Promise<string[]> {
      return mapped(async () => {
        const names: string[] = [];
        const query = listQuery({ pool: `${input.entry}/${input.pool}`, openOnly: true });
        for await (const wf of client.workflow.list({ query })) {
          names.push(wf.workflowId.split('/').slice(2).join('/'));
          if (names.length > 10_000) break;
        }
        return names;
      });
    },
  };
}
