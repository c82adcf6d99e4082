/**
 * The door lib/door/haproxy.ts renders, parsed by HAProxy (`haproxy -c`) and run on 127.0.0.1 in
 * front of two real Squid exits (Debian's, unpacked by scripts/test into EP_SQUID_ROOT) and a
 * loopback target that answers with the Via header (which exit carried the request) and whether a
 * Proxy-Authorization header reached it. Checked: each `user-session-<id>` always leaves by one
 * exit and both exits get sessions, while a plain credential's requests spread over both; a
 * session with a lifetime keeps its exit until its lifetime has passed; CONNECT and plain GET go
 * through; no or wrong credentials get 407 with Proxy-Authenticate and no credential reaches an
 * exit or the target; per-credential rules (403 enforce, report passes and is logged), the
 * reserved ranges refused for every credential, 429 over the rate, 503 over the open tunnels,
 * bytes counted per credential, one JSON decision line per request; an exit added, enabled and
 * deleted through the runtime API; an exit put in maint through the runtime socket keeps a
 * CONNECT tunnel open through it working; an exit killed moves its sessions to the other, each
 * session losing at most one request, and is marked down within 5 s. haproxy comes from
 * scripts/test's TEST_PACKAGES: without it this fails.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import {
  DOOR_CREDENTIAL_TABLE,
  DOOR_DECISION_MSG,
  DOOR_IDLE_TABLE,
  DOOR_SESSION_TABLE,
  DOOR_TUNNEL_TABLE,
  doorServerOptions,
  parseDoorCredentialTable,
  renderDoor,
} from '../../lib/door/haproxy.ts';
import type { DoorSpec, DoorUser } from '../../lib/door/haproxy.ts';
import { runtimeCommand } from '../../lib/door/runtime.ts';
import { basic, Tunnel, viaDoor } from '../support/door-client.ts';
import type { Answer } from '../support/door-client.ts';
import { killGroup, listening, NO_SQUID, SQUID_ROOT, startSquidExit } from '../support/squid-exit.ts';
import { freePort } from '../support/sshd.ts';

const HOST = '127.0.0.1';
const BOUND_MS = 10_000;
const NO_HAPROXY = 'no haproxy on PATH: scripts/test installs it (TEST_PACKAGES); or apt-get install haproxy';
// `openssl passwd -6 -salt abcdefgh secret`.
const HASH = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';
const SESSIONS = Array.from({ length: 10 }, (_, i) => `user-session-${i}`);
const TUNNEL_USER = 'user-session-tunnel';
const HEALTH = { interMs: 500, fall: 2, rise: 1 };
/** The credentials of the door under test; the target (127.0.0.1) is opened by allowReserved. */
const USERS: DoorUser[] = [
  { name: 'user', passwordHash: HASH },
  // Allowed only the target's address.
  { name: 'narrow', passwordHash: HASH, rules: { mode: 'enforce', allowDestinations: ['127.0.0.1/32'] } },
  { name: 'denied', passwordHash: HASH, rules: { mode: 'enforce', denyDestinations: ['.localhost', '127.0.0.1/32'] } },
  { name: 'reporter', passwordHash: HASH, rules: { mode: 'report', allowDestinations: ['.example.org'] } },
  { name: 'limited', passwordHash: HASH, limits: { requestsPerSecond: 2 } },
  { name: 'tunneler', passwordHash: HASH, limits: { concurrentTunnels: 2 } },
  { name: 'counted', passwordHash: HASH },
];

const children: ChildProcess[] = [];
/**
 * Starts `argv` in its own process group (killed whole in `after`); `log()` is its recent output,
 * `stdout()` all it wrote on stdout (at most 4 MB).
 */
function start(argv: string[], env = process.env): { proc: ChildProcess; log: () => string; stdout: () => string } {
  const proc = spawn(argv[0]!, argv.slice(1), { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let out = '';
  let stdout = '';
  const keep = (c: Buffer): void => void (out = (out + c.toString()).slice(-10_000));
  proc.stdout.on('data', (c: Buffer) => {
    keep(c);
    if (stdout.length < 4_000_000) stdout += c.toString();
  });
  proc.stderr.on('data', keep);
  return { proc, log: () => out, stdout: () => stdout };
}
describe('the door (HAProxy) in front of two Squid exits, on loopback', { timeout: 120_000 }, () => {
  let dir: string;
  let target: number;
  let door: number;
  let sock: string;
  let doorLog: () => string = () => '';
  let doorStdout: () => string = () => '';
  const exits = new Map<string, { port: number; proc: ChildProcess }>();
  /** The exit (its name) each session leaves by, from the first checks. */
  const home = new Map<string, string>();
  const via = (a: Answer): string => /via=.*\b(exit-[ab])\b/.exec(a.body)?.[1] ?? `?${a.status} ${a.body}`;

  before(async () => {
    assert.equal(spawnSync('haproxy', ['-v']).status, 0, NO_HAPROXY);
    assert.ok(existsSync(join(SQUID_ROOT, 'usr/sbin/squid')), NO_SQUID);
    dir = mkdtempSync(join(tmpdir(), 'ep-door-'));
    chmodSync(dir, 0o777); // Squid run as root drops to nobody
    target = await freePort();
    const code = `require('http').createServer((q, s) => { const b = 'via=' + (q.headers.via || '') + ' pa=' + (q.headers['proxy-authorization'] || '-') + ' auth=' + (q.headers.authorization || '-') + '\\n'; s.writeHead(200, { 'content-length': Buffer.byteLength(b) }); s.end(b); }).listen(${target}, '${HOST}');`;
    const t = start([process.execPath, '-e', code]);
    await listening(target, 'target', t.log);
    for (const name of ['exit-a', 'exit-b']) {
      const e = await startSquidExit(dir, name);
      children.push(e.proc);
      exits.set(name, { port: e.port, proc: e.proc });
    }
    door = await freePort();
    sock = join(dir, 'door.sock');
    const spec: DoorSpec = {
      listen: { host: HOST, port: door },
      exits: [...exits].map(([name, e]) => ({ name, host: HOST, port: e.port })),
      users: USERS,
      runtimeSocket: sock,
      health: HEALTH,
      allowReserved: [`${HOST}/32`],
    };
    writeFileSync(join(dir, 'door.cfg'), renderDoor(spec));
    const h = start(['haproxy', '-db', '-f', join(dir, 'door.cfg')]);
    doorLog = h.log;
    doorStdout = h.stdout;
    await listening(door, 'haproxy', h.log);
    for (const t0 = Date.now(); !existsSync(sock); await sleep(20)) {
      assert.ok(Date.now() - t0 < BOUND_MS, `no runtime socket ${sock}:\n${h.log()}`);
    }
  });

  after(async () => {
    for (const c of children) killGroup(c);
    await Promise.all(
      children.map((c) =>
        c.exitCode !== null || c.signalCode !== null
          ? Promise.resolve()
          : Promise.race([new Promise((r) => c.once('exit', r)), sleep(3000)]),
      ),
    );
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('haproxy -c accepts the rendered configurations', () => {
    const base: DoorSpec = {
      listen: { host: '0.0.0.0', port: 3128 },
      exits: [{ name: 'exit-1', host: 'localhost', port: 3128 }],
      users: [{ name: 'alice@example', passwordHash: HASH }],
      runtimeSocket: join(dir, 'check.sock'),
      health: { interMs: 1000, fall: 3, rise: 2 },
    };
    const many: DoorSpec = {
      ...base,
      exits: Array.from({ length: 20 }, (_, i) => ({ name: `exit-${i}`, host: `10.0.${i}.1`, port: 3128 + i })),
      users: [
        ...USERS,
        ...Array.from({ length: 50 }, (_, i) => ({ name: `user-${i}`, passwordHash: HASH })),
        {
          name: 'ruled',
          passwordHash: HASH,
          rules: {
            mode: 'report',
            allowDestinations: ['.example.org', 'api.example.com', '192.0.2.0/24', '2001:db8::/32'],
          },
          limits: { requestsPerSecond: 100, concurrentTunnels: 10 },
        },
      ],
      allowReserved: ['127.0.0.1/32', '10.231.1.1/32', 'fd00::/8'],
      decisionLog: false,
    };
    const none: DoorSpec = { ...base, exits: [] };
    for (const [name, spec] of Object.entries({ base, many, none })) {
      const file = join(dir, `check-${name}.cfg`);
      writeFileSync(file, renderDoor(spec));
      const r = spawnSync('haproxy', ['-c', '-f', file], { encoding: 'utf8', timeout: BOUND_MS });
      assert.equal(r.status, 0, `haproxy -c ${name}: ${r.stdout}${r.stderr}`);
    }
  });

  it('pins each session to one exit, and both exits get sessions', async () => {
    const seen = new Map<string, Set<string>>(SESSIONS.map((s) => [s, new Set()]));
    for (let i = 0; i < 100; i++) {
      const user = SESSIONS[i % SESSIONS.length]!;
      const a = await viaDoor(door, `http://${HOST}:${target}/r${i}`, basic(user));
      assert.equal(a.status, 200, a.body);
      assert.match(a.body, / pa=- /, 'Proxy-Authorization reached the target');
      seen.get(user)!.add(via(a));
    }
    for (const [user, set] of seen) {
      assert.equal(set.size, 1, `${user} left by ${[...set].join(' and ')}`);
      home.set(user, [...set][0]!);
    }
    assert.deepEqual(new Set(home.values()), new Set(['exit-a', 'exit-b']), 'both exits get sessions');
  });

  it('carries CONNECT and plain GET, and keeps the client’s own Authorization', async () => {
    const t = await Tunnel.open(door, target, SESSIONS[0]!);
    try {
      assert.match(await t.get(target), /^via= pa=- auth=-/);
    } finally {
      t.close();
    }
    const a = await viaDoor(door, `http://${HOST}:${target}/plain`, basic(SESSIONS[1]!), {
      authorization: 'Bearer origin',
    });
    assert.equal(a.status, 200);
    assert.match(a.body, / pa=- auth=Bearer origin/);
  });

  it('answers no or wrong credentials with 407 and Proxy-Authenticate; no credential passes the door', async () => {
    const cases: [string, string | undefined][] = [
      [`http://${HOST}:${target}/none`, undefined],
      [`http://${HOST}:${target}/wrong`, basic(SESSIONS[0]!, 'wrong')],
      [`http://${HOST}:${target}/unknown`, basic('nobody-here')],
      [`${HOST}:${target}`, undefined],
      [`${HOST}:${target}`, basic(SESSIONS[0]!, 'wrong')],
    ];
    for (const [url, auth] of cases) {
      const a = await viaDoor(door, url, auth);
      assert.equal(a.status, 407, `${url} ${auth ?? '(none)'}: ${a.status}`);
      assert.match(String(a.headers['proxy-authenticate']), /^Basic realm="egress"$/);
    }
    for (const name of exits.keys()) {
      const log = readFileSync(join(dir, `${name}.access.log`), 'utf8')
        .trim()
        .split('\n');
      assert.ok(
        log.length > 0 && log.every((l) => l.endsWith(' pa=-')),
        `${name} saw a credential:\n${log.join('\n')}`,
      );
      assert.ok(!log.some((l) => /\/(none|wrong|unknown) /.test(l)), `${name} saw a refused request`);
    }
    // The credential cache: one entry per verified credential and password (every session of
    // `user` shares it), the wrong passwords above were not let in by it nor entered into it.
    const cache = (await runtimeCommand(sock, 'show map /dev/null')).trim().split('\n');
    const { createHash } = await import('node:crypto');
    const key = createHash('sha256').update('user:secret').digest('hex').toUpperCase();
    assert.ok(
      cache.some((l) => l.endsWith(` ${key} user`)),
      `user:secret cached: ${cache.join('\n')}`,
    );
    assert.ok(!cache.some((l) => l.includes(createHash('sha256').update('user:wrong').digest('hex').toUpperCase())));
    assert.equal(cache.filter((l) => l.endsWith(' user')).length, 1, 'one entry for every session of user');
  });

  /** The decision lines HAProxy wrote so far, each parsed (a line that is not JSON fails the test). */
  const decisions = (): Record<string, unknown>[] =>
    doorStdout()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          throw new Error(`a decision line is not JSON: ${l}`);
        }
      });
  /** Waits (bounded) until `n` decision lines match `pred` (a line is written once its request ends). */
  async function logged(pred: (d: Record<string, unknown>) => boolean, n = 1): Promise<Record<string, unknown>[]> {
    for (const t0 = Date.now(); ; await sleep(50)) {
      const found = decisions().filter(pred);
      if (found.length >= n) return found;
      assert.ok(
        Date.now() - t0 < BOUND_MS,
        `${found.length} of ${n} decision lines after ${BOUND_MS} ms:\n${doorStdout().slice(-3000)}`,
      );
    }
  }
  /** The per-credential counters from both tables. */
  const counters = async (): Promise<ReturnType<typeof parseDoorCredentialTable>> =>
    parseDoorCredentialTable(
      (await runtimeCommand(sock, `show table ${DOOR_CREDENTIAL_TABLE}`)) +
        (await runtimeCommand(sock, `show table ${DOOR_TUNNEL_TABLE}`)),
    );
  /** One request written raw on a new connection, read until the door closes it: [bytes sent, bytes read, text]. */
  function raw(request: string): Promise<[number, number, string]> {
    return new Promise((resolve, reject) => {
      const c = net.connect(door, HOST);
      let got = Buffer.alloc(0);
      c.setTimeout(BOUND_MS, () => c.destroy(new Error(`no end within ${BOUND_MS} ms: ${request}`)));
      c.on('connect', () => c.write(request));
      c.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
      c.on('end', () => resolve([Buffer.byteLength(request), got.length, got.toString('latin1')]));
      c.on('error', reject);
    });
  }

  it('spreads a plain credential’s requests over both exits', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 40 && seen.size < 2; i++) {
      const a = await viaDoor(door, `http://${HOST}:${target}/plain${i}`, basic('user'));
      assert.equal(a.status, 200, a.body);
      seen.add(via(a));
    }
    assert.deepEqual(seen, new Set(['exit-a', 'exit-b']));
  });

  /** The one exit four plain GETs of `user` leave by (asserted to be one). */
  const exitOf = async (user: string, tag: string): Promise<string> => {
    const seen = new Set<string>();
    for (let k = 0; k < 4; k++) seen.add(via(await viaDoor(door, `http://${HOST}:${target}/${tag}${k}`, basic(user))));
    assert.equal(seen.size, 1, `${user} (${tag}) left by ${[...seen].join(' and ')}`);
    return [...seen][0]!;
  };

  it('keeps a session with a lifetime on one exit until its lifetime has passed, then chooses again', async () => {
    const lifetimes = Array.from({ length: 10 }, (_, i) => `user-session-L${i}-lifetime-10`);
    const first = new Map<string, string>();
    for (const u of lifetimes) first.set(u, await exitOf(u, 'first'));
    const table = await runtimeCommand(sock, `show table ${DOOR_SESSION_TABLE}`);
    const started = new Map<string, number>();
    for (const u of lifetimes) {
      const session = u.replace(/-lifetime-\d+$/, '');
      const m = new RegExp(`key=${session} .*gpt0=(\\d+)`).exec(table);
      assert.ok(m && Number(m[1]) > 0, `no start time for ${session} in ${DOOR_SESSION_TABLE}:\n${table}`);
      started.set(u, Number(m[1]));
    }
    assert.ok(!/key=user-session-0 /.test(table), 'a session without lifetime has no clock');
    // Ten minutes pass: the first request of each session moves back by one lifetime.
    for (const u of lifetimes) {
      const session = u.replace(/-lifetime-\d+$/, '');
      assert.equal(
        await runtimeCommand(sock, `set table ${DOOR_SESSION_TABLE} key ${session} data.gpt0 ${started.get(u)! - 600}`),
        '\n',
      );
    }
    let moved = 0;
    for (const u of lifetimes) if ((await exitOf(u, 'second')) !== first.get(u)) moved++;
    assert.ok(moved > 0, 'no session changed exit after its lifetime');
    const lines = await logged(
      (d) => typeof d['session'] === 'string' && d['session'].startsWith('user-session-L'),
      80,
    );
    assert.ok(lines.every((d) => d['credential'] === 'user' && d['decision'] === 'allow'));
  });

  it('ends a session without a lifetime once it is idle: its next request chooses its exit again', async () => {
    const sessions = Array.from({ length: 20 }, (_, i) => `user-session-I${i}`);
    const first = new Map<string, string>();
    for (const u of sessions) first.set(u, await exitOf(u, 'first'));
    const table = await runtimeCommand(sock, `show table ${DOOR_IDLE_TABLE}`);
    for (const u of sessions) {
      const m = new RegExp(`key=${u} .*gpt0=(\\d+)`).exec(table);
      assert.ok(m && Number(m[1]) > 0, `no start for ${u} in ${DOOR_IDLE_TABLE}:\n${table}`);
    }
    // Idle past sessionIdleMinutes: the entries expire, as clearing them does here.
    for (const u of sessions) assert.equal(await runtimeCommand(sock, `clear table ${DOOR_IDLE_TABLE} key ${u}`), '\n');
    await sleep(1_100); // a new run of requests starts in a later second
    let moved = 0;
    for (const u of sessions) if ((await exitOf(u, 'again')) !== first.get(u)) moved++;
    assert.ok(moved > 0, 'no session changed exit after it was idle');
  });

  it('refuses a credential’s destinations outside its allow list with 403 at the door', async () => {
    assert.equal((await viaDoor(door, `http://${HOST}:${target}/narrow-ok`, basic('narrow'))).status, 200);
    const elsewhere = await viaDoor(door, `http://localhost:${target}/narrow-no`, basic('narrow'));
    assert.equal(elsewhere.status, 403, elsewhere.body);
    assert.equal(elsewhere.body, 'refused by the door: allowDestinations');
    assert.equal((await viaDoor(door, `localhost:${target}`, basic('narrow'))).status, 403);
    for (const [url, what] of [
      [`http://localhost:${target}/denied-name`, 'a name'],
      [`http://${HOST}:${target}/denied-ip`, 'a block'],
      [`LOCALHOST.:${target}`, 'a name in capitals with a trailing dot'],
    ] as const) {
      assert.equal((await viaDoor(door, url, basic('denied'))).status, 403, `denyDestinations, ${what}`);
    }
    const lines = await logged((d) => d['credential'] === 'narrow' || d['credential'] === 'denied', 6);
    // Lines are written as requests end, not always in the order they were sent.
    const row = (d: Record<string, unknown>): string =>
      [d['credential'], d['decision'], d['reason'], String(d['exit']).replace(/^exit-[ab]$/, 'an exit')].join(' ');
    assert.deepEqual(lines.map(row).sort(), [
      'denied deny denyDestinations -',
      'denied deny denyDestinations -',
      'denied deny denyDestinations -',
      'narrow allow - an exit',
      'narrow deny allowDestinations -',
      'narrow deny allowDestinations -',
    ]);
    for (const name of exits.keys()) {
      const log = readFileSync(join(dir, `${name}.access.log`), 'utf8');
      assert.ok(!/narrow-no|denied-|localhost/i.test(log), `${name} saw a refused request:\n${log}`);
    }
  });

  it('refuses reserved addresses for every credential, report mode included', async () => {
    const cases = [
      'http://10.0.0.1/',
      '10.0.0.1:443',
      'http://169.254.169.254/latest/meta-data/',
      '[::ffff:169.254.169.254]:80',
      'http://100.64.0.1:8080/',
      '192.168.1.1:443',
    ];
    for (const user of ['user', 'narrow', 'reporter', 'user-session-0']) {
      for (const url of cases) {
        const a = await viaDoor(door, url, basic(user));
        assert.equal(a.status, 403, `${user} ${url}: ${a.status} ${a.body}`);
        if (url.startsWith('http://')) assert.equal(a.body, 'refused by the door: reserved');
      }
    }
    const lines = await logged((d) => d['reason'] === 'reserved', 4 * cases.length);
    assert.ok(lines.every((d) => d['decision'] === 'deny' && d['exit'] === '-' && d['status'] === 403));
    for (const name of exits.keys()) {
      const log = readFileSync(join(dir, `${name}.access.log`), 'utf8');
      assert.ok(!/10\.0\.0\.1|169\.254|100\.64|192\.168/.test(log), `${name} saw a reserved destination:\n${log}`);
    }
  });

  it('lets report mode pass and logs it as decision report with the rule', async () => {
    const a = await viaDoor(door, `http://${HOST}:${target}/reported`, basic('reporter'));
    assert.equal(a.status, 200, a.body);
    assert.match(via(a), /^exit-[ab]$/);
    const [line] = await logged((d) => d['credential'] === 'reporter' && d['reason'] === 'allowDestinations');
    assert.equal(line!['decision'], 'report');
    assert.equal(line!['status'], 200);
    assert.equal(line!['destination'], `${HOST}:${target}`);
  });

  it('answers 429 over a credential’s request rate', async () => {
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => viaDoor(door, `http://${HOST}:${target}/rate${i}`, basic('limited'))),
    );
    const by = (s: number): Answer[] => answers.filter((a) => a.status === s);
    assert.equal(by(200).length + by(429).length, 12, answers.map((a) => a.status).join(' '));
    assert.ok(by(200).length >= 1 && by(429).length >= 1, answers.map((a) => a.status).join(' '));
    assert.ok(by(429).every((a) => a.body === 'refused by the door: requestsPerSecond'));
    const lines = await logged((d) => d['credential'] === 'limited', 12);
    assert.equal(
      lines.filter((d) => d['status'] === 429 && d['reason'] === 'requestsPerSecond').length,
      by(429).length,
    );
  });

  it('answers 503 to a CONNECT over a credential’s open tunnels, counting tunnels while open', async () => {
    const open = [await Tunnel.open(door, target, 'tunneler'), await Tunnel.open(door, target, 'tunneler')];
    try {
      for (const t of open) assert.match(await t.get(target), /^via= /);
      assert.equal((await counters()).get('tunneler')?.tunnelsOpen, 2);
      const third = await viaDoor(door, `${HOST}:${target}`, basic('tunneler'));
      assert.equal(third.status, 503);
      // A plain request is no tunnel.
      assert.equal((await viaDoor(door, `http://${HOST}:${target}/no-tunnel`, basic('tunneler'))).status, 200);
      open.pop()!.close();
      for (const t0 = Date.now(); (await counters()).get('tunneler')?.tunnelsOpen !== 1; await sleep(50)) {
        assert.ok(Date.now() - t0 < BOUND_MS, 'the closed tunnel is still counted');
      }
      open.push(await Tunnel.open(door, target, 'tunneler'));
      assert.match(await open[1]!.get(target), /^via= /);
      const [line] = await logged((d) => d['credential'] === 'tunneler' && d['reason'] === 'concurrentTunnels');
      assert.equal(line!['status'], 503);
    } finally {
      for (const t of open) t.close();
    }
  });

  it('counts requests and bytes in and out per credential', async () => {
    const get = `GET http://${HOST}:${target}/counted HTTP/1.1\r\nHost: ${HOST}:${target}\r\nProxy-Authorization: ${basic('counted')}\r\nConnection: close\r\n\r\n`;
    let sent = 0;
    let read = 0;
    let bodies = 0;
    for (let i = 0; i < 3; i++) {
      const [s, r, text] = await raw(get);
      assert.match(text, /^HTTP\/1\.1 200/);
      sent += s;
      read += r;
      bodies += Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1]);
    }
    const t = await Tunnel.open(door, target, 'counted');
    await t.get(target);
    t.close();
    for (
      const t0 = Date.now();
      (await counters()).get('counted')?.requests !== 4 ||
      (await logged((d) => d['credential'] === 'counted', 4)).length < 4;
      await sleep(50)
    ) {
      assert.ok(Date.now() - t0 < BOUND_MS, 'the counters did not reach 4 requests');
    }
    const c = (await counters()).get('counted')!;
    const lines = await logged((d) => d['credential'] === 'counted', 4);
    assert.equal(lines.length, 4, 'one decision line per request');
    const sum = (k: string): number => lines.reduce((n, d) => n + (d[k] as number), 0);
    assert.equal(c.bytesIn, sum('bytes_in'), 'table and log agree on bytes in');
    assert.equal(c.bytesOut, sum('bytes_out'), 'table and log agree on bytes out');
    // The plain requests: the door counted what the client wrote and read.
    const plain = lines.filter((d) => d['method'] === 'GET');
    assert.equal(plain.length, 3);
    const tunnel = lines.filter((d) => d['method'] === 'CONNECT');
    assert.equal(tunnel.length, 1);
    assert.match(String(tunnel[0]!['exit']), /^exit-[ab]$/, 'a tunnel’s line names its exit');
    // HAProxy counts a head as it keeps it (without each header's ": " and CRLF), bodies as they are.
    const plainIn = plain.reduce((n, d) => n + (d['bytes_in'] as number), 0);
    const plainOut = plain.reduce((n, d) => n + (d['bytes_out'] as number), 0);
    assert.ok(plainIn > sent / 2 && plainIn <= sent, `bytes in ${plainIn}, sent ${sent}`);
    assert.ok(plainOut > bodies && plainOut <= read, `bytes out ${plainOut}, read ${read}, bodies ${bodies}`);
    assert.ok(c.bytesOut > read && c.bytesIn > sent, 'the tunnel counted too');
    assert.equal(c.tunnels, 1);
    assert.equal(c.tunnelsOpen, 0);
  });

  it('writes one JSON decision line per request, parsed by jq', async () => {
    const before = decisions().length;
    await viaDoor(door, `http://${HOST}:${target}/nobody`, basic('nobody-here'));
    await viaDoor(door, `http://${HOST}:${target}/json`, basic(SESSIONS[3]!));
    // A request HAProxy's parser refuses (400) is logged too.
    const [, , odd] = await raw(
      `CONNECT a\\"b:443 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic('user')}\r\nConnection: close\r\n\r\n`,
    );
    const lines = (await logged(() => true, before + 3)).slice(before);
    assert.equal(lines.length, 3, JSON.stringify(lines));
    const keys = [
      'time',
      'msg',
      'credential',
      'session',
      'exit',
      'method',
      'destination',
      'decision',
      'reason',
      'connect_ms',
      'bytes_in',
      'bytes_out',
      'status',
    ];
    for (const d of lines) {
      assert.deepEqual(Object.keys(d), keys);
      assert.equal(d['msg'], DOOR_DECISION_MSG);
      assert.match(String(d['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    }
    // Lines are written as requests end: found by status, not by order.
    const [refused, carried, bad] = [407, 200, 400].map((status) => {
      const found = lines.filter((d) => d['status'] === status);
      assert.equal(found.length, 1, `one line of status ${status}: ${JSON.stringify(lines)}`);
      return found[0]!;
    });
    assert.deepEqual(
      [refused!['credential'], refused!['decision'], refused!['reason'], refused!['exit']],
      ['-', 'deny', 'credentials', '-'],
    );
    assert.deepEqual(
      [carried!['credential'], carried!['session'], carried!['decision'], carried!['exit'], carried!['destination']],
      ['user', SESSIONS[3], 'allow', home.get(SESSIONS[3]!), `${HOST}:${target}`],
    );
    assert.ok((carried!['connect_ms'] as number) >= 0);
    assert.match(odd, /^HTTP\/1\.1 400/);
    assert.deepEqual([bad!['credential'], bad!['destination']], ['-', '-']);
    const jq = spawnSync('jq', ['-c', '.msg'], { input: doorStdout(), encoding: 'utf8', timeout: BOUND_MS });
    assert.equal(jq.status, 0, jq.stderr);
    assert.equal(jq.stdout.trim().split('\n').length, decisions().length);
  });

  it('adds an exit through the runtime API with doorServerOptions, and deletes it once in maint', async () => {
    const port = exits.get('exit-a')!.port;
    assert.match(
      await runtimeCommand(sock, `add server exits/exit-c ${HOST}:${port} ${doorServerOptions(HEALTH)}`),
      /New server registered/,
    );
    assert.equal(await runtimeCommand(sock, 'enable health exits/exit-c'), '\n');
    assert.equal(await runtimeCommand(sock, 'enable server exits/exit-c'), '\n');
    const before = decisions().length;
    for (let i = 0; ; i++) {
      assert.equal((await viaDoor(door, `http://${HOST}:${target}/c${i}`, basic('user'))).status, 200);
      if (
        decisions()
          .slice(before)
          .some((d) => d['exit'] === 'exit-c')
      )
        break;
      assert.ok(i < 60, 'no request went to the added exit');
      await sleep(20);
    }
    const state = await runtimeCommand(sock, 'show servers state exits');
    assert.match(state, /^\d+ exits \d+ exit-c 127\.0\.0\.1 2 /m, state);
    assert.equal(await runtimeCommand(sock, 'disable server exits/exit-c'), '\n');
    for (const t0 = Date.now(); ; await sleep(200)) {
      const out = await runtimeCommand(sock, 'del server exits/exit-c');
      if (/Server deleted/.test(out)) break;
      assert.ok(Date.now() - t0 < BOUND_MS, `del server: ${out}`);
    }
    assert.doesNotMatch(await runtimeCommand(sock, 'show servers state exits'), / exit-c /);
  });

  it('keeps a CONNECT tunnel working while its exit is put in maint through the runtime socket', async () => {
    const first = await viaDoor(door, `http://${HOST}:${target}/t`, basic(TUNNEL_USER));
    const exit = via(first);
    const other = exit === 'exit-a' ? 'exit-b' : 'exit-a';
    const t = await Tunnel.open(door, target, TUNNEL_USER);
    try {
      await t.get(target);
      assert.equal(await runtimeCommand(sock, `set server exits/${exit} state maint`), '\n');
      for (let i = 0; i < 10; i++) {
        assert.match(await t.get(target), /^via= /, `request ${i} in the tunnel after maint`);
        await sleep(100);
      }
      const moved = await viaDoor(door, `http://${HOST}:${target}/t2`, basic(TUNNEL_USER));
      assert.equal(via(moved), other, 'new requests of the session go to the other exit');
      await runtimeCommand(sock, `set server exits/${exit} state ready`);
      for (const t0 = Date.now(); ; await sleep(100)) {
        const back = await viaDoor(door, `http://${HOST}:${target}/t3`, basic(TUNNEL_USER));
        if (via(back) === exit) break;
        assert.ok(Date.now() - t0 < BOUND_MS, `the session did not come back to ${exit} once ready`);
      }
      assert.match(await t.get(target), /^via= /);
    } finally {
      t.close();
    }
  });

  it('moves the sessions of a killed exit to the other within 5 s, each losing at most one request', async (t) => {
    const dead = 'exit-b';
    assert.ok([...home.values()].includes(dead), `no session left by ${dead} before it was killed`);
    killGroup(exits.get(dead)!.proc);
    const t0 = Date.now();
    const failed = new Map<string, number>(SESSIONS.map((s) => [s, 0]));
    let slowest = 0;
    /** Every session once, at the same time; a failure counts against the session. */
    const round = (tag: string): Promise<void[]> =>
      Promise.all(
        SESSIONS.map(async (user) => {
          const r0 = Date.now();
          const a = await viaDoor(door, `http://${HOST}:${target}/${tag}`, basic(user)).catch((err: Error): Answer => ({
            status: 0,
            headers: {},
            body: err.message,
          }));
          slowest = Math.max(slowest, Date.now() - r0);
          if (a.status !== 200) failed.set(user, failed.get(user)! + 1);
          else assert.equal(via(a), 'exit-a', `${user} in ${tag}`);
        }),
      );
    let markedDownMs = NaN;
    // Until 1 s after HAProxy marks the exit down, bounded by 5 s.
    for (let k = 0; Date.now() - t0 < 5000 && !(Date.now() - t0 > markedDownMs + 1000); k++) {
      await round(`k${k}`);
      if (Number.isNaN(markedDownMs)) {
        const state = await runtimeCommand(sock, 'show servers state exits');
        if (new RegExp(`^\\d+ exits \\d+ ${dead} \\S+ 0 `, 'm').test(state)) markedDownMs = Date.now() - t0;
      }
      await sleep(50);
    }
    const lost = [...failed].filter(([, n]) => n > 0);
    t.diagnostic(
      `${dead} marked down after ${markedDownMs} ms (polled between rounds); slowest request ${slowest} ms; requests lost: ${lost.length ? lost.map(([u, n]) => `${u} ${n}`).join(', ') : 'none'}`,
    );
    t.diagnostic(
      doorLog()
        .split('\n')
        .filter((l) => /DOWN|MAINT|UP/.test(l))
        .join(' | '),
    );
    for (const [user, n] of failed) assert.ok(n <= 1, `${user} (home ${home.get(user)}) lost ${n} requests`);
    assert.ok(markedDownMs <= 5000, `${dead} not marked down within 5 s`);
    const before = [...failed.values()].reduce((a, n) => a + n, 0);
    await round('after');
    assert.equal(
      [...failed.values()].reduce((a, n) => a + n, 0),
      before,
      'a request failed once the exit was down',
    );
  });
});
