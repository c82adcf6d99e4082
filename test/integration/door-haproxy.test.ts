/**
 * The door lib/door/haproxy.ts renders, parsed by HAProxy (`haproxy -c`) and run on 127.0.0.1 in
 * front of two real Squid exits (Debian's, unpacked by scripts/test into EP_SQUID_ROOT) and a
 * loopback target that answers with the Via header (which exit carried the request) and whether a
 * Proxy-Authorization header reached it. Checked: each `user-session-<id>` always leaves by one
 * exit and both exits get sessions; CONNECT and plain GET go through; no or wrong credentials get
 * 407 with Proxy-Authenticate and no credential reaches an exit or the target; an exit put in
 * maint through the runtime socket keeps a CONNECT tunnel open through it working; an exit killed
 * moves its sessions to the other, each session losing at most one request, and is marked down
 * within 5 s. haproxy comes from scripts/test's TEST_PACKAGES: without it this fails.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { renderDoor } from '../../lib/door/haproxy.ts';
import type { DoorSpec } from '../../lib/door/haproxy.ts';
import { freePort } from '../support/sshd.ts';

const HOST = '127.0.0.1';
const BOUND_MS = 10_000;
const SQUID_ROOT = process.env['EP_SQUID_ROOT'] ?? join(import.meta.dirname, '../../.local/squid/root');
const NO_HAPROXY = 'no haproxy on PATH: scripts/test installs it (TEST_PACKAGES); or apt-get install haproxy';
const NO_SQUID = `no squid at ${SQUID_ROOT}: scripts/test unpacks Debian squid into .local/squid and sets EP_SQUID_ROOT`;
// `openssl passwd -6 -salt abcdefgh secret`.
const HASH = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';
const SESSIONS = Array.from({ length: 10 }, (_, i) => `user-session-${i}`);
const TUNNEL_USER = 'user-session-tunnel';
const basic = (user: string, password = 'secret'): string =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

const children: ChildProcess[] = [];
/** Starts `argv` in its own process group (killed whole in `after`); `log()` is its recent output. */
function start(argv: string[], env = process.env): { proc: ChildProcess; log: () => string } {
  const proc = spawn(argv[0]!, argv.slice(1), { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let out = '';
  const keep = (c: Buffer): void => void (out = (out + c.toString()).slice(-10_000));
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  return { proc, log: () => out };
}
function killGroup(proc: ChildProcess): void {
  if (proc.pid !== undefined && proc.exitCode === null && proc.signalCode === null) {
    try {
      process.kill(-proc.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Waits (bounded) until a TCP connect to `port` succeeds. */
async function listening(port: number, what: string, log: () => string): Promise<void> {
  for (const t0 = Date.now(); ; await sleep(50)) {
    const up = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, HOST, () => resolve(Boolean(sock.destroy())));
      sock.on('error', () => resolve(false));
    });
    if (up) return;
    if (Date.now() - t0 > BOUND_MS) throw new Error(`${what} not listening on ${port} after ${BOUND_MS} ms:\n${log()}`);
  }
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}
/** One request through the door on a new connection: GET of an absolute URL, or CONNECT host:port. */
function viaDoor(door: number, target: string, auth?: string, extra: Record<string, string> = {}): Promise<Answer> {
  const connect = !target.startsWith('http://');
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: HOST,
      port: door,
      method: connect ? 'CONNECT' : 'GET',
      path: target,
      agent: false,
      headers: {
        ...(auth ? { 'proxy-authorization': auth } : {}),
        host: connect ? target : new URL(target).host,
        ...extra,
      },
      timeout: BOUND_MS,
    });
    req.on('timeout', () => req.destroy(new Error(`${target}: no answer within ${BOUND_MS} ms`)));
    req.on('error', reject);
    req.on('connect', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.end();
  });
}

/** A CONNECT tunnel through the door carrying keep-alive GETs to the target, one at a time. */
class Tunnel {
  private buf = '';
  private wake: (() => void) | undefined;
  private closed: Error | undefined;
  private readonly sock: net.Socket;
  private constructor(sock: net.Socket) {
    this.sock = sock;
    sock.setEncoding('latin1');
    sock.on('data', (d: string) => ((this.buf += d), this.wake?.()));
    const fail = (err?: Error): void => void ((this.closed ??= err ?? new Error('tunnel closed')), this.wake?.());
    sock.on('error', fail);
    sock.on('close', () => fail());
  }
  static async open(door: number, target: number, user: string): Promise<Tunnel> {
    const t = new Tunnel(net.connect(door, HOST));
    const head = await t.read(
      `CONNECT ${HOST}:${target} HTTP/1.1\r\nHost: ${HOST}:${target}\r\nProxy-Authorization: ${basic(user)}\r\n\r\n`,
      true,
    );
    assert.match(head, /^HTTP\/1\.[01] 200/, head);
    return t;
  }
  /** Sends a GET inside the tunnel; resolves with the response body. */
  get(target: number): Promise<string> {
    return this.read(`GET / HTTP/1.1\r\nHost: ${HOST}:${target}\r\n\r\n`, false);
  }
  private async read(req: string, headOnly: boolean): Promise<string> {
    this.sock.write(req);
    const t0 = Date.now();
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.buf.slice(0, end);
        const len = headOnly ? 0 : Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? NaN);
        assert.ok(!Number.isNaN(len), `response without Content-Length: ${head}`);
        if (this.buf.length >= end + 4 + len) {
          const body = this.buf.slice(end + 4, end + 4 + len);
          this.buf = this.buf.slice(end + 4 + len);
          return headOnly ? head : body;
        }
      }
      if (this.closed) throw this.closed;
      if (Date.now() - t0 > BOUND_MS) throw new Error(`no answer in the tunnel within ${BOUND_MS} ms`);
      await Promise.race([new Promise<void>((r) => (this.wake = r)), sleep(200)]);
    }
  }
  close(): void {
    this.sock.destroy();
  }
}

/** One runtime API command on the door's socket. */
function runtime(sock: string, cmd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(sock);
    let out = '';
    c.setTimeout(BOUND_MS, () => c.destroy(new Error(`haproxy ${cmd}: no answer`)));
    c.on('connect', () => c.write(`${cmd}\n`));
    c.on('data', (d: Buffer) => (out += d.toString()));
    c.on('end', () => resolve(out));
    c.on('error', reject);
  });
}

describe('the door (HAProxy) in front of two Squid exits, on loopback', { timeout: 120_000 }, () => {
  let dir: string;
  let target: number;
  let door: number;
  let sock: string;
  let doorLog: () => string = () => '';
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
    const env = { ...process.env, LD_LIBRARY_PATH: join(SQUID_ROOT, 'usr/lib/x86_64-linux-gnu') };
    for (const name of ['exit-a', 'exit-b']) {
      const port = await freePort();
      const conf = join(dir, `${name}.conf`);
      writeFileSync(
        conf,
        [
          `mime_table ${SQUID_ROOT}/usr/share/squid/mime.conf`,
          `icon_directory ${SQUID_ROOT}/usr/share/squid/icons`,
          `unlinkd_program ${SQUID_ROOT}/usr/lib/squid/unlinkd`,
          `logfile_daemon ${SQUID_ROOT}/usr/lib/squid/log_file_daemon`,
          `error_directory ${SQUID_ROOT}/usr/share/squid-langpack/en`,
          `pid_filename ${join(dir, `${name}.pid`)}`,
          `cache_log ${join(dir, `${name}.cache.log`)}`,
          'cache_effective_user nobody',
          `coredump_dir ${dir}`,
          // What reached the exit: the request and its Proxy-Authorization header ("-" when none).
          'logformat door %rm %ru pa=%{Proxy-Authorization}>h',
          `access_log stdio:${join(dir, `${name}.access.log`)} door`,
          'cache deny all',
          'cache_mem 0 MB',
          'pinger_enable off',
          'netdb_filename none',
          'shutdown_lifetime 0 seconds',
          `visible_hostname ${name}`,
          `http_port ${HOST}:${port}`,
          `acl local src ${HOST}/32`,
          'http_access allow local',
          'http_access deny all',
          '',
        ].join('\n'),
      );
      const s = start([join(SQUID_ROOT, 'usr/sbin/squid'), '-N', '-d1', '-f', conf], env);
      await listening(port, `squid ${name}`, s.log);
      exits.set(name, { port, proc: s.proc });
    }
    door = await freePort();
    sock = join(dir, 'door.sock');
    const spec: DoorSpec = {
      listen: { host: HOST, port: door },
      exits: [...exits].map(([name, e]) => ({ name, host: HOST, port: e.port })),
      users: [...SESSIONS, TUNNEL_USER].map((name) => ({ name, passwordHash: HASH })),
      runtimeSocket: sock,
      health: { interMs: 500, fall: 2, rise: 1 },
    };
    writeFileSync(join(dir, 'door.cfg'), renderDoor(spec));
    const h = start(['haproxy', '-db', '-f', join(dir, 'door.cfg')]);
    doorLog = h.log;
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
      users: Array.from({ length: 50 }, (_, i) => ({ name: `user-session-${i}`, passwordHash: HASH })),
    };
    for (const [name, spec] of Object.entries({ base, many })) {
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
  });

  it('keeps a CONNECT tunnel working while its exit is put in maint through the runtime socket', async () => {
    const first = await viaDoor(door, `http://${HOST}:${target}/t`, basic(TUNNEL_USER));
    const exit = via(first);
    const other = exit === 'exit-a' ? 'exit-b' : 'exit-a';
    const t = await Tunnel.open(door, target, TUNNEL_USER);
    try {
      await t.get(target);
      assert.equal(await runtime(sock, `set server exits/${exit} state maint`), '\n');
      for (let i = 0; i < 10; i++) {
        assert.match(await t.get(target), /^via= /, `request ${i} in the tunnel after maint`);
        await sleep(100);
      }
      const moved = await viaDoor(door, `http://${HOST}:${target}/t2`, basic(TUNNEL_USER));
      assert.equal(via(moved), other, 'new requests of the session go to the other exit');
      await runtime(sock, `set server exits/${exit} state ready`);
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
        const state = await runtime(sock, 'show servers state exits');
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
