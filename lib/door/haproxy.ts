/**
 * The front door of a pool: one proxy address in front of the pool's exits (Squid forward
 * proxies), rendered as an HAProxy 2.6 configuration (docs/design.md, "Front door").
 *
 * What the rendered configuration does, in mode http:
 *  - Credentials are checked at the door against a `userlist` of crypt(3) hashes. HAProxy 2.6's
 *    `http_auth*` fetches read `Authorization` only and its `http-request auth` answers 401, so
 *    the door copies `Proxy-Authorization` into `Authorization` for the check, puts the client's
 *    own `Authorization` (meant for the origin) back, and answers a missing or wrong credential
 *    itself with 407 and `Proxy-Authenticate: Basic`. `Proxy-Authorization` never reaches an exit.
 *  - The exit is chosen by a consistent hash of the authenticated user NAME (`http_auth_group`
 *    returns it; `balance hash var(txn.user)`), so `user-session-<id>` stays on one exit whatever
 *    its password, and adding or removing an exit moves only the sessions that must move.
 *  - Proxy requests (absolute-URI GET, CONNECT) go to the exit unchanged: HAProxy keeps the
 *    request line; a CONNECT becomes a tunnel once the exit answers 200.
 *  - Exits are checked actively (TCP connect every `interMs`, down after `fall`, up after `rise`)
 *    and passively (`observe layer4 error-limit 1 on-error mark-down`: the first refused connect
 *    marks the exit down); a failed connect is retried (`retries 3`) on another exit (`option
 *    redispatch 1`) after HAProxy's turn-around wait, min(`timeout connect`, 1 s).
 *  - The runtime API listens on `runtimeSocket` (`level admin`): `set server exits/<name> state
 *    maint|ready`, `set server exits/<name> addr ...` change the exits without a reload, and
 *    tunnels already open stay open.
 *
 * Cost: HAProxy runs crypt(3) on every request (no cache), so the hash's rounds are CPU per request.
 */
import { ProjectError } from '../errors.ts';
import type { ErrorKind } from '../errors.ts';

/** The backend's name: runtime API commands address an exit as `exits/<name>`. */
export const DOOR_BACKEND = 'exits';
/** The userlist's name in the rendered configuration. */
export const DOOR_USERLIST = 'door-users';
/** A user name the door takes (the same set Squid's basic_ncsa_auth takes on the exits). */
export const DOOR_USER_RE = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/** An exit name: an HAProxy server name, short enough to read in `show servers state`. */
export const DOOR_EXIT_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
/**
 * The password hashes the door takes: SHA-512 and SHA-256 crypt (`openssl passwd -6` / `-5`),
 * which HAProxy 2.6 verifies through Debian 12's crypt(3). Plain text (`insecure-password`), DES,
 * MD5 and Apache's apr1 are refused.
 */
export const DOOR_HASH_RE = /^\$[56]\$(rounds=\d{1,9}\$)?[./0-9A-Za-z]{1,16}\$[./0-9A-Za-z]{43,86}$/;

/** One exit: a Squid forward proxy the door sends requests to. */
export interface DoorExit {
  /** Server name in the backend (`exits/<name>` in the runtime API). */
  name: string;
  /** IPv4 address or DNS name. */
  host: string;
  port: number;
}

/** One client credential. */
export interface DoorUser {
  name: string;
  /** crypt(3) hash, `$6$` or `$5$` (`openssl passwd -6`). */
  passwordHash: string;
}

/** Everything one pool's door needs. */
export interface DoorSpec {
  /** Where clients connect: an IPv4 address (`0.0.0.0` for all) and a port. */
  listen: { host: string; port: number };
  /** At least one exit; names unique. */
  exits: DoorExit[];
  /** At least one user; names unique. */
  users: DoorUser[];
  /** Absolute path of the runtime API's unix socket. */
  runtimeSocket: string;
  /** Active check: every `interMs`, down after `fall` failures, up after `rise` successes. */
  health: { interMs: number; fall: number; rise: number };
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
  if (!Array.isArray(spec.exits) || spec.exits.length === 0) {
    throw new DoorSpecError('exits', 'is empty', 'list at least one exit {name, host, port}');
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
  if (!Array.isArray(spec.users) || spec.users.length === 0) {
    throw new DoorSpecError('users', 'is empty', 'list at least one user {name, passwordHash}');
  }
  const users = new Set<string>();
  spec.users.forEach((u, i) => {
    const at = `users[${i}]`;
    if (typeof u.name !== 'string' || !DOOR_USER_RE.test(u.name)) {
      throw new DoorSpecError(
        `${at}.name`,
        'must be 1-64 letters, digits, ".", "_", "@" or "-" starting with a letter or digit',
        'rename the user',
      );
    }
    if (users.has(u.name))
      throw new DoorSpecError(`${at}.name`, `${u.name} is listed twice`, 'keep one entry per user');
    users.add(u.name);
    // The hash is never printed: a wrong value may be a password.
    if (typeof u.passwordHash !== 'string' || !DOOR_HASH_RE.test(u.passwordHash)) {
      throw new DoorSpecError(
        `${at}.passwordHash`,
        `user ${u.name} has no SHA-512 or SHA-256 crypt hash (plain text, DES, MD5, apr1 and bcrypt are refused)`,
        'write it with `openssl passwd -6`',
      );
    }
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
}

/** The HAProxy 2.6 configuration of one pool's door (see the module comment); validates first. */
export function renderDoor(spec: DoorSpec): string {
  validateDoor(spec);
  const { interMs, fall, rise } = spec.health;
  const check = `check inter ${interMs} fall ${fall} rise ${rise} observe layer4 error-limit 1 on-error mark-down`;
  return [
    '# Rendered by lib/door/haproxy.ts: edits here are overwritten.',
    'global',
    '  maxconn 4096',
    `  stats socket ${spec.runtimeSocket} mode 600 level admin`,
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
    // http_auth_group reads Authorization only: check Proxy-Authorization there, keep the client's own.
    '  http-request set-var(txn.origin_auth) req.fhdr(Authorization) if { req.hdr_cnt(Authorization) gt 0 }',
    '  http-request set-header Authorization %[req.fhdr(Proxy-Authorization)]',
    `  http-request set-var(txn.user) http_auth_group(${DOOR_USERLIST})`,
    '  http-request del-header Authorization',
    '  http-request del-header Proxy-Authorization',
    '  http-request set-header Authorization %[var(txn.origin_auth)] if { var(txn.origin_auth) -m found }',
    '  http-request return status 407 content-type text/plain string "proxy authentication required" ' +
      'hdr Proxy-Authenticate \'Basic realm="egress"\' unless { var(txn.user) -m found }',
    `  default_backend ${DOOR_BACKEND}`,
    '',
    `backend ${DOOR_BACKEND}`,
    '  balance hash var(txn.user)',
    '  hash-type consistent',
    ...spec.exits.map((e) => `  server ${e.name} ${e.host}:${e.port} ${check}`),
    '',
  ].join('\n');
}
