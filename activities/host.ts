// Activities of a host's maintenance workflow (workflows/host.ts): whether the host is in the
// providers file, what a drain pass finds on the host (open proxy workflows there by visibility,
// and our marked domains on the host itself, so a VM whose workflow is elsewhere or gone is
// counted too), the pool's host-drain signal and a standalone proxy's move.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { listProxies } from '../lib/kvm2/index.ts';
import type { HostProxy, HostProxyListing } from '../contracts/host.ts';
import { poolHostDrainSignal } from '../contracts/messages.ts';
import { poolWorkflowId } from '../contracts/pool.ts';
import { proxiesOnHost, requestProxyMove } from '../client/hosts.ts';
import type { MoveResult } from '../client/hosts.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from '../client/connection.ts';
import { describeProxy } from '../client/proxies.ts';
import { mapped, toFailure } from './errors.ts';
import type { HostRegistry } from './hosts.ts';

export function createHostActivities(registry: HostRegistry, client: Client) {
  return {
    /** Throws (Permanent, naming the known hosts) when `host` is not a host of `entry` in the providers file. */
    async checkMaintenanceHost(input: { entry: string; host: string }): Promise<void> {
      return mapped(() => {
        registry.host(input.entry, input.host);
      });
    },

    /**
     * The proxies on the host: open proxy workflows of the entry whose `ProxyHost` is the host,
     * then each marked domain on the host not among them (a VM its workflow is moving away from,
     * or an orphan: no open workflow). A host that does not answer is reported, not thrown.
     */
    async listHostProxies(input: { entry: string; host: string }): Promise<HostProxyListing> {
      return mapped(async () => {
        const { entry, links } = registry.host(input.entry, input.host);
        const proxies: HostProxy[] = (await proxiesOnHost(client, input.entry, input.host)).map((p) =>
          p.pool === undefined ? { name: p.name } : { name: p.name, pool: p.pool },
        );
        const listed = new Set(proxies.map((p) => p.name));
        let domains;
        try {
          domains = await listProxies(
            links,
            { entry: input.entry, ownerUid: registry.ownerUid },
            { timeoutMs: entry.timeouts.rpcMs, signal: Context.current().cancellationSignal },
          );
        } catch (err) {
          const f = toFailure(err) as Error & { type?: string };
          return { proxies, hostError: `${f.type ?? 'UNCLASSIFIED'}: ${f.message}` };
        }
        for (const d of domains) {
          if (listed.has(d.proxyName)) continue;
          listed.add(d.proxyName);
          const open = (await describeProxy(client, input.entry, d.proxyName))?.execution === 'RUNNING';
          proxies.push(open ? { name: d.proxyName, elsewhere: true } : { name: d.proxyName, orphan: true });
        }
        return { proxies };
      });
    },

    /** Signals the pool `<entry>/<pool>` that `host` drains (or no longer does); false when the pool is gone. */
    async signalPoolHostDrain(input: { pool: string; host: string; draining: boolean }): Promise<boolean> {
      return mapped(async () => {
        const [entry = '', ...rest] = input.pool.split('/');
        const h = client.workflow.getHandle(poolWorkflowId(entry, rest.join('/')));
        try {
          await withDeadline(client, 'the host-drain signal', DEFAULT_CALL_TIMEOUT_MS, () =>
            h.signal(poolHostDrainSignal, { host: input.host, draining: input.draining }),
          );
          return true;
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return false;
          throw err;
        }
      });
    },

    /** Asks a standalone proxy to move off the host; a refusal (e.g. not Running) is a result. */
    async moveProxyOffHost(input: {
      entry: string;
      name: string;
      avoidHosts: string[];
      reason?: string;
    }): Promise<MoveResult> {
      return mapped(() =>
        requestProxyMove(client, input.entry, input.name, {
          avoidHosts: input.avoidHosts,
          ...(input.reason === undefined ? {} : { reason: input.reason }),
        }),
      );
    },
  };
}
