/**
 * lib/door/haproxy.ts without HAProxy: what the rendered configuration says (the lines the data
 * path depends on: credentials, sessions, rules, limits, counters, the decision log), every
 * rejection of a bad spec, each naming the field and the fix, and the parser of the counters'
 * `show table` output against HAProxy 2.6's own text. The
 * real parser (`haproxy -c`) and the real data path run in test/integration/door-haproxy.test.ts,
 * after scripts/test has installed haproxy (this file runs in `scripts/test unit` too, where
 * nothing is installed).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RESERVED_DESTINATIONS } from '../../contracts/cidr.ts';
import {
  DOOR_SESSION_USER_RE,
  DoorSpecError,
  doorServerOptions,
  parseDoorCredentialTable,
  renderDoor,
  validateDoor,
} from '../../lib/door/haproxy.ts';
import type { DoorSpec } from '../../lib/door/haproxy.ts';
import { errorKind } from '../../lib/errors.ts';

// `openssl passwd -6 -salt abcdefgh secret` and `openssl passwd -5 -salt abcdefgh secret`.
const H6 = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';
const H5 = '$5$abcdefgh$gruCpC7VkOTspMQTTSAR8mtlO9Upms.fwqE5y16JVM.';

const spec = (): DoorSpec => ({
  listen: { host: '127.0.0.1', port: 3128 },
  exits: [
    { name: 'exit-a', host: '10.0.0.5', port: 3128 },
    { name: 'exit-b', host: 'exit-b.pool.internal', port: 3129 },
  ],
  users: [
    { name: 'user', passwordHash: H6 },
    { name: 'alice@example', passwordHash: H5 },
  ],
  runtimeSocket: '/run/egress-door/pool-a.sock',
  health: { interMs: 1000, fall: 2, rise: 1 },
});

describe('renderDoor', () => {
  const conf = renderDoor(spec());
  const lines = conf.split('\n').map((l) => l.trim());

  it('is mode http with the runtime socket at level admin', () => {
    assert.ok(lines.includes('mode http'));
    assert.ok(lines.includes('stats socket /run/egress-door/pool-a.sock mode 600 level admin'));
    assert.ok(lines.includes('bind 127.0.0.1:3128'));
  });

  it('checks credentials from a userlist of hashes and answers 407 with Proxy-Authenticate', () => {
    assert.ok(lines.includes(`user user password ${H6}`));
    assert.ok(lines.includes(`user alice@example password ${H5}`));
    const check = 'http-request set-var(txn.user) http_auth_group(door-users) unless { var(txn.user) -m found }';
    assert.ok(lines.includes(check));
    // A verified credential is cached by its SHA-256 (found first), and only a verified one enters.
    const lookup = lines.indexOf(
      'http-request set-var(txn.user) var(txn.authkey),map(/dev/null) if { var(txn.authkey) -m found }',
    );
    const store = lines.indexOf(
      'http-request set-map(/dev/null) %[var(txn.authkey)] %[var(txn.user)] if { var(txn.user) -m found } { var(txn.authkey) -m found } !{ var(txn.cached) -m found }',
    );
    assert.ok(lookup > 0 && lookup < lines.indexOf(check) && store > lines.indexOf(check), 'look up, verify, store');
    const ret = lines.find((l) => l.startsWith('http-request return status 407'));
    assert.ok(ret?.includes(`hdr Proxy-Authenticate 'Basic realm="egress"'`), ret);
    assert.ok(ret?.endsWith('unless { var(txn.user) -m found }'), ret);
    assert.ok(!conf.includes('insecure-password'));
  });

  it('removes Proxy-Authorization and keeps the client’s own Authorization', () => {
    const del = lines.indexOf('http-request del-header Proxy-Authorization');
    const check = lines.indexOf(
      'http-request set-var(txn.user) http_auth_group(door-users) unless { var(txn.user) -m found }',
    );
    assert.ok(check > 0 && del > check, 'removed after the check');
    assert.ok(
      lines.includes(
        'http-request set-header Authorization %[var(txn.origin_auth)] if { var(txn.origin_auth) -m found }',
      ),
    );
  });

  it('hashes the session key consistently over the exits, with active and passive checks', () => {
    assert.ok(lines.includes('balance hash var(txn.key)'));
    assert.ok(lines.includes('hash-type consistent'));
    assert.ok(lines.includes('retries 3'));
    assert.ok(lines.includes('option redispatch 1'));
    // The idle pool is written out: a server made by `add server` has none in HAProxy 2.6.
    const check =
      'check inter 1000 fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down pool-max-conn -1 pool-purge-delay 5s';
    assert.equal(doorServerOptions({ interMs: 1000, fall: 2, rise: 1 }), check);
    assert.ok(lines.includes(`server exit-a 10.0.0.5:3128 ${check}`));
    assert.ok(lines.includes(`server exit-b exit-b.pool.internal:3129 ${check}`));
    assert.ok(!conf.includes('shutdown-sessions'), 'an exit marked down or in maint keeps its open tunnels');
  });

  it('checks the base credential of a session user name, and keys the hash by the session', () => {
    // The credential written for the check is the base name with the client's password.
    assert.ok(
      lines.includes('http-request set-var(txn.session) var(txn.name),regsub(-lifetime-[0-9]+$,) if door_session'),
    );
    assert.ok(
      lines.includes(
        'http-request set-var(txn.base) var(txn.session),regsub(-session-[A-Za-z0-9_.]+$,) if door_session',
      ),
    );
    assert.ok(
      lines.includes(
        'http-request set-header Authorization "Basic %[var(txn.base),concat(:,txn.pass),base64]" if { var(txn.base) -m found } !{ var(txn.user) -m found }',
      ),
    );
    // No lifetime: the key holds when the session's current run of requests began; its entry in
    // door_idle expires after sessionIdleMinutes (default 10) without a request.
    assert.ok(lines.includes('http-request track-sc2 var(txn.session) table door_idle if door_session !door_lifetime'));
    assert.ok(
      lines.includes(
        'http-request set-var(txn.key) var(txn.session),concat(@,txn.start) if door_session !door_lifetime',
      ),
    );
    assert.ok(lines.includes('stick-table type string len 160 size 200k expire 10m store gpt0'));
    assert.ok(
      renderDoor({ ...spec(), sessionIdleMinutes: 3 })
        .split('\n')
        .map((l) => l.trim())
        .includes('stick-table type string len 160 size 200k expire 3m store gpt0'),
    );
    // A lifetime: the key holds the lifetimes passed since the session's first request.
    assert.ok(lines.includes('http-request sc-set-gpt0(2) date if door_session door_lifetime { sc_get_gpt0(2) eq 0 }'));
    assert.ok(
      lines.includes(
        'http-request set-var(txn.period) date,sub(txn.start),div(txn.lifesec) if door_session door_lifetime',
      ),
    );
    assert.ok(
      lines.includes(
        'http-request set-var(txn.key) var(txn.session),concat(/,txn.period) if door_session door_lifetime',
      ),
    );
    // A plain credential sets no key: round robin.
    assert.equal(lines.filter((l) => l.startsWith('http-request set-var(txn.key)')).length, 2);
  });

  it('takes the session user names of the grammar, and only those', () => {
    const acl = lines.find((l) => l.startsWith('acl door_session '))!;
    assert.ok(acl.endsWith(DOOR_SESSION_USER_RE.source.replace('^(.+)', '')), acl);
    for (const ok of [
      'alice-session-abc12',
      'alice-session-abc12-lifetime-10',
      'a-session-x_1.2-lifetime-1440',
      'a.b@c-session-Z-lifetime-1',
    ]) {
      assert.ok(DOOR_SESSION_USER_RE.test(ok), ok);
    }
    for (const no of [
      'alice',
      'alice-session-',
      'alice-session-a-b',
      'alice-session-x-lifetime-0',
      'alice-session-x-lifetime-1441',
      'alice-session-x-lifetime-',
    ]) {
      assert.ok(!DOOR_SESSION_USER_RE.test(no), no);
    }
    assert.equal(DOOR_SESSION_USER_RE.exec('alice-session-abc12-lifetime-10')?.[1], 'alice');
  });

  it('refuses every reserved range (contracts/cidr.ts) for every credential, in report mode too', () => {
    assert.ok(
      lines.includes(`acl door_reserved var(txn.dsthost) -m ip ${RESERVED_DESTINATIONS.map((r) => r.cidr).join(' ')}`),
    );
    assert.ok(lines.includes('http-request set-var(txn.reason) str(reserved) if door_reserved'));
    assert.ok(
      lines.includes(
        'http-request set-var(txn.decision) str(report) if { var(txn.reason) -m found } { var(txn.mode) -m str report } !{ var(txn.reason) -m str reserved }',
      ),
    );
    const open = renderDoor({ ...spec(), allowReserved: ['10.231.1.1/32'] })
      .split('\n')
      .map((l) => l.trim());
    assert.ok(open.includes('acl door_reserved_open var(txn.dsthost) -m ip 10.231.1.1/32'));
    assert.ok(open.includes('http-request set-var(txn.reason) str(reserved) if door_reserved !door_reserved_open'));
  });

  it('writes one JSON decision line per request on stdout unless decisionLog is false', () => {
    assert.ok(lines.includes('log stdout format raw local0'));
    const format = lines.find((l) => l.startsWith('log-format '))!;
    for (const key of [
      'msg',
      'credential',
      'session',
      'exit',
      'destination',
      'decision',
      'reason',
      'connect_ms',
      'bytes_in',
      'bytes_out',
      'status',
    ]) {
      assert.ok(format.includes(`\\"${key}\\":`), key);
    }
    assert.ok(format.includes('\\"msg\\":\\"CANONICAL-PROXY-DECISION\\"'));
    assert.ok(format.includes('%[var(txn.dst),json(utf8s)]'), 'strings escaped for JSON');
    const quiet = renderDoor({ ...spec(), decisionLog: false });
    assert.ok(!/^\s*log(-format)? /m.test(quiet), quiet);
  });

  it('keeps per-credential counters in stick tables', () => {
    assert.ok(lines.includes('http-request track-sc0 var(txn.user) table door_creds'));
    assert.ok(lines.includes('http-request track-sc1 var(txn.user) table door_tunnels if METH_CONNECT'));
    assert.ok(
      lines.includes(
        'stick-table type string len 64 size 100k expire 1d store http_req_cnt,http_req_rate(1s),bytes_in_cnt,bytes_out_cnt',
      ),
    );
    assert.ok(lines.includes('stick-table type string len 64 size 100k expire 1d store conn_cur,conn_cnt'));
  });

  it('renders a door without exits (added later through the runtime API)', () => {
    const none = renderDoor({ ...spec(), exits: [] });
    assert.ok(!/^\s*server /m.test(none));
    assert.match(none, /^backend exits$/m);
  });
});

describe('renderDoor with per-credential rules and limits', () => {
  const s = spec();
  s.users.push(
    {
      name: 'narrow',
      passwordHash: H6,
      rules: {
        mode: 'enforce',
        allowDestinations: ['.example.org', 'api.example.com', '192.0.2.0/24'],
        denyDestinations: ['bad.example.org'],
      },
      limits: { requestsPerSecond: 5, concurrentTunnels: 2 },
    },
    { name: 'trial', passwordHash: H6, rules: { mode: 'report', denyDestinations: ['2001:db8::/32'] } },
  );
  const lines = renderDoor(s)
    .split('\n')
    .map((l) => l.trim());

  it('matches names, subdomains and blocks against the destination host', () => {
    assert.ok(lines.includes('acl door_u2 var(txn.user) -m str narrow'));
    assert.ok(lines.includes('acl door_u2_allow var(txn.dsthost) -m ip 192.0.2.0/24'));
    assert.ok(lines.includes('acl door_u2_allow var(txn.dsthost) -m str api.example.com example.org'));
    assert.ok(lines.includes('acl door_u2_allow var(txn.dsthost) -m end .example.org'));
    assert.ok(lines.includes('acl door_u2_deny var(txn.dsthost) -m str bad.example.org'));
    assert.ok(lines.includes('acl door_u3_deny var(txn.dsthost) -m ip 2001:db8::/32'));
    assert.ok(!lines.some((l) => l.startsWith('acl door_u0')), 'a credential without rules has no ACL');
  });

  it('checks the deny list, then the allow list; report mode only marks', () => {
    const deny = lines.indexOf(
      'http-request set-var(txn.reason) str(denyDestinations) if door_u2 door_u2_deny !{ var(txn.reason) -m found }',
    );
    const allow = lines.indexOf(
      'http-request set-var(txn.reason) str(allowDestinations) if door_u2 !door_u2_allow !{ var(txn.reason) -m found }',
    );
    const reserved = lines.indexOf('http-request set-var(txn.reason) str(reserved) if door_reserved');
    assert.ok(reserved > 0 && deny > reserved && allow > deny);
    assert.ok(lines.includes('http-request set-var(txn.mode) str(report) if door_u3'));
    assert.ok(!lines.includes('http-request set-var(txn.mode) str(report) if door_u2'));
    assert.ok(
      lines.some(
        (l) => l.startsWith('http-request return status 403 ') && l.endsWith('if { var(txn.decision) -m str deny }'),
      ),
    );
  });

  it('answers 429 over the rate and 503 over the open tunnels', () => {
    assert.ok(
      lines.includes('http-request set-var(txn.over) str(requestsPerSecond) if door_u2 { sc_http_req_rate(0) gt 5 }'),
    );
    assert.ok(
      lines.includes(
        'http-request set-var(txn.over) str(concurrentTunnels) if METH_CONNECT door_u2 { sc_conn_cur(1) gt 2 }',
      ),
    );
    const r429 = lines.findIndex((l) => l.startsWith('http-request return status 429 '));
    const track = lines.indexOf('http-request track-sc1 var(txn.user) table door_tunnels if METH_CONNECT');
    const r503 = lines.findIndex((l) => l.startsWith('http-request return status 503 '));
    assert.ok(r429 > 0 && track > r429 && r503 > track, 'a refused request never counts as a tunnel');
  });
});

describe('parseDoorCredentialTable', () => {
  // HAProxy 2.6.12's answers to `show table door_creds` and `show table door_tunnels` (the
  // tunnels one after a CONNECT of alice with one tunnel open), concatenated.
  const text = [
    '# table: door_creds, type: string, size:102400, used:3',
    '0x5578bfeab390: key=alice use=0 exp=86399628 http_req_cnt=2 http_req_rate(1000)=1 bytes_in_cnt=354 bytes_out_cnt=434',
    '0x5578bfeb1470: key=bob use=0 exp=86399644 http_req_cnt=1 http_req_rate(1000)=1 bytes_in_cnt=171 bytes_out_cnt=217',
    '0x7f6068045df0: key=carol@example use=1 exp=86399686 http_req_cnt=12 http_req_rate(1000)=2 bytes_in_cnt=3050 bytes_out_cnt=1048576',
    '',
    '',
    '# table: door_tunnels, type: string, size:102400, used:1',
    '0x7f6068041768: key=alice use=1 exp=86399005 conn_cnt=3 conn_cur=1',
    '',
    '',
    '# table: door_sessions, type: string, size:204800, used:1',
    '0x7f6068041769: key=alice-session-x use=0 exp=86399005 gpt0=1796562866',
    '',
  ].join('\n');

  it('merges both tables per credential and ignores other tables', () => {
    const m = parseDoorCredentialTable(text);
    assert.deepEqual([...m.keys()], ['alice', 'bob', 'carol@example']);
    assert.deepEqual(m.get('alice'), {
      requests: 2,
      requestRate: 1,
      bytesIn: 354,
      bytesOut: 434,
      tunnelsOpen: 1,
      tunnels: 3,
    });
    assert.deepEqual(m.get('bob'), {
      requests: 1,
      requestRate: 1,
      bytesIn: 171,
      bytesOut: 217,
      tunnelsOpen: 0,
      tunnels: 0,
    });
    assert.equal(m.get('carol@example')?.bytesOut, 1048576);
  });

  it('reads the tables in either order, and an empty answer as no credentials', () => {
    const [creds, tunnels] = text.split('# table: door_tunnels');
    assert.deepEqual(
      parseDoorCredentialTable(`# table: door_tunnels${tunnels}${creds}`),
      parseDoorCredentialTable(text),
    );
    assert.equal(parseDoorCredentialTable('# table: door_creds, type: string, size:102400, used:0\n\n').size, 0);
    assert.equal(parseDoorCredentialTable('').size, 0);
  });

  it('ignores entries before any table header', () => {
    assert.equal(parseDoorCredentialTable('0x1: key=alice use=0 exp=1 http_req_cnt=2\n').size, 0);
  });
});

describe('validateDoor rejects', () => {
  const bad: [string, (s: DoorSpec) => void, RegExp][] = [
    ['listen.host', (s) => (s.listen.host = '::1'), /IPv4/],
    ['listen.port', (s) => (s.listen.port = 0), /1 to 65535/],
    ['exits', (s) => (s.exits = 'exit-a' as never), /not a list/],
    ['exits[0].name', (s) => (s.exits[0]!.name = 'exit a'), /rename the exit/],
    ['exits[1].name', (s) => (s.exits[1]!.name = 'exit-a'), /listed twice/],
    ['exits[0].name', (s) => (s.exits[0]!.name = '-x'), /starting with a letter or digit/],
    ['exits[1].host', (s) => (s.exits[1]!.host = '10.0.0.5 backup'), /IPv4 address or a DNS name/],
    ['exits[1].port', (s) => (s.exits[1]!.port = 70000), /1 to 65535/],
    ['exits[0].port', (s) => (s.exits[0]!.port = 3128.5), /integer/],
    ['users', (s) => (s.users = []), /at least one user/],
    ['users[0].name', (s) => (s.users[0]!.name = 'bob smith'), /rename the user/],
    ['users[1].name', (s) => (s.users[1]!.name = 'user'), /listed twice/],
    ['users[0].name', (s) => (s.users[0]!.name = 'user-session-1'), /marks a session/],
    ['users[0].passwordHash', (s) => (s.users[0]!.passwordHash = 'secret'), /openssl passwd -6/],
    ['users[0].passwordHash', (s) => (s.users[0]!.passwordHash = '$apr1$abcdefgh$0123456789abcdefghijkl'), /apr1/],
    ['users[0].passwordHash', (s) => (s.users[0]!.passwordHash = `${H6}\n  user x`), /SHA-512/],
    ['runtimeSocket', (s) => (s.runtimeSocket = 'door.sock'), /absolute path/],
    ['runtimeSocket', (s) => (s.runtimeSocket = '/run/door sock'), /absolute path/],
    ['health.interMs', (s) => (s.health.interMs = 10), /100 to 3600000/],
    ['health.fall', (s) => (s.health.fall = 0), /failed checks/],
    ['health.rise', (s) => (s.health.rise = 1.5), /passed checks/],
    ['allowReserved', (s) => (s.allowReserved = '10.0.0.0/8' as never), /at most 256 CIDR blocks/],
    ['allowReserved[0]', (s) => (s.allowReserved = ['10.0.0.1/8']), /write the network as 10\.0\.0\.0\/8/],
    ['allowReserved[0]', (s) => (s.allowReserved = ['192.0.2.0/24']), /not inside one reserved range/],
    ['allowReserved[1]', (s) => (s.allowReserved = ['fd00::/8', 'FD00::1/128']), /write it as fd00::1\/128/],
    ['users[1].rules', (s) => (s.users[1]!.rules = 'enforce' as never), /give \{mode/],
    ['users[1].rules.mode', (s) => (s.users[1]!.rules = { mode: 'audit' as never }), /"enforce" or "report"/],
    ['users[1].rules.allow', (s) => (s.users[1]!.rules = { mode: 'enforce', allow: [] } as never), /not a rules field/],
    [
      'users[1].rules.allowDestinations',
      (s) => (s.users[1]!.rules = { mode: 'enforce', allowDestinations: [] }),
      /leave the field out to allow every destination/,
    ],
    [
      'users[1].rules.allowDestinations[1]',
      (s) => (s.users[1]!.rules = { mode: 'enforce', allowDestinations: ['.example.org', 'Example.com'] }),
      /lowercase: example\.com/,
    ],
    [
      'users[1].rules.allowDestinations[0]',
      (s) => (s.users[1]!.rules = { mode: 'enforce', allowDestinations: ['192.0.2.1/24'] }),
      /192\.0\.2\.0\/24/,
    ],
    [
      'users[1].rules.allowDestinations[0]',
      (s) => (s.users[1]!.rules = { mode: 'enforce', allowDestinations: ['exa mple.org'] }),
      /neither a CIDR block nor/,
    ],
    [
      'users[1].rules.allowDestinations[0]',
      (s) => (s.users[1]!.rules = { mode: 'enforce', allowDestinations: ['10.1.0.0/16'] }),
      /add 10\.1\.0\.0\/16 to allowReserved/,
    ],
    [
      'users[1].rules.denyDestinations[0]',
      (s) => (s.users[1]!.rules = { mode: 'report', denyDestinations: [7 as never] }),
      /must be a string/,
    ],
    ['users[1].limits', (s) => (s.users[1]!.limits = 5 as never), /requestsPerSecond\?/],
    ['users[1].limits.rps', (s) => (s.users[1]!.limits = { rps: 5 } as never), /not a limits field/],
    ['users[1].limits.requestsPerSecond', (s) => (s.users[1]!.limits = { requestsPerSecond: 0 }), /1 to 1000000/],
    [
      'users[1].limits.concurrentTunnels',
      (s) => (s.users[1]!.limits = { concurrentTunnels: 2.5 }),
      /tunnels allowed open/,
    ],
    ['decisionLog', (s) => (s.decisionLog = 'yes' as never), /true or false/],
    ['sessionIdleMinutes', (s) => (s.sessionIdleMinutes = 0), /whole minutes, 1-1440/],
    ['sessionIdleMinutes', (s) => (s.sessionIdleMinutes = 2.5), /whole minutes, 1-1440/],
  ];
  for (const [field, mutate, fix] of bad) {
    it(`a bad ${field} (${mutate.toString().replace(/^\(s\) => /, '')})`, () => {
      const s = spec();
      mutate(s);
      assert.throws(
        () => renderDoor(s),
        (err: unknown) => {
          assert.ok(err instanceof DoorSpecError, String(err));
          assert.equal(err.code, 'DOOR_SPEC_INVALID');
          assert.equal(errorKind(err), 'Permanent');
          assert.equal(err.field, field);
          assert.ok(err.message.startsWith(`${field}: `), err.message);
          assert.match(err.message, fix);
          return true;
        },
      );
    });
  }

  it('nothing when a credential’s allowed block lies in a reserved block that allowReserved opens', () => {
    const s = spec();
    s.allowReserved = ['10.0.0.0/8'];
    s.users[1]!.rules = { mode: 'enforce', allowDestinations: ['10.1.0.0/16'], denyDestinations: ['10.2.0.0/16'] };
    validateDoor(s);
  });

  it('never prints a refused password hash (it may be a password)', () => {
    const s = spec();
    s.users[0]!.passwordHash = 'hunter2';
    assert.throws(
      () => validateDoor(s),
      (err: Error) => !err.message.includes('hunter2'),
    );
  });
});
