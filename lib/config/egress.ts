/**
 * The destination policy and client credentials of `squid` in the providers file (and of a
 * proxy's overrides): zod pieces, defaults, one line of help per field, and the checks that need
 * more than one field (SMTP ports listed on their own, allow-all lists behind `allowOpenProxy`, a
 * health target inside a reserved range that the policy would refuse). docs/egress-policy.md
 * describes every option.
 */
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { blockCovers, coversEverything, parseCidr, reservedBlockOf } from '../../contracts/cidr.ts';

/** Ports a proxy may reach when the entry does not say: HTTP, HTTPS and the unprivileged range. */
export const DEFAULT_ALLOW_PORTS: readonly string[] = ['80', '443', '1024-65535'];
/** Mail submission and relay ports: allowed only when listed on their own, never inside a range. */
export const MAIL_PORTS: readonly number[] = [25, 465, 587];
/** The realm a 407 names when the entry does not. */
export const DEFAULT_AUTH_REALM = 'egress-proxies';

/** A lowercase domain name, optionally with a leading `.` (it and its subdomains). */
export const DOMAIN_RE = /^\.?(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const PORT_RANGE_RE = /^([1-9][0-9]{0,4})(?:-([1-9][0-9]{0,4}))?$/;

/** A destination entry: a CIDR block (canonical) or a domain name (lowercase; `.example.org` with subdomains). */
export const destination = () =>
  z
    .string()
    .transform((s) => s.trim().toLowerCase())
    .superRefine((text, ctx) => {
      if (text.includes('/')) {
        checkCidr(text, ctx, 'write a CIDR block such as 10.1.2.0/24 or fd00::/8, or a domain name');
      } else if (!isDestinationDomain(text)) {
        ctx.addIssue({
          code: 'custom',
          input: text,
          message: 'is neither a CIDR block nor a domain name',
          params: {
            fix: 'write an address as a block (192.0.2.7/32, 2001:db8::1/128), or a name (api.example.org; .example.org for it and its subdomains)',
          },
        });
      }
    })
    .transform((text) => {
      const parsed = text.includes('/') ? parseCidr(text) : undefined;
      return parsed?.ok ? parsed.cidr.canonical : text;
    });

/** A destination port (`443`) or an ascending range (`1024-65535`), as text. */
export const portRange = () =>
  z
    .union([z.int(), z.string()])
    .transform((v) => String(v))
    .refine(isPortRange, { error: 'must be a port (443) or an ascending range within 1-65535 (1024-65535)' });

/**
 * Adds an issue unless `text` is a CIDR block; its fix gives the canonical network for host bits
 * set, else `orElse`.
 */
export function checkCidr(
  text: string,
  ctx: z.RefinementCtx<string>,
  orElse = 'write an IPv4 or IPv6 CIDR block such as 10.0.0.0/8 or 2001:db8::/32',
): void {
  const parsed = parseCidr(text);
  if (parsed.ok) return;
  ctx.addIssue({
    code: 'custom',
    input: text,
    message: parsed.problem,
    params: {
      fix: parsed.canonical
        ? `write the network as ${parsed.canonical} (or use /${parsed.canonical.includes(':') ? 128 : 32} for a single address)`
        : orElse,
    },
  });
}

/** Whether `text` is a port (`443`) or an ascending range within 1-65535 (`1024-65535`). */
export function isPortRange(text: string): boolean {
  const m = PORT_RANGE_RE.exec(text);
  const lo = Number(m?.[1]);
  const hi = m?.[2] === undefined ? lo : Number(m[2]);
  return m !== null && hi <= 65535 && lo <= hi;
}

/** Whether `text` is a destination domain entry (not an address). */
export function isDestinationDomain(text: string): boolean {
  return DOMAIN_RE.test(text) && !/^\.?[0-9.]+$/.test(text) && !text.includes(':');
}

/** `squid.auth`: Basic credentials from an htpasswd-style file on the worker (hashes only). */
export const AuthSchema = z.strictObject({
  htpasswdFile: z.string().refine((p) => isAbsolute(p) && !p.includes('\0'), { error: 'must be an absolute path' }),
  realm: z
    .string()
    .regex(/^[A-Za-z0-9 ._-]{1,64}$/, { error: 'must be 1-64 letters, digits, spaces, ".", "_" or "-"' })
    .default(DEFAULT_AUTH_REALM),
  probeCredentialsFile: z
    .string()
    .refine((p) => isAbsolute(p) && !p.includes('\0'), { error: 'must be an absolute path' })
    .optional(),
});

/** The policy fields of `squid` (spread into SquidSchema). */
export const egressFields = {
  mode: z.enum(['enforce', 'report']).default('enforce'),
  allowDestinations: z.array(destination()).max(256).default([]),
  denyDestinations: z.array(destination()).max(256).default([]),
  allowPorts: z
    .array(portRange())
    .min(1)
    .max(64)
    .default(() => [...DEFAULT_ALLOW_PORTS]),
  auth: AuthSchema.optional(),
};

/** A problem with a policy field, relative to `squid`. */
export interface EgressIssue {
  path: (string | number)[];
  /** The value at `path`, for the message's "got ...". */
  input: unknown;
  message: string;
  fix: string;
}

/**
 * Checks across fields of one resolved `squid`: mail ports inside a range, an allow list that
 * opens every address without `allowOpenProxy`, and (for the providers file) a health target
 * whose literal address the policy refuses.
 */
export function egressIssues(
  squid: {
    allowDestinations: readonly string[];
    allowPorts: readonly string[];
    mode: string;
    auth?: { probeCredentialsFile?: string | undefined } | undefined;
  },
  allowOpenProxy: boolean,
  healthTarget?: string,
): EgressIssue[] {
  const issues: EgressIssue[] = [];
  squid.allowPorts.forEach((text, i) => {
    const [lo, hi = lo] = text.split('-').map(Number) as [number, number?];
    const mail = MAIL_PORTS.filter((p) => lo !== hi && p >= lo && p <= hi);
    if (mail.length > 0) {
      issues.push({
        path: ['allowPorts', i],
        input: text,
        message: `${text} holds mail port${mail.length > 1 ? 's' : ''} ${mail.join(', ')}, which is allowed only when listed on its own`,
        fix: `split the range around ${mail.join(', ')} (e.g. ${lo}-${mail[0]! - 1}), and list ${mail.join(', ')} on their own only if the proxies really may send mail`,
      });
    }
  });
  const cidrs = squid.allowDestinations.filter((d) => d.includes('/'));
  if (!allowOpenProxy && coversEverything(cidrs)) {
    issues.push({
      path: ['allowDestinations'],
      input: squid.allowDestinations,
      message: `${cidrs.join(', ')} open${cidrs.length === 1 ? 's' : ''} every destination, reserved ranges included`,
      fix: 'list only the networks the proxies must reach, or set `allowOpenProxy: true` at the top of the providers file if an unrestricted proxy is really meant',
    });
  }
  if (squid.auth && healthTarget !== undefined && squid.auth.probeCredentialsFile === undefined) {
    issues.push({
      path: ['auth', 'probeCredentialsFile'],
      input: undefined,
      message:
        "is required when health.target is set: the health probe is a CONNECT like any client's and gets 407 without credentials",
      fix: 'add a user of its own for the probe to htpasswdFile and name a file holding its user:password (mode 0600) in squid.auth.probeCredentialsFile',
    });
  }
  const host = healthTarget?.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  const reserved = host === undefined ? undefined : reservedBlockOf(host);
  if (host !== undefined && reserved && squid.mode === 'enforce' && !allowsAddress(squid.allowDestinations, host)) {
    issues.push({
      path: ['allowDestinations'],
      input: squid.allowDestinations,
      message: `does not allow the health target ${host} (${reserved.what}, ${reserved.cidr}), which the policy refuses: every probe would get 403`,
      fix: `add "${host}/${host.includes(':') ? 128 : 32}" to squid.allowDestinations`,
    });
  }
  return issues;
}

/** Whether an allow list holds a block with `address` in it. */
function allowsAddress(allow: readonly string[], address: string): boolean {
  const single = parseCidr(`${address}/${address.includes(':') ? 128 : 32}`);
  if (!single.ok) return false;
  return allow.some((d) => {
    const block = parseCidr(d);
    return block.ok && blockCovers(block.cidr, single.cidr);
  });
}

/** What each policy field holds, by normalized path under `providers[].squid` (merged into FIELD_HELP). */
export const EGRESS_FIELD_HELP: Readonly<Record<string, { hint: string; example: string }>> = {
  'providers[].squid.mode': {
    hint: 'enforce (refuse what the policy denies with 403) or report (log it as would-be-denied and let it pass)',
    example: 'mode: enforce',
  },
  'providers[].squid.allowDestinations': {
    hint: 'a list of CIDR blocks and domain names the proxies may reach despite the reserved ranges',
    example: 'allowDestinations: [10.20.0.0/16, .internal.example.org]',
  },
  'providers[].squid.allowDestinations[]': {
    hint: 'a CIDR block or a domain name (.example.org for it and its subdomains)',
    example: '- 10.20.0.0/16',
  },
  'providers[].squid.denyDestinations': {
    hint: 'a list of CIDR blocks and domain names always refused',
    example: 'denyDestinations: [.ads.example.net]',
  },
  'providers[].squid.denyDestinations[]': {
    hint: 'a CIDR block or a domain name (.example.org for it and its subdomains)',
    example: '- 203.0.113.0/24',
  },
  'providers[].squid.allowPorts': {
    hint: 'the destination ports and ranges the proxies may reach (25, 465, 587 only on their own)',
    example: 'allowPorts: [80, 443, 1024-65535]',
  },
  'providers[].squid.allowPorts[]': { hint: 'a port or an ascending range', example: '- 443' },
  'providers[].squid.auth': {
    hint: 'client credentials (a mapping): an htpasswd-style file of users and password hashes',
    example: 'auth: { htpasswdFile: /etc/egress-proxies/proxy-users }',
  },
  'providers[].squid.auth.htpasswdFile': {
    hint: 'the absolute path, on the worker, of a file of user:hash lines (htpasswd -B or openssl passwd -6)',
    example: 'htpasswdFile: /etc/egress-proxies/proxy-users',
  },
  'providers[].squid.auth.realm': { hint: 'the realm a 407 answer names', example: 'realm: egress-proxies' },
  'providers[].squid.auth.probeCredentialsFile': {
    hint: 'the absolute path, on the worker, of a file with the health probe\'s "user:password" (its user must be in htpasswdFile)',
    example: 'probeCredentialsFile: /etc/egress-proxies/probe-credentials',
  },
};
