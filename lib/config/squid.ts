/**
 * One proxy's Squid settings: the entry's `squid` with the client's overrides applied, checked by
 * the same schema as the providers file, by the open-proxy rule and by the destination policy's
 * rules (lib/config/egress.ts); the entry's credentials read from its htpasswd file (hashes only:
 * lib/config/htpasswd.ts). Errors name the request's field (`squid.<path>`).
 */
import { openBlocks } from '../../contracts/cidr.ts';
import type { ResolvedSquid, SquidOverrides } from '../../contracts/squid.ts';
import { egressIssues } from './egress.ts';
import { ProxySpecError } from './errors.ts';
import { readHtpasswd } from './htpasswd.ts';
import { formatPath } from './load.ts';
import { SquidSchema } from './schema.ts';
import type { SquidConfig } from './schema.ts';

/** Override keys a client may send; credentials and their files are the entry's alone. */
const OVERRIDABLE = new Set<string>([
  'port',
  'allowedClientCidrs',
  'allowDestinations',
  'denyDestinations',
  'allowPorts',
  'mode',
]);

/**
 * `entry`'s Squid settings with `overrides` applied; a ProxySpecError naming the field for a value
 * the schema refuses, for client blocks that admit every address or destinations that open every
 * address unless `allowOpenProxy`, for `mode: report` asked by a client of an enforcing entry
 * without `allowOpenProxy` (report lets everything pass), and for an unreadable or invalid
 * htpasswd file. `allowDestinations` and `denyDestinations` overrides add to the entry's lists.
 */
export function resolveSquid(
  entry: SquidConfig,
  overrides: SquidOverrides | undefined,
  allowOpenProxy: boolean,
): ResolvedSquid {
  for (const key of Object.keys(overrides ?? {})) {
    if (!OVERRIDABLE.has(key)) {
      throw new ProxySpecError(
        `squid.${key}`,
        `cannot be overridden per proxy; overridable: ${[...OVERRIDABLE].join(', ')}${key === 'auth' ? ' (credentials are set per provider entry)' : ''}`,
      );
    }
  }
  const merged = {
    ...entry,
    ...overrides,
    allowDestinations: [...entry.allowDestinations, ...(overrides?.allowDestinations ?? [])],
    denyDestinations: [...entry.denyDestinations, ...(overrides?.denyDestinations ?? [])],
  };
  const squid = SquidSchema.safeParse(merged);
  if (!squid.success) {
    const issue = squid.error.issues[0]!;
    throw new ProxySpecError(`squid.${formatPath(issue.path)}`, issue.message);
  }
  const s = squid.data;
  if (!allowOpenProxy) {
    const [open] = openBlocks(s.allowedClientCidrs);
    if (open !== undefined) {
      throw new ProxySpecError(
        `squid.allowedClientCidrs[${open.index}]`,
        `${open.problem} (an open proxy); list the client networks, or set allowOpenProxy: true in the providers file`,
      );
    }
    if (overrides?.mode === 'report' && entry.mode !== 'report') {
      throw new ProxySpecError(
        'squid.mode',
        'report lets every destination pass (it only logs what enforce would refuse); leave it to the entry, or set allowOpenProxy: true in the providers file',
      );
    }
  }
  const [issue] = egressIssues(s, allowOpenProxy);
  if (issue) throw new ProxySpecError(`squid.${formatPath(issue.path)}`, `${issue.message}; ${issue.fix}`);
  return {
    port: s.port,
    allowedClientCidrs: [...s.allowedClientCidrs],
    egress: {
      mode: s.mode,
      allowDestinations: [...new Set(s.allowDestinations)],
      denyDestinations: [...new Set(s.denyDestinations)],
      allowPorts: [...s.allowPorts],
    },
    ...(s.auth
      ? {
          auth: {
            realm: s.auth.realm,
            users: readHtpasswd(s.auth.htpasswdFile, 'squid.auth.htpasswdFile'),
            ...(s.auth.probeCredentialsFile ? { probeCredentialsFile: s.auth.probeCredentialsFile } : {}),
          },
        }
      : {}),
  };
}
