/**
 * From the providers file to the transport: where and how to reach each host of an entry, with
 * the entry's timeouts applied to dials and calls.
 */
import type { HostConfig, ProviderEntry } from '../config/index.ts';
import type { LineLogger } from '../log/line-logger.ts';
import type { HostTarget } from '../hostlink/link.ts';
import type { HostLinksOptions } from '../hostlink/pool.ts';

/** The transport's view of one configured host (`name` is `<entry>/<host>`). */
export function hostTarget(entry: ProviderEntry, host: HostConfig): HostTarget {
  return {
    name: `${entry.name}/${host.name}`,
    host: host.address,
    port: host.port,
    user: host.user,
    keyPath: host.keyFile,
    passphrasePath: host.passphraseFile,
    knownHostsPath: host.knownHostsFile,
    socketPath: host.socketPath,
  };
}

/** Link options from the entry's timeouts (connect, ready, per-call budget) and the host's start slots. */
export function hostLinksOptions(entry: ProviderEntry, host: HostConfig, logger?: LineLogger): HostLinksOptions {
  return {
    maxConcurrentStarts: host.maxConcurrentStarts,
    defaultTimeoutMs: entry.timeouts.rpcMs,
    dial: { connectTimeoutMs: entry.timeouts.connectMs, readyTimeoutMs: entry.timeouts.readyMs, logger },
    client: { callTimeoutMs: entry.timeouts.rpcMs },
  };
}
