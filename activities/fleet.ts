// Activities of the fleet-wide workflows: listing our marked domains on a host, asking Temporal
// whether a proxy's workflow is open, deleting an orphan (behind the adoption guard), and listing
// and deleting per-proxy volumes left without a domain (only those with our owner record).
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { deleteOrphanVolumes, deleteProxy, listOrphanVolumes, listProxies } from '../lib/kvm2/index.ts';
import type { OrphanVolumeSet } from '../contracts/fleet.ts';
import type { DeletedProxy, ListedProxy } from '../lib/kvm2/index.ts';
import { describeProxy } from '../client/proxies.ts';
import { mapped } from './errors.ts';
import type { HostRegistry } from './hosts.ts';

export function createFleetActivities(registry: HostRegistry, client: Client) {
  return {
    /** Hosts of every entry, for the fleet workflows to iterate over. */
    async listHosts(): Promise<{ entry: string; host: string }[]> {
      return Promise.resolve(
        registry.config.providers.flatMap((e) => e.hosts.map((h) => ({ entry: e.name, host: h.name }))),
      );
    },

    /** Domains on the host that carry this installation's mark for `entry` (never anyone else's). */
    async listMarkedDomains(input: { entry: string; host: string }): Promise<ListedProxy[]> {
      return mapped(async () => {
        const { entry, links } = registry.host(input.entry, input.host);
        return listProxies(
          links,
          { entry: input.entry, ownerUid: registry.ownerUid },
          { timeoutMs: entry.timeouts.rpcMs, signal: Context.current().cancellationSignal },
        );
      });
    },

    /** Whether the proxy's lifecycle workflow is open (running) on this namespace. */
    async proxyWorkflowOpen(input: { entry: string; name: string }): Promise<boolean> {
      return mapped(async () => (await describeProxy(client, input.entry, input.name))?.execution === 'RUNNING');
    },

    /** Deletes an orphaned proxy VM; the adoption guard refuses anything not ours. */
    async deleteOrphan(input: { entry: string; host: string; name: string }): Promise<DeletedProxy> {
      return mapped(async () => {
        const { entry, links } = registry.host(input.entry, input.host);
        return deleteProxy({
          ownerUid: registry.ownerUid,
          entry: input.entry,
          name: input.name,
          links,
          pool: entry.storagePool,
          shutdownGraceMs: 0,
          rpcTimeoutMs: entry.timeouts.rpcMs,
          signal: Context.current().cancellationSignal,
        });
      });
    },

    /** Per-proxy volumes of `entry` on the host with our owner record and no domain of their name. */
    async listOrphanVolumes(input: { entry: string; host: string }): Promise<OrphanVolumeSet[]> {
      return mapped(async () => {
        const { entry, links } = registry.host(input.entry, input.host);
        return listOrphanVolumes(
          links,
          { entry: input.entry, ownerUid: registry.ownerUid, pool: entry.storagePool },
          { timeoutMs: entry.timeouts.rpcMs, signal: Context.current().cancellationSignal },
        );
      });
    },

    /** Deletes one proxy's orphaned volumes when they are still ours, of run `createdAt`, and unused. */
    async deleteOrphanVolumes(input: {
      entry: string;
      host: string;
      name: string;
      createdAt: string;
    }): Promise<string[]> {
      return mapped(async () => {
        const { entry, links } = registry.host(input.entry, input.host);
        return deleteOrphanVolumes(
          links,
          {
            entry: input.entry,
            ownerUid: registry.ownerUid,
            pool: entry.storagePool,
            name: input.name,
            createdAt: input.createdAt,
          },
          { timeoutMs: entry.timeouts.rpcMs, signal: Context.current().cancellationSignal },
        );
      });
    },
  };
}
