// What a proxy's Squid is told: the per-proxy overrides a client may send, and the settings the
// worker resolves from them and the provider entry (recorded in the workflow's history). Plain
// JSON types only.

/** Squid overrides; omitted fields take the provider entry's `squid` settings. */
export interface SquidOverrides {
  port?: number;
  allowedClientCidrs?: string[];
}

/** The Squid settings of one proxy, resolved against its entry. */
export interface ResolvedSquid {
  port: number;
  allowedClientCidrs: string[];
}
