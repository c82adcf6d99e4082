/**
 * The front door of a pool: one proxy address in front of the pool's exits (Squid forward
 * proxies), rendered as an HAProxy 2.6 configuration (docs/design.md, "Front door (data path)").
 * Everything below happens inside HAProxy; no Node code carries a byte.
 *
 * What the rendered configuration does, in mode http, in this order:
 *  - Credentials: the client's user name is `<credential>`, or `<credential>-session-<id>` with
 *    an optional `-lifetime-<minutes>` after it ({@link DOOR_SESSION_USER_RE}). The door decodes
 *    `Proxy-Authorization: Basic`, checks `<credential>` and the password against a `userlist` of
 *    crypt(3) hashes (HAProxy 2.6's `http_auth*` fetches read `Authorization` only, so the door
 *    writes the base credential there for the check and puts the client's own `Authorization`
 *    back afterwards), and answers a missing or wrong credential itself with 407 and
 *    `Proxy-Authenticate: Basic`.
 *    `Proxy-Authorization` never reaches an exit.
 *  - Exit choice: `balance hash var(txn.key)` with `hash-type consistent`. A session's key is
 *    `<credential>-session-<id>@<start>`, where `start` is when its current run of requests began
 *    (a stick table, {@link DOOR_IDLE_TABLE}, whose entry expires after `sessionIdleMinutes`
 *    without a request), so every request of a session goes to one exit while that exit is in the
 *    pool and the session is not idle that long, and adding or removing an exit moves only the
 *    sessions that must move. With
 *    `-lifetime-<m>` the key is `<credential>-session-<id>/<period>`, where the period counts
 *    whole lifetimes since the session's first request (kept in a stick table,
 *    {@link DOOR_SESSION_TABLE}): the session keeps its exit for its first `m` minutes, and each
 *    `m` minutes after that the exit is chosen again (it may be the same one). A plain credential
 *    has no key: HAProxy then falls back to round robin, so its requests spread over the exits.
 *  - Destination rules: the destination is the CONNECT authority or the absolute URI's host.
 *    Written as an IP address inside a reserved range (contracts/cidr.ts `RESERVED_DESTINATIONS`:
 *    private, loopback, link-local and metadata, CGNAT, ...), it is refused for every credential
 *    unless the spec's `allowReserved` holds it. Names are not resolved by the door: the exits
 *    resolve them and keep their own default-deny of the same ranges on the resolved address.
 *    Then a credential's own `rules` (Smokescreen-style roles): `denyDestinations`, then
 *    `allowDestinations` (when given, only those); `enforce` answers 403 with the rule's name,
 *    `report` lets the request pass and logs it as `report`.
 *  - Limits per credential: more than `requestsPerSecond` requests in the last second gets 429,
 *    a CONNECT beyond `concurrentTunnels` open tunnels gets 503. Counters in stick tables
 *    (lib/door/table.ts), read with `show table` on the runtime socket.
 *  - One JSON decision line per request on HAProxy's stdout (`decisionLog`, default on):
 *    {@link DOOR_DECISION_MSG}, credential, session, exit, destination, decision, reason,
 *    connect_ms, bytes_in, bytes_out, status.
 *  - Proxy requests (absolute-URI GET, CONNECT) go to the exit unchanged: HAProxy keeps the
 *    request line; a CONNECT becomes a tunnel once the exit answers 200.
 *  - Exits are checked actively (TCP connect every `interMs`, down after `fall`, up after `rise`)
 *    and passively (`observe layer4 error-limit 1 on-error mark-down`: the first refused connect
 *    marks the exit down); a failed connect is retried (`retries 3`) on another exit (`option
 *    redispatch 1`) after HAProxy's turn-around wait, min(`timeout connect`, 1 s).
 *  - The runtime API listens on `runtimeSocket` (`level admin`): `add server exits/<name> <ip>:<port>
 *    <doorServerOptions(health)>`, `enable health` and `enable server` add an exit, `set server
 *    exits/<name> state maint|ready` and `... addr ...` change one, `del server` removes one in
 *    maint without connections; all without a reload, and tunnels already open stay open.
 *
 * Cost: crypt(3) runs once per verified credential and HAProxy process ({@link DOOR_AUTH_CACHE}); a
 * wrong password pays it on every attempt.
 */
import { blockCovers, parseCidr, RESERVED_DESTINATIONS } from '../../contracts/cidr.ts';
import { isDestinationDomain } from '../config/egress.ts';
import { ProjectError } from '../errors.ts';
import type { ErrorKind } from '../errors.ts';
import { DOOR_CREDENTIAL_TABLE, DOOR_IDLE_TABLE, DOOR_SESSION_TABLE, DOOR_TUNNEL_TABLE } from './table.ts';

export {
  DOOR_CREDENTIAL_TABLE,
  DOOR_IDLE_TABLE,
  DOOR_SESSION_TABLE,
  DOOR_TUNNEL_TABLE,
  parseDoorCredentialTable,
} from './table.ts';
export type { DoorCredentialCounters } from './table.ts';

/** The backend's name: runtime API commands address an exit as `exits/<name>`. */
export const DOOR_BACKEND = 'exits';
/** The userlist's name in the rendered configuration. */
export const DOOR_USERLIST = 'door-users';
/**
 * The door's cache of verified credentials: a map HAProxy loads empty from /dev/null at start and
 * then fills in memory (`set-map`) with `sha256(<credential>:<password>)` → credential for each
 * credential it verified with crypt(3), so a credential pays crypt once per HAProxy process, not
 * once per request. Only verified pairs enter it (at most one entry per user and password); a
 * wrong password is never cached and pays crypt every time. Readable on the runtime socket
 * (`show map /dev/null`); emptied when HAProxy restarts.
 */
export const DOOR_AUTH_CACHE = '/dev/null';
/** The `msg` of every decision log line. */
export const DOOR_DECISION_MSG = 'CANONICAL-PROXY-DECISION';
/**
 * A credential the door takes (the same set Squid's basic_ncsa_auth takes on the exits), without
 * `-session-` in it: that marks a session.
 */
export const DOOR_USER_RE = /^(?!.*-session-)[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/**
 * A client user name naming a session of credential $1: `<credential>-session-<id>` with an id of
 * 1-64 letters, digits, "_" or ".", optionally `-lifetime-<minutes>` (1-1440) after it.
 */
export const DOOR_SESSION_USER_RE =
  /^(.+)-session-[A-Za-z0-9_.]{1,64}(-lifetime-([1-9][0-9]{0,2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440))?$/;
/** The longest session lifetime, in minutes (a day: the session table forgets a session idle that long). */
export const DOOR_MAX_LIFETIME_MINUTES = 1440;
/** Minutes without a request that end a session without a lifetime, unless the spec says otherwise. */
export const DOOR_SESSION_IDLE_MINUTES = 10;
/** An exit name: an HAProxy server name, short enough to read in `show servers state`. */
export const DOOR_EXIT_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
/**
 * The password hashes the door takes: SHA-512 and SHA-256 crypt (`openssl passwd -6` / `-5`),
 * which HAProxy 2.6 verifies through Debian 12's crypt(3). Plain text (`insecure-password`), DES,
 * MD5 and Apache's apr1 are refused.
 */
export const DOOR_HASH_RE = /^\$[56]\$(rounds=\d{1,9}\$)?[./0-9A-Za-z]{1,16}\$[./0-9A-Za-z]{43,86}$/;
/** Most entries in one destination list. */
export const DOOR_MAX_DESTINATIONS = 256;

/** One exit: a Squid forward proxy the door sends requests to. */
export interface DoorExit {
  /** Server name in the backend (`exits/<name>` in the runtime API). */
  name: string;
  /** IPv4 address or DNS name (the runtime API's `add server` takes an address only). */
  host: string;
  port: number;
}

/**
 * A credential's destination rules (Smokescreen's roles). Entries are canonical CIDR blocks
 * (`192.0.2.0/24`) or lowercase names: `api.example.org` (that name), `.example.org` (it and its
 * subdomains). Names match the destination as the client wrote it, IP blocks only destinations
 * written as addresses. These rules never open a reserved range (see {@link DoorSpec.allowReserved}).
 */
export interface DoorRules {
  /** `enforce`: refuse with 403. `report`: let it pass, log `decision: report` with the rule. */
  mode: 'enforce' | 'report';
  /** When given, only these destinations; at least one entry. */
  allowDestinations?: string[];
  /** Always refused (checked before `allowDestinations`). */
  denyDestinations?: string[];
}

/** A credential's limits; either one absent is no limit. Always enforced (also in `report` mode). */
export interface DoorLimits {
  /** Requests (CONNECTs included) in any second; the next one gets 429. */
  requestsPerSecond?: number;
  /** CONNECT tunnels open at once; the next CONNECT gets 503. */
  concurrentTunnels?: number;
}

/** One client credential. */
export interface DoorUser {
  /** The credential; clients may append `-session-<id>[-lifetime-<minutes>]` ({@link DOOR_SESSION_USER_RE}). */
  name: string;
  /** crypt(3) hash, `$6$` or `$5$` (`openssl passwd -6`). */
  passwordHash: string;
  /** Destination rules; default: every destination outside the reserved ranges. */
  rules?: DoorRules;
  /** Default: none. */
  limits?: DoorLimits;
}

/** Everything one pool's door needs. */
export interface DoorSpec {
  /** Where clients connect: an IPv4 address (`0.0.0.0` for all) and a port. */
  listen: { host: string; port: number };
  /** The exits; names unique. May be empty (then 503) when exits are added through the runtime API. */
  exits: DoorExit[];
  /** At least one user; names unique. */
  users: DoorUser[];
  /** Absolute path of the runtime API's unix socket. */
  runtimeSocket: string;
  /** Active check: every `interMs`, down after `fall` failures, up after `rise` successes. */
  health: { interMs: number; fall: number; rise: number };
  /**
   * CIDR blocks inside the reserved ranges that every credential may reach when written as an
   * address (the pool's health target on a private network, say). Default none. The exits must
   * allow them too (their own `allowDestinations`).
   */
  allowReserved?: string[];
  /** One JSON decision line per request on HAProxy's stdout. Default true. */
  decisionLog?: boolean;
  /**
   * Minutes without a request after which a session without a lifetime ends: its next request
   * starts it again, on the exit the hash gives it then. Default {@link DOOR_SESSION_IDLE_MINUTES}.
   */
  sessionIdleMinutes?: number;
}

/**
 * A door spec that cannot be rendered (`DOOR_SPEC_INVALID`, Permanent): the message starts with
 * the field (`exits[1].port`), then the problem and the fix.
 */
export class DoorSpecError extends ProjectError {
  readonly code = 'DOOR_SPEC_INVALID';
  readonly kind: ErrorKind = 'Permanent';
  /** The spec field at fault, e.g. `users[2].passwordHash`. */
  readonly field: string;
  constructor(field: string, problem: string, fix: string) {
    super(`${field}: ${problem}; ${fix}`);
    this.field = field;
  }
}

const IPV4_RE = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const DNS_RE =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const SOCKET_RE = /^\/[A-Za-z0-9._/@+-]{1,100}$/;
const LIMIT_MAX = 1_000_000;

function checkPort(field: string, port: unknown): void {
  if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535) {
    throw new DoorSpecError(
      field,
      `must be an integer from 1 to 65535, got ${JSON.stringify(port)}`,
      'give a TCP port',
    );
  }
}

function checkInt(field: string, v: unknown, min: number, max: number, fix: string): void {
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max) {
    throw new DoorSpecError(field, `must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`, fix);
  }
}

/** The reserved block that holds all of `block` (a canonical CIDR), if any. */
function reservedHolding(block: string): { cidr: string; what: string } | undefined {
  const inner = parseCidr(block);
  if (!inner.ok) return undefined;
  return RESERVED_DESTINATIONS.find((r) => {
    const outer = parseCidr(r.cidr);
    return outer.ok && blockCovers(outer.cidr, inner.cidr);
  });
}

/** Whether one of `blocks` holds all of `block`. */
function heldBy(blocks: readonly string[], block: string): boolean {
  const inner = parseCidr(block);
  return (
    inner.ok &&
    blocks.some((b) => {
      const outer = parseCidr(b);
      return outer.ok && blockCovers(outer.cidr, inner.cidr);
    })
  );
}

/** Checks one destination list entry by entry: canonical CIDR blocks or lowercase names. */
function checkDestinations(field: string, list: unknown, allowReserved: readonly string[], allow: boolean): void {
  if (!Array.isArray(list) || list.length === 0 || list.length > DOOR_MAX_DESTINATIONS) {
    throw new DoorSpecError(
      field,
      `must be a list of 1 to ${DOOR_MAX_DESTINATIONS} destinations, got ${Array.isArray(list) ? `${list.length} entries` : JSON.stringify(list)}`,
      allow
        ? 'list CIDR blocks and names (".example.org" for it and its subdomains), or leave the field out to allow every destination'
        : 'list CIDR blocks and names, or leave the field out',
    );
  }
  list.forEach((d: unknown, i) => {
    const at = `${field}[${i}]`;
    if (typeof d !== 'string') {
      throw new DoorSpecError(at, `must be a string, got ${JSON.stringify(d)}`, 'write a CIDR block or a name');
    }
    if (d.includes('/')) {
      const parsed = parseCidr(d);
      if (!parsed.ok) {
        throw new DoorSpecError(
          at,
          `${JSON.stringify(d)} ${parsed.problem}`,
          parsed.canonical ? `write the network as ${parsed.canonical}` : 'write a CIDR block such as 192.0.2.0/24',
        );
      }
      if (parsed.cidr.canonical !== d) {
        throw new DoorSpecError(
          at,
          `${JSON.stringify(d)} is not in canonical form`,
          `write it as ${parsed.cidr.canonical}`,
        );
      }
      const reserved = reservedHolding(d);
      if (allow && reserved && !heldBy(allowReserved, d)) {
        throw new DoorSpecError(
          at,
          `${d} lies in the reserved range ${reserved.cidr} (${reserved.what}), which the door refuses for every credential`,
          `add ${d} to allowReserved as well, or remove it`,
        );
      }
    } else if (!isDestinationDomain(d)) {
      throw new DoorSpecError(
        at,
        `${JSON.stringify(d)} is neither a CIDR block nor a lowercase domain name`,
        isDestinationDomain(d.toLowerCase())
          ? `write it in lowercase: ${d.toLowerCase()}`
          : 'write an address as a block (192.0.2.7/32) or a name (api.example.org; .example.org for it and its subdomains)',
      );
    }
  });
}

function checkUser(u: DoorUser, i: number, allowReserved: readonly string[]): void {
  const at = `users[${i}]`;
  if (typeof u.name !== 'string' || !DOOR_USER_RE.test(u.name)) {
    throw new DoorSpecError(
      `${at}.name`,
      typeof u.name === 'string' && u.name.includes('-session-')
        ? 'contains "-session-", which marks a session in a client user name'
        : 'must be 1-64 letters, digits, ".", "_", "@" or "-" starting with a letter or digit',
      'rename the user',
    );
  }
  // The hash is never printed: a wrong value may be a password.
  if (typeof u.passwordHash !== 'string' || !DOOR_HASH_RE.test(u.passwordHash)) {
    throw new DoorSpecError(
      `${at}.passwordHash`,
      `user ${u.name} has no SHA-512 or SHA-256 crypt hash (plain text, DES, MD5, apr1 and bcrypt are refused)`,
      'write it with `openssl passwd -6`',
    );
  }
  if (u.rules !== undefined) {
    const r = u.rules;
    if (typeof r !== 'object' || r === null) {
      throw new DoorSpecError(
        `${at}.rules`,
        `must be an object, got ${JSON.stringify(r)}`,
        'give {mode, allowDestinations?, denyDestinations?}',
      );
    }
    if (r.mode !== 'enforce' && r.mode !== 'report') {
      throw new DoorSpecError(
        `${at}.rules.mode`,
        `must be "enforce" or "report", got ${JSON.stringify(r.mode)}`,
        'use "report" to try rules out, "enforce" to apply them',
      );
    }
    const known = new Set(['mode', 'allowDestinations', 'denyDestinations']);
    const extra = Object.keys(r).find((k) => !known.has(k));
    if (extra !== undefined) {
      throw new DoorSpecError(
        `${at}.rules.${extra}`,
        'is not a rules field',
        'use mode, allowDestinations or denyDestinations',
      );
    }
    if (r.allowDestinations !== undefined) {
      checkDestinations(`${at}.rules.allowDestinations`, r.allowDestinations, allowReserved, true);
    }
    if (r.denyDestinations !== undefined) {
      checkDestinations(`${at}.rules.denyDestinations`, r.denyDestinations, allowReserved, false);
    }
  }
  if (u.limits !== undefined) {
    const l = u.limits;
    if (typeof l !== 'object' || l === null) {
      throw new DoorSpecError(
        `${at}.limits`,
        `must be an object, got ${JSON.stringify(l)}`,
        'give {requestsPerSecond?, concurrentTunnels?}',
      );
    }
    const known = new Set(['requestsPerSecond', 'concurrentTunnels']);
    const extra = Object.keys(l).find((k) => !known.has(k));
    if (extra !== undefined) {
      throw new DoorSpecError(
        `${at}.limits.${extra}`,
        'is not a limits field',
        'use requestsPerSecond or concurrentTunnels',
      );
    }
    if (l.requestsPerSecond !== undefined) {
      checkInt(
        `${at}.limits.requestsPerSecond`,
        l.requestsPerSecond,
        1,
        LIMIT_MAX,
        'give the requests allowed per second, or leave it out for no limit',
      );
    }
    if (l.concurrentTunnels !== undefined) {
      checkInt(
        `${at}.limits.concurrentTunnels`,
        l.concurrentTunnels,
        1,
        LIMIT_MAX,
        'give the tunnels allowed open at once, or leave it out for no limit',
      );
    }
  }
}

/** Throws a {@link DoorSpecError} naming the first bad field of `spec`. */
export function validateDoor(spec: DoorSpec): void {
  if (typeof spec.listen?.host !== 'string' || !IPV4_RE.test(spec.listen.host)) {
    throw new DoorSpecError(
      'listen.host',
      `must be an IPv4 address, got ${JSON.stringify(spec.listen?.host)}`,
      'give the address clients connect to, e.g. 127.0.0.1, or 0.0.0.0 for every address',
    );
  }
  checkPort('listen.port', spec.listen.port);
  if (!Array.isArray(spec.exits)) {
    throw new DoorSpecError('exits', 'is not a list', 'list the exits {name, host, port}, or none');
  }
  const names = new Set<string>();
  spec.exits.forEach((e, i) => {
    const at = `exits[${i}]`;
    if (typeof e.name !== 'string' || !DOOR_EXIT_RE.test(e.name)) {
      throw new DoorSpecError(
        `${at}.name`,
        `must be 1-63 letters, digits, ".", "_" or "-" starting with a letter or digit, got ${JSON.stringify(e.name)}`,
        'rename the exit, e.g. exit-1',
      );
    }
    if (names.has(e.name))
      throw new DoorSpecError(`${at}.name`, `${e.name} is listed twice`, 'give each exit its own name');
    names.add(e.name);
    if (typeof e.host !== 'string' || !(IPV4_RE.test(e.host) || DNS_RE.test(e.host))) {
      throw new DoorSpecError(
        `${at}.host`,
        `must be an IPv4 address or a DNS name, got ${JSON.stringify(e.host)}`,
        "give the exit's address, e.g. 10.0.0.5",
      );
    }
    checkPort(`${at}.port`, e.port);
  });
  const allowReserved = spec.allowReserved ?? [];
  if (!Array.isArray(allowReserved) || allowReserved.length > DOOR_MAX_DESTINATIONS) {
    throw new DoorSpecError(
      'allowReserved',
      `must be a list of at most ${DOOR_MAX_DESTINATIONS} CIDR blocks, got ${JSON.stringify(spec.allowReserved)}`,
      'list the reserved blocks every credential may reach, e.g. ["10.231.1.1/32"], or leave it out',
    );
  }
  allowReserved.forEach((b: unknown, i) => {
    const at = `allowReserved[${i}]`;
    const parsed = typeof b === 'string' ? parseCidr(b) : undefined;
    if (parsed === undefined || !parsed.ok) {
      throw new DoorSpecError(
        at,
        `${JSON.stringify(b)} ${parsed?.problem ?? 'is not a CIDR block'}`,
        parsed?.canonical ? `write the network as ${parsed.canonical}` : 'write a CIDR block such as 10.231.1.1/32',
      );
    }
    if (parsed.cidr.canonical !== b) {
      throw new DoorSpecError(
        at,
        `${JSON.stringify(b)} is not in canonical form`,
        `write it as ${parsed.cidr.canonical}`,
      );
    }
    if (!reservedHolding(b)) {
      throw new DoorSpecError(
        at,
        `${b} is not inside one reserved range (contracts/cidr.ts RESERVED_DESTINATIONS)`,
        'list only blocks inside a reserved range: other addresses are not refused by the door',
      );
    }
  });
  if (!Array.isArray(spec.users) || spec.users.length === 0) {
    throw new DoorSpecError('users', 'is empty', 'list at least one user {name, passwordHash}');
  }
  const users = new Set<string>();
  spec.users.forEach((u, i) => {
    checkUser(u, i, allowReserved);
    if (users.has(u.name))
      throw new DoorSpecError(`users[${i}].name`, `${u.name} is listed twice`, 'keep one entry per user');
    users.add(u.name);
  });
  if (typeof spec.runtimeSocket !== 'string' || !SOCKET_RE.test(spec.runtimeSocket)) {
    throw new DoorSpecError(
      'runtimeSocket',
      `must be an absolute path of letters, digits and "._/@+-", at most 101 characters, got ${JSON.stringify(spec.runtimeSocket)}`,
      'give a path such as /run/egress-door/pool-a.sock',
    );
  }
  const h = spec.health ?? ({} as DoorSpec['health']);
  checkInt('health.interMs', h.interMs, 100, 3_600_000, 'give the check interval in milliseconds, e.g. 1000');
  checkInt('health.fall', h.fall, 1, 100, 'give the failed checks before an exit is down, e.g. 2');
  checkInt('health.rise', h.rise, 1, 100, 'give the passed checks before an exit is up again, e.g. 1');
  if (spec.sessionIdleMinutes !== undefined) {
    checkInt(
      'sessionIdleMinutes',
      spec.sessionIdleMinutes,
      1,
      DOOR_MAX_LIFETIME_MINUTES,
      `give whole minutes, 1-${DOOR_MAX_LIFETIME_MINUTES}, or leave it out for ${DOOR_SESSION_IDLE_MINUTES}`,
    );
  }
  if (spec.decisionLog !== undefined && typeof spec.decisionLog !== 'boolean') {
    throw new DoorSpecError(
      'decisionLog',
      `must be true or false, got ${JSON.stringify(spec.decisionLog)}`,
      'leave it out for the default, true',
    );
  }
}

/**
 * The options of an exit's `server` line after `<host>:<port>`: the active check and passive
 * ejection, and the idle connection pool. `renderDoor` writes them, and the runtime API takes them
 * as they are: `add server exits/<name> <ip>:<port> <options>`, then `enable health exits/<name>`
 * and `enable server exits/<name>` (a dynamic server starts in maintenance with its check off).
 *
 * `pool-max-conn -1 pool-purge-delay 5s` are HAProxy's defaults for a server of the configuration
 * file, written out because HAProxy 2.6 gives a server made by `add server` 0 for both: no idle
 * connection is kept, so every request through such an exit opened a new connection to its Squid.
 */
export function doorServerOptions(health: DoorSpec['health']): string {
  const { interMs, fall, rise } = health;
  return (
    `check inter ${interMs} fall ${fall} rise ${rise} observe layer4 error-limit 1 on-error mark-down` +
    ' pool-max-conn -1 pool-purge-delay 5s'
  );
}

/** The ACL lines `acl <name> ...` matching `list` against the destination host. */
function destinationAcl(name: string, list: readonly string[]): string[] {
  const blocks = list.filter((d) => d.includes('/'));
  const names = list.filter((d) => !d.includes('/') && !d.startsWith('.'));
  const suffixes = list.filter((d) => d.startsWith('.'));
  return [
    ...(blocks.length > 0 ? [`  acl ${name} var(txn.dsthost) -m ip ${blocks.join(' ')}`] : []),
    // `.example.org`: the name itself and every name ending in it.
    ...(names.length + suffixes.length > 0
      ? [`  acl ${name} var(txn.dsthost) -m str ${[...names, ...suffixes.map((s) => s.slice(1))].join(' ')}`]
      : []),
    ...(suffixes.length > 0 ? [`  acl ${name} var(txn.dsthost) -m end ${suffixes.join(' ')}`] : []),
  ];
}

/** The decision log line's format: one JSON object; strings through HAProxy's `json` converter. */
function decisionLogFormat(): string {
  const str = (key: string, expr: string): string => `\\"${key}\\":\\"%[${expr},json(utf8s)]\\"`;
  const fields = [
    `\\"time\\":\\"%[date,utime(%Y-%m-%dT%H:%M:%SZ)]\\"`,
    `\\"msg\\":\\"${DOOR_DECISION_MSG}\\"`,
    str('credential', 'var(txn.user)'),
    str('session', 'var(txn.session)'),
    str('exit', 'var(txn.exit)'),
    `\\"method\\":\\"%HM\\"`,
    str('destination', 'var(txn.dst)'),
    str('decision', 'var(txn.decision)'),
    str('reason', 'var(txn.reason)'),
    `\\"connect_ms\\":%Tc`,
    `\\"bytes_in\\":%U`,
    `\\"bytes_out\\":%B`,
    `\\"status\\":%ST`,
  ];
  return `"{${fields.join(',')}}"`;
}

/** The rules that set `txn.over` for one limit, then its refusal with `status`; none without rules. */
function refuseOver(status: number, rules: string[]): string[] {
  if (rules.length === 0) return [];
  const over = '{ var(txn.over) -m found }';
  return [
    ...rules,
    `  http-request set-var(txn.reason) var(txn.over) if ${over}`,
    `  http-request set-var(txn.decision) str(deny) if ${over}`,
    `  http-request return status ${status} content-type text/plain lf-string "refused by the door: %[var(txn.reason)]" if ${over}`,
  ];
}

/** The HAProxy 2.6 configuration of one pool's door (see the module comment); validates first. */
export function renderDoor(spec: DoorSpec): string {
  validateDoor(spec);
  const log = spec.decisionLog ?? true;
  const allowReserved = spec.allowReserved ?? [];
  const ruled = spec.users.map((u, i) => ({ u, acl: `door_u${i}` })).filter(({ u }) => u.rules || u.limits);
  const is = (v: string): string => `{ var(${v}) -m found }`;
  return [
    '# Rendered by lib/door/haproxy.ts: edits here are overwritten.',
    'global',
    '  maxconn 4096',
    // One thread: two write their decision lines to stdout at once and HAProxy drops one (DroppedLogs).
    '  nbthread 1',
    `  stats socket ${spec.runtimeSocket} mode 600 level admin`,
    ...(log ? ['  log stdout format raw local0'] : []),
    '',
    'defaults',
    '  mode http',
    '  option http-keep-alive',
    '  timeout connect 2s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout http-request 10s',
    '  timeout tunnel 1h',
    '  retries 3',
    '  option redispatch 1',
    '',
    `userlist ${DOOR_USERLIST}`,
    ...spec.users.map((u) => `  user ${u.name} password ${u.passwordHash}`),
    '',
    'frontend door',
    `  bind ${spec.listen.host}:${spec.listen.port}`,
    ...(log ? ['  log global', '  option dontlognull', `  log-format ${decisionLogFormat()}`] : []),
    // The client's user name: `<credential>[-session-<id>[-lifetime-<minutes>]]`.
    `  acl door_session var(txn.name) -m reg -- ${DOOR_SESSION_USER_RE.source.replace(/^\^\(\.\+\)/, '')}`,
    '  acl door_lifetime var(txn.name) -m reg -- -lifetime-[0-9]+$',
    '  acl door_reserved var(txn.dsthost) -m ip ' + RESERVED_DESTINATIONS.map((r) => r.cidr).join(' '),
    ...(allowReserved.length > 0 ? [`  acl door_reserved_open var(txn.dsthost) -m ip ${allowReserved.join(' ')}`] : []),
    ...ruled.flatMap(({ u, acl }) => [
      `  acl ${acl} var(txn.user) -m str ${u.name}`,
      ...destinationAcl(`${acl}_allow`, u.rules?.allowDestinations ?? []),
      ...destinationAcl(`${acl}_deny`, u.rules?.denyDestinations ?? []),
    ]),
    // http_auth_group reads Authorization only: check the base credential there, keep the client's own.
    '  http-request set-var(txn.origin_auth) req.fhdr(Authorization) if { req.hdr_cnt(Authorization) gt 0 }',
    '  http-request del-header Authorization',
    '  http-request set-var(txn.creds) req.fhdr(Proxy-Authorization),regsub(^[Bb][Aa][Ss][Ii][Cc]\\ +,),b64dec ' +
      'if { req.fhdr(Proxy-Authorization) -m reg -i ^basic\\ +[^\\ ] }',
    '  http-request set-var(txn.name) var(txn.creds),field(1,:) if { var(txn.creds) -m sub : }',
    '  http-request set-var(txn.pass) var(txn.creds),regsub(^[^:]*:,) if { var(txn.creds) -m sub : }',
    // The credential is what comes before the last `-session-` (a credential never holds one).
    '  http-request set-var(txn.session) var(txn.name),regsub(-lifetime-[0-9]+$,) if door_session',
    '  http-request set-var(txn.base) var(txn.session),regsub(-session-[A-Za-z0-9_.]+$,) if door_session',
    `  http-request set-var(txn.base) var(txn.name) if !door_session ${is('txn.name')}`,
    // A credential already verified is found by its SHA-256 in the cache; only the others pay crypt(3).
    `  http-request set-var(txn.authkey) var(txn.base),concat(:,txn.pass),sha2(256),hex if ${is('txn.base')}`,
    `  http-request set-var(txn.user) var(txn.authkey),map(${DOOR_AUTH_CACHE}) if ${is('txn.authkey')}`,
    `  http-request set-var(txn.cached) str(1) if ${is('txn.user')}`,
    `  http-request set-header Authorization "Basic %[var(txn.base),concat(:,txn.pass),base64]" if ${is('txn.base')} !${is('txn.user')}`,
    `  http-request set-var(txn.user) http_auth_group(${DOOR_USERLIST}) unless ${is('txn.user')}`,
    `  http-request set-map(${DOOR_AUTH_CACHE}) %[var(txn.authkey)] %[var(txn.user)] if ${is('txn.user')} ${is('txn.authkey')} !${is('txn.cached')}`,
    '  http-request del-header Authorization',
    '  http-request del-header Proxy-Authorization',
    `  http-request set-header Authorization %[var(txn.origin_auth)] if ${is('txn.origin_auth')}`,
    // The destination: the CONNECT authority, or the absolute URI's authority; its host in lowercase.
    '  http-request set-var(txn.dst) url if METH_CONNECT',
    '  http-request set-var(txn.dst) url,regsub(^[A-Za-z][A-Za-z0-9+.-]*://,),regsub([/?\\#].*$,),regsub(^.*@,) if !METH_CONNECT',
    '  http-request set-var(txn.dsthost) var(txn.dst),regsub(^\\[,),regsub(\\].*$,),lower if { var(txn.dst) -m beg [ }',
    '  http-request set-var(txn.dsthost) var(txn.dst),regsub(:[0-9]*$,),regsub(\\.$,),lower unless { var(txn.dst) -m beg [ }',
    `  http-request set-var(txn.decision) str(deny) unless ${is('txn.user')}`,
    `  http-request set-var(txn.reason) str(credentials) unless ${is('txn.user')}`,
    '  http-request return status 407 content-type text/plain string "proxy authentication required" ' +
      'hdr Proxy-Authenticate \'Basic realm="egress"\' unless { var(txn.user) -m found }',
    // Counted per credential from here on: requests, rate and bytes (lib/door/table.ts).
    `  http-request track-sc0 var(txn.user) table ${DOOR_CREDENTIAL_TABLE}`,
    // The hash key: the session; with a lifetime, the session and the lifetimes since its first request.
    // Without a lifetime: the session and the start of its current run of requests, which ends when
    // the session is idle for sessionIdleMinutes (its entry expires; an open tunnel keeps it).
    `  http-request track-sc2 var(txn.session) table ${DOOR_IDLE_TABLE} if door_session !door_lifetime`,
    '  http-request sc-set-gpt0(2) date if door_session !door_lifetime { sc_get_gpt0(2) eq 0 }',
    '  http-request set-var(txn.start) sc_get_gpt0(2) if door_session !door_lifetime',
    '  http-request set-var(txn.key) var(txn.session),concat(@,txn.start) if door_session !door_lifetime',
    `  http-request track-sc2 var(txn.session) table ${DOOR_SESSION_TABLE} if door_session door_lifetime`,
    '  http-request sc-set-gpt0(2) date if door_session door_lifetime { sc_get_gpt0(2) eq 0 }',
    '  http-request set-var(txn.lifesec) var(txn.name),regsub(^.*-lifetime-,),mul(60) if door_session door_lifetime',
    '  http-request set-var(txn.start) sc_get_gpt0(2) if door_session door_lifetime',
    '  http-request set-var(txn.period) date,sub(txn.start),div(txn.lifesec) if door_session door_lifetime',
    '  http-request set-var(txn.key) var(txn.session),concat(/,txn.period) if door_session door_lifetime',
    // Destination rules: reserved addresses for everyone, then each credential's deny and allow lists.
    `  http-request set-var(txn.reason) str(reserved) if door_reserved${allowReserved.length > 0 ? ' !door_reserved_open' : ''}`,
    ...ruled.flatMap(({ u, acl }) => [
      ...(u.rules?.denyDestinations
        ? [`  http-request set-var(txn.reason) str(denyDestinations) if ${acl} ${acl}_deny !${is('txn.reason')}`]
        : []),
      ...(u.rules?.allowDestinations
        ? [`  http-request set-var(txn.reason) str(allowDestinations) if ${acl} !${acl}_allow !${is('txn.reason')}`]
        : []),
      ...(u.rules?.mode === 'report' ? [`  http-request set-var(txn.mode) str(report) if ${acl}`] : []),
    ]),
    // The reserved ranges are refused in report mode too.
    `  http-request set-var(txn.decision) str(report) if ${is('txn.reason')} { var(txn.mode) -m str report } !{ var(txn.reason) -m str reserved }`,
    `  http-request set-var(txn.decision) str(deny) if ${is('txn.reason')} !${is('txn.decision')}`,
    '  http-request return status 403 content-type text/plain lf-string "refused by the door: %[var(txn.reason)]" ' +
      'if { var(txn.decision) -m str deny }',
    // Limits, in every mode; the refusal's rules only where a credential has that limit.
    ...refuseOver(
      429,
      ruled.flatMap(({ u, acl }) =>
        u.limits?.requestsPerSecond
          ? [
              `  http-request set-var(txn.over) str(requestsPerSecond) if ${acl} { sc_http_req_rate(0) gt ${u.limits.requestsPerSecond} }`,
            ]
          : [],
      ),
    ),
    `  http-request track-sc1 var(txn.user) table ${DOOR_TUNNEL_TABLE} if METH_CONNECT`,
    ...refuseOver(
      503,
      ruled.flatMap(({ u, acl }) =>
        u.limits?.concurrentTunnels
          ? [
              `  http-request set-var(txn.over) str(concurrentTunnels) if METH_CONNECT ${acl} { sc_conn_cur(1) gt ${u.limits.concurrentTunnels} }`,
            ]
          : [],
      ),
    ),
    `  http-request set-var(txn.decision) str(allow) unless ${is('txn.decision')}`,
    // The exit, for the log line (set once a server is chosen).
    '  http-response set-var(txn.exit) srv_name',
    `  default_backend ${DOOR_BACKEND}`,
    '',
    `backend ${DOOR_BACKEND}`,
    // A session's key, or none (a plain credential): round robin.
    '  balance hash var(txn.key)',
    '  hash-type consistent',
    ...spec.exits.map((e) => `  server ${e.name} ${e.host}:${e.port} ${doorServerOptions(spec.health)}`),
    '',
    `backend ${DOOR_CREDENTIAL_TABLE}`,
    '  stick-table type string len 64 size 100k expire 1d store http_req_cnt,http_req_rate(1s),bytes_in_cnt,bytes_out_cnt',
    '',
    `backend ${DOOR_TUNNEL_TABLE}`,
    '  stick-table type string len 64 size 100k expire 1d store conn_cur,conn_cnt',
    '',
    `backend ${DOOR_SESSION_TABLE}`,
    `  stick-table type string len 160 size 200k expire ${DOOR_MAX_LIFETIME_MINUTES}m store gpt0`,
    '',
    `backend ${DOOR_IDLE_TABLE}`,
    `  stick-table type string len 160 size 200k expire ${spec.sessionIdleMinutes ?? DOOR_SESSION_IDLE_MINUTES}m store gpt0`,
    '',
  ].join('\n');
}
