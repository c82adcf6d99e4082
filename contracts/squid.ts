// What a proxy's Squid is told: the per-proxy overrides a client may send, and the settings the
// worker resolves from them and the provider entry (recorded in the workflow's history). Plain
// JSON types only. The destination policy is described in docs/egress-policy.md.

/** `enforce`: refuse what the policy denies (403). `report`: log it as would-be-denied and let it pass. */
export type EgressMode = 'enforce' | 'report';

/**
 * Squid overrides; omitted fields take the provider entry's `squid` settings. `allowDestinations`
 * and `denyDestinations` are added to the entry's lists; `allowPorts` and `mode` replace the
 * entry's. Credentials (`auth`) are the entry's only.
 */
export interface SquidOverrides {
  port?: number;
  allowedClientCidrs?: string[];
  /** CIDR blocks and domain names (`.example.org`: it and its subdomains) opened despite the reserved ranges. */
  allowDestinations?: string[];
  /** CIDR blocks and domain names always refused (before any allow). */
  denyDestinations?: string[];
  /** Destination ports (`443`, `1024-65535`); 25, 465 and 587 only when listed on their own. */
  allowPorts?: (number | string)[];
  mode?: EgressMode;
}

/** The destination policy of one proxy, resolved. */
export interface EgressPolicy {
  mode: EgressMode;
  /** Canonical CIDR blocks and lowercase domain names. */
  allowDestinations: string[];
  denyDestinations: string[];
  /** Ports and ranges as text: `80`, `1024-65535`. */
  allowPorts: string[];
}

/** One Basic credential: the user and the hash of its password (crypt(3) form: `$2y$`, `$6$`, `$apr1$`...). */
export interface SquidUser {
  user: string;
  hash: string;
}

/** Client credentials of a proxy: users with password hashes only, never a password. */
export interface SquidAuth {
  realm: string;
  users: SquidUser[];
  /** The worker-side file holding the probe's `user:password` (read at probe time; never recorded). */
  probeCredentialsFile?: string;
}

/** The Squid settings of one proxy, resolved against its entry. */
export interface ResolvedSquid {
  port: number;
  allowedClientCidrs: string[];
  /** Absent (a history recorded before the policy existed): the default policy, enforced. */
  egress?: EgressPolicy;
  auth?: SquidAuth;
}
