// Host check: dial each host of the providers file (or of one entry) over SSH on a health link of
// its own, forward the libvirt socket, and report reachability, round trip, versions and pool
// space: `egressctl hosts check`.
import { ConfigError, loadProvidersFile } from '../config/index.ts';
import { HostLinks } from '../hostlink/pool.ts';
import { hostHealth, hostLinksOptions, hostTarget } from './index.ts';
import type { HostHealth } from './index.ts';
import { errorKind } from '../errors.ts';
import type { Logger } from '../log/logger.ts';

/** A bad request of the caller (unknown entry): egressctl exits 2 on it. */
export class HostCheckUsageError extends Error {}

/** A bad providers file or host-check arguments: usage errors of egressctl (exit 2). */
export function isUsageError(err: unknown): boolean {
  return err instanceof ConfigError || err instanceof HostCheckUsageError;
}

/** One host's line: its health, or why it is unreachable. */
export type HostCheckLine =
  ({ host: string; connectMs: number } & HostHealth) | { host: string; reachable: false; kind: string; error: string };

/**
 * Checks every host of `file` (or of entry `entryName`), calling `onLine` once per host as soon as
 * it is known. Returns true when every host was reachable. Throws ConfigError on a bad file and
 * HostCheckUsageError on an unknown entry.
 */
export async function checkHosts(
  file: string,
  entryName: string | undefined,
  o: { timeoutMs: number; log: Logger; onLine: (line: HostCheckLine) => void },
): Promise<boolean> {
  const config = await loadProvidersFile(file);
  const entries = config.providers.filter((e) => entryName === undefined || e.name === entryName);
  if (entries.length === 0) {
    throw new HostCheckUsageError(
      `--entry ${entryName}: no such provider entry in ${file} (it has ${config.providers.map((e) => e.name).join(', ')})`,
    );
  }
  let allOk = true;
  for (const entry of entries) {
    for (const host of entry.hosts) {
      const target = hostTarget(entry, host);
      const links = new HostLinks(target, hostLinksOptions(entry, host, o.log));
      const started = performance.now();
      try {
        const link = await links.dedicated('health');
        let health: HostHealth;
        try {
          health = await hostHealth(link.client, entry.storagePool, { timeoutMs: o.timeoutMs });
        } finally {
          await link.close();
        }
        o.onLine({ host: target.name, connectMs: Math.round(performance.now() - started), ...health });
      } catch (err) {
        allOk = false;
        o.onLine({ host: target.name, reachable: false, kind: errorKind(err), error: (err as Error).message });
      } finally {
        links.close();
      }
    }
  }
  return allOk;
}
