/**
 * The access part of the guest's squid.conf: who may use the proxy (client networks, Basic
 * credentials) and where it may go (docs/egress-policy.md). Pure. Every value is checked again
 * here before it is written, so nothing but a block, a name, a port or a hash reaches the file.
 *
 * Rules, first match wins, the same for CONNECT and plain HTTP (absolute-form `GET http://…`):
 * clients outside `ep_clients` are refused; with credentials, a request without valid ones gets
 * 407 with `Proxy-Authenticate: Basic`; a port outside `allowPorts` is refused; a destination in
 * `denyDestinations` is refused; a destination in the reserved ranges (checked on the resolved
 * address: Squid's `dst` resolves names first) is refused unless `allowDestinations` holds it;
 * everything else passes. In `report` mode the refusing rules let the request pass instead. Each
 * decision is annotated (`ep_policy`, `ep_rule`) and logged in the access log.
 */
import { blockCovers, parseCidr, RESERVED_DESTINATIONS } from '../../../contracts/cidr.ts';
import type { EgressPolicy, SquidAuth } from '../../../contracts/squid.ts';
import { DEFAULT_ALLOW_PORTS, isDestinationDomain, isPortRange } from '../../config/egress.ts';
import { AUTH_USER_RE, HASH_RE } from '../../config/htpasswd.ts';
import { Kvm2BuildError } from '../build-errors.ts';

/** The guest's credentials file (user:hash lines), read by basic_ncsa_auth. */
export const SQUID_USERS_PATH = '/etc/squid/ep-users';
/** Debian's Basic helper for htpasswd-style files. */
export const BASIC_AUTH_HELPER = '/usr/lib/squid/basic_ncsa_auth';
/** The guest's access log: one line per request, with `policy=` and `rule=`. */
export const SQUID_ACCESS_LOG = '/var/log/squid/access.log';

/** The default policy: enforce, no extra destinations, ports 80, 443 and 1024-65535. */
export const DEFAULT_EGRESS: EgressPolicy = {
  mode: 'enforce',
  allowDestinations: [],
  denyDestinations: [],
  allowPorts: [...DEFAULT_ALLOW_PORTS],
};

const REALM_RE = /^[A-Za-z0-9 ._-]{1,64}$/;

/** The squid.conf lines for `egress` (default {@link DEFAULT_EGRESS}) and optional `auth`. */
export function squidAccessLines(
  egress: EgressPolicy | undefined,
  auth: Pick<SquidAuth, 'realm' | 'users'> | undefined,
): string[] {
  const policy = egress ?? DEFAULT_EGRESS;
  if (policy.mode !== 'enforce' && policy.mode !== 'report') {
    throw new Kvm2BuildError('egress.mode', `must be enforce or report, got ${JSON.stringify(policy.mode)}`);
  }
  if (policy.allowPorts.length === 0) throw new Kvm2BuildError('egress.allowPorts', 'must list at least one port');
  policy.allowPorts.forEach((p, i) => {
    if (!isPortRange(p))
      throw new Kvm2BuildError(`egress.allowPorts[${i}]`, `is not a port or range: ${JSON.stringify(p)}`);
  });
  const allow = destinations(policy.allowDestinations, 'egress.allowDestinations');
  const deny = destinations(policy.denyDestinations, 'egress.denyDestinations');
  const verb = policy.mode === 'enforce' ? 'deny' : 'allow';
  const marked = policy.mode === 'enforce' ? 'denied' : 'would-deny';
  const acl = (name: string, type: string, values: string[]): string[] => values.map((v) => `acl ${name} ${type} ${v}`);
  const lines = [
    `# Destination policy, mode ${policy.mode}${policy.mode === 'report' ? ': what enforce would refuse passes and is logged as would-deny' : ''}.`,
    ...acl('ep_ports', 'port', policy.allowPorts),
    ...acl(
      'ep_reserved',
      'dst',
      RESERVED_DESTINATIONS.map((r) => r.cidr),
    ),
    ...acl('ep_allow_dst', 'dst', allow.blocks),
    ...acl('ep_allow_domain', 'dstdomain -n', allow.domains),
    ...acl('ep_deny_dst', 'dst', deny.blocks),
    ...acl('ep_deny_domain', 'dstdomain -n', deny.domains),
    `acl ep_mark_port annotate_transaction ep_policy=${marked} ep_rule=allowPorts`,
    `acl ep_mark_denied annotate_transaction ep_policy=${marked} ep_rule=denyDestinations`,
    `acl ep_mark_reserved annotate_transaction ep_policy=${marked} ep_rule=reserved`,
    'acl ep_mark_allowed annotate_transaction ep_policy=allowed',
    ...(auth ? authLines(auth) : []),
    'logformat ep_decision %ts.%03tu %6tr %>a %un %Ss/%03>Hs %<st %rm %ru %<a policy=%{ep_policy}note rule=%{ep_rule}note',
    `access_log daemon:${SQUID_ACCESS_LOG} logformat=ep_decision`,
    'http_access deny !ep_clients',
    ...(auth ? ['http_access deny !ep_users'] : []),
    `http_access ${verb} !ep_ports ep_mark_port`,
    ...(deny.blocks.length > 0 ? [`http_access ${verb} ep_deny_dst ep_mark_denied`] : []),
    ...(deny.domains.length > 0 ? [`http_access ${verb} ep_deny_domain ep_mark_denied`] : []),
    [
      `http_access ${verb} ep_reserved`,
      ...(allow.blocks.length > 0 ? ['!ep_allow_dst'] : []),
      ...(allow.domains.length > 0 ? ['!ep_allow_domain'] : []),
      'ep_mark_reserved',
    ].join(' '),
    'http_access allow ep_clients ep_mark_allowed',
    'http_access deny all',
    // Squid consumes the client's credentials; never pass them on (only cache_peer login= would).
    'request_header_access Proxy-Authorization deny all',
  ];
  return lines;
}

function authLines(auth: Pick<SquidAuth, 'realm' | 'users'>): string[] {
  if (!REALM_RE.test(auth.realm)) {
    throw new Kvm2BuildError('auth.realm', `must be 1-64 letters, digits, spaces, ".", "_" or "-"`);
  }
  if (auth.users.length === 0) throw new Kvm2BuildError('auth.users', 'must list at least one user');
  auth.users.forEach((u, i) => {
    if (!AUTH_USER_RE.test(u.user)) throw new Kvm2BuildError(`auth.users[${i}].user`, 'is not a valid user name');
    // Never echo the value: a wrong hash field may be a password.
    if (!HASH_RE.test(u.hash)) throw new Kvm2BuildError(`auth.users[${i}].hash`, 'is not a supported crypt(3) hash');
  });
  return [
    `auth_param basic program ${BASIC_AUTH_HELPER} ${SQUID_USERS_PATH}`,
    'auth_param basic children 4 startup=1 idle=1',
    `auth_param basic realm ${auth.realm}`,
    'auth_param basic credentialsttl 5 minutes',
    'acl ep_users proxy_auth REQUIRED',
  ];
}

/**
 * Blocks (canonical) and domains of a destination list, without entries another one holds
 * (Squid drops those with a warning): a block inside another, `www.example.org` beside
 * `.example.org`.
 */
function destinations(list: readonly string[], field: string): { blocks: string[]; domains: string[] } {
  const blocks: ReturnType<typeof parseCidr>[] = [];
  const domains: string[] = [];
  list.forEach((text, i) => {
    if (text.includes('/')) {
      const parsed = parseCidr(text);
      if (!parsed.ok) throw new Kvm2BuildError(`${field}[${i}]`, `${JSON.stringify(text)} ${parsed.problem}`);
      blocks.push(parsed);
    } else if (isDestinationDomain(text)) domains.push(text);
    else
      throw new Kvm2BuildError(`${field}[${i}]`, `is neither a CIDR block nor a domain name: ${JSON.stringify(text)}`);
  });
  const cidrs = blocks.flatMap((b) => (b.ok ? [b.cidr] : []));
  const keptBlocks = cidrs.filter(
    (c, i) => !cidrs.some((o, j) => j !== i && blockCovers(o, c) && (!blockCovers(c, o) || j < i)),
  );
  const uniqueDomains = [...new Set(domains)];
  const keptDomains = uniqueDomains.filter(
    (d) => !uniqueDomains.some((o) => o !== d && o.startsWith('.') && (d === o.slice(1) || d.endsWith(o))),
  );
  return { blocks: keptBlocks.map((c) => c.canonical), domains: keptDomains };
}
