/**
 * lib/door/haproxy.ts without HAProxy: what the rendered configuration says (the lines the data
 * path depends on) and every rejection of a bad spec, each naming the field and the fix. The
 * real parser (`haproxy -c`) and the real data path run in test/integration/door-haproxy.test.ts,
 * after scripts/test has installed haproxy (this file runs in `scripts/test unit` too, where
 * nothing is installed).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DoorSpecError, renderDoor, validateDoor } from '../../lib/door/haproxy.ts';
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
    { name: 'user-session-1', passwordHash: H6 },
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
    assert.ok(lines.includes(`user user-session-1 password ${H6}`));
    assert.ok(lines.includes(`user alice@example password ${H5}`));
    assert.ok(lines.includes('http-request set-var(txn.user) http_auth_group(door-users)'));
    const ret = lines.find((l) => l.startsWith('http-request return status 407'));
    assert.ok(ret?.includes(`hdr Proxy-Authenticate 'Basic realm="egress"'`), ret);
    assert.ok(ret?.endsWith('unless { var(txn.user) -m found }'), ret);
    assert.ok(!conf.includes('insecure-password'));
  });

  it('removes Proxy-Authorization and keeps the client’s own Authorization', () => {
    const del = lines.indexOf('http-request del-header Proxy-Authorization');
    const check = lines.indexOf('http-request set-var(txn.user) http_auth_group(door-users)');
    assert.ok(check > 0 && del > check, 'removed after the check');
    assert.ok(
      lines.includes(
        'http-request set-header Authorization %[var(txn.origin_auth)] if { var(txn.origin_auth) -m found }',
      ),
    );
  });

  it('hashes the user name consistently over the exits, with active and passive checks', () => {
    assert.ok(lines.includes('balance hash var(txn.user)'));
    assert.ok(lines.includes('hash-type consistent'));
    assert.ok(lines.includes('retries 3'));
    assert.ok(lines.includes('option redispatch 1'));
    const check = 'check inter 1000 fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down';
    assert.ok(lines.includes(`server exit-a 10.0.0.5:3128 ${check}`));
    assert.ok(lines.includes(`server exit-b exit-b.pool.internal:3129 ${check}`));
    assert.ok(!conf.includes('shutdown-sessions'), 'an exit marked down or in maint keeps its open tunnels');
  });
});

describe('validateDoor rejects', () => {
  const bad: [string, (s: DoorSpec) => void, RegExp][] = [
    ['listen.host', (s) => (s.listen.host = '::1'), /IPv4/],
    ['listen.port', (s) => (s.listen.port = 0), /1 to 65535/],
    ['exits', (s) => (s.exits = []), /at least one exit/],
    ['exits[0].name', (s) => (s.exits[0]!.name = 'exit a'), /rename the exit/],
    ['exits[1].name', (s) => (s.exits[1]!.name = 'exit-a'), /listed twice/],
    ['exits[0].name', (s) => (s.exits[0]!.name = '-x'), /starting with a letter or digit/],
    ['exits[1].host', (s) => (s.exits[1]!.host = '10.0.0.5 backup'), /IPv4 address or a DNS name/],
    ['exits[1].port', (s) => (s.exits[1]!.port = 70000), /1 to 65535/],
    ['exits[0].port', (s) => (s.exits[0]!.port = 3128.5), /integer/],
    ['users', (s) => (s.users = []), /at least one user/],
    ['users[0].name', (s) => (s.users[0]!.name = 'bob smith'), /rename the user/],
    ['users[1].name', (s) => (s.users[1]!.name = 'user-session-1'), /listed twice/],
    ['users[0].passwordHash', (s) => (s.users[0]!.passwordHash = 'secret'), /openssl passwd -6/],
    ['users[0].passwordHash', (s) => (s.users[0]!.passwordHash = '$apr1$abcdefgh$0123456789abcdefghijkl'), /apr1/],
    ['users[0].passwordHash', (s) => (s.users[0]!.passwordHash = `${H6}\n  user x`), /SHA-512/],
    ['runtimeSocket', (s) => (s.runtimeSocket = 'door.sock'), /absolute path/],
    ['runtimeSocket', (s) => (s.runtimeSocket = '/run/door sock'), /absolute path/],
    ['health.interMs', (s) => (s.health.interMs = 10), /100 to 3600000/],
    ['health.fall', (s) => (s.health.fall = 0), /failed checks/],
    ['health.rise', (s) => (s.health.rise = 1.5), /passed checks/],
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

  it('never prints a refused password hash (it may be a password)', () => {
    const s = spec();
    s.users[0]!.passwordHash = 'hunter2';
    assert.throws(
      () => validateDoor(s),
      (err: Error) => !err.message.includes('hunter2'),
    );
  });
});
