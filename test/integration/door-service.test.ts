/**
 * The door service (lib/door/service.ts) keeping a real HAProxy door current in front of three
 * real Squid exits on loopback, with the pool's discovery list played by the test (the list the
 * service reads each sync). Checked: the door starts with the listed exits and sends nothing to an
 * unlisted one; an exit entering the list takes requests after the next sync, and a client's
 * keep-alive requests through it share one connection to its Squid; an exit leaving it
 * takes no new request while a CONNECT tunnel open through it goes on working, and is deleted from
 * HAProxy once that tunnel closes; HAProxy killed is started again with the current exits; a doors
 * file with a bad field is refused naming it. The real pool behind a door is test/e2e/pool.test.ts's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { parseDoorsConfig } from '../../lib/door/config.ts';
import type { DoorExit } from '../../lib/door/haproxy.ts';
import { DoorRuntime } from '../../lib/door/runtime.ts';
import { DoorService } from '../../lib/door/service.ts';
import { basic, Tunnel, viaDoor } from '../support/door-client.ts';
import type { Answer } from '../support/door-client.ts';
import { killGroup, listening, startSquidExit } from '../support/squid-exit.ts';
import type { SquidExit } from '../support/squid-exit.ts';
import { freePort } from '../support/sshd.ts';

const HOST = '127.0.0.1';
const BOUND_MS = 10_000;
const SYNC_MS = 200;
// `openssl passwd -6 -salt abcdefgh secret`.
const HASH = '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.';
const SESSIONS = Array.from({ length: 30 }, (_, i) => `alice-session-${i}`);

describe('the door service keeps HAProxy equal to the discovery list', { timeout: 120_000 }, () => {
  let dir: string;
  let target: number;
  let targetProc: ChildProcess;
  let door: number;
  let service: DoorService;
  const exits = new Map<string, SquidExit>();
  /** The discovery list the service reads: the test changes it. */
  let listed: DoorExit[] = [];
  /** What the service reported (onChange), in order; `refuseNext` makes the next report fail once. */
  const reports: { listen: string; exits: { name: string; role: string; up: boolean }[] }[] = [];
  let refuseNext = false;
  const lastReport = (): string =>
    (reports.at(-1)?.exits ?? []).map((e) => `${e.name}:${e.role}:${e.up ? 'up' : 'down'}`).join(' ');
  const list = (...names: string[]): DoorExit[] =>
    names.map((name) => ({ name, host: HOST, port: exits.get(name)!.port }));
  const via = (a: Answer): string => /via=.*\b(exit-[abc])\b/.exec(a.body)?.[1] ?? `?${a.status} ${a.body.trim()}`;
  /** Which exit carries each session's next plain GET. */
  const spread = async (): Promise<Map<string, string>> => {
    const out = new Map<string, string>();
    for (const s of SESSIONS) out.set(s, via(await viaDoor(door, `http://${HOST}:${target}/`, basic(s))));
    return out;
  };
  /** Polls (bounded) until `done` holds on the service's status. */
  const until = async (done: () => boolean, what: string): Promise<number> => {
    const t0 = performance.now();
    for (let i = 0; !done(); i++) {
      assert.ok(i < BOUND_MS / 50, `${what}: not within ${BOUND_MS} ms: ${JSON.stringify(service.status())}`);
      await sleep(50);
    }
    return performance.now() - t0;
  };

  before(async () => {
    assert.equal(spawnSync('haproxy', ['-v']).status, 0, 'no haproxy on PATH: scripts/test installs it');
    dir = mkdtempSync(join(tmpdir(), 'ep-door-service-'));
    chmodSync(dir, 0o777); // Squid run as root drops to nobody
    target = await freePort();
    const code = `require('http').createServer((q, s) => { const b = 'via=' + (q.headers.via || '') + '\\n'; s.writeHead(200, { 'content-length': Buffer.byteLength(b) }); s.end(b); }).listen(${target}, '${HOST}');`;
    targetProc = spawn(process.execPath, ['-e', code], { detached: true, stdio: 'ignore' });
    await listening(target, 'target', () => '');
    for (const name of ['exit-a', 'exit-b', 'exit-c']) exits.set(name, await startSquidExit(dir, name));
    door = await freePort();
    listed = list('exit-a', 'exit-b');
    service = new DoorService({
      spec: {
        listen: { host: HOST, port: door },
        users: [{ name: 'alice', passwordHash: HASH }],
        runtimeSocket: join(dir, 'door.sock'),
        allowReserved: ['127.0.0.1/32'],
        health: { interMs: 500, fall: 2, rise: 1 },
      },
      configPath: join(dir, 'door.cfg'),
      members: () => Promise.resolve(listed),
      log: pino({ level: 'silent' }),
      syncIntervalMs: SYNC_MS,
      restartDelayMs: 200,
      onLogLine: () => undefined,
      onChange: (r) => {
        if (refuseNext) {
          refuseNext = false;
          return Promise.reject(new Error('the pool did not take the report'));
        }
        reports.push(r);
        return Promise.resolve();
      },
    });
    await service.start();
    await listening(door, 'the door', () => JSON.stringify(service.status()));
  });

  after(async () => {
    await service?.stop(2_000).catch(() => undefined);
    for (const e of exits.values()) killGroup(e.proc);
    if (targetProc) killGroup(targetProc);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('starts with the listed exits: every session leaves by exit-a or exit-b, both used', async () => {
    await until(() => service.status().exits.filter((e) => e.up).length === 2, 'two exits up');
    const used = new Set((await spread()).values());
    assert.deepEqual([...used].sort(), ['exit-a', 'exit-b']);
    await until(() => lastReport() === 'exit-a:serving:up exit-b:serving:up', 'the two exits reported up');
    assert.equal(reports.at(-1)!.listen, `${HOST}:${door}`);
  });

  it('an exit entering the list takes sessions after the next sync; only sessions moving to it move', async () => {
    const before = await spread();
    const count = reports.length;
    refuseNext = true;
    listed = list('exit-a', 'exit-b', 'exit-c');
    const ms = await until(
      () => service.status().exits.some((e) => e.name === 'exit-c' && e.up && e.role === 'serving'),
      'exit-c in the door and up',
    );
    process.stdout.write(`door-service: exit-c serving ${ms.toFixed(0)} ms after it was listed\n`);
    const now = await spread();
    const moved = SESSIONS.filter((s) => now.get(s) !== before.get(s));
    assert.ok(moved.length > 0, 'some sessions moved to exit-c');
    for (const s of moved) assert.equal(now.get(s), 'exit-c', `${s} moved, and only to the new exit`);
    // The first report of the change was refused: it is sent again at the next sync; nothing at rest.
    await until(() => lastReport() === 'exit-a:serving:up exit-b:serving:up exit-c:serving:up', 'exit-c reported');
    const settled = reports.length;
    assert.ok(settled > count);
    await sleep(5 * SYNC_MS);
    assert.equal(reports.length, settled, 'no report while nothing changes');
  });

  it('keep-alive requests through an exit the service added share one connection to its Squid', async () => {
    // exit-c came in through the runtime API (`add server`): HAProxy 2.6 gives such a server no
    // idle connection pool unless its options ask for one, and then opens a connection per request.
    const user = [...(await spread())].find(([, exit]) => exit === 'exit-c')?.[0];
    assert.ok(user, 'a session lives on exit-c');
    const runtime = new DoorRuntime(join(dir, 'door.sock'));
    const of = async () => (await runtime.connections()).get('exit-c') ?? { connects: NaN, reuses: NaN };
    const before = await of();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const url = `http://${HOST}:${target}/`;
    let reused = 0;
    for (let i = 0; i < 20; i++) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request({
          host: HOST,
          port: door,
          path: url,
          agent,
          headers: { host: `${HOST}:${target}`, 'proxy-authorization': basic(user) },
          timeout: BOUND_MS,
        });
        req.on('timeout', () => req.destroy(new Error(`no answer within ${BOUND_MS} ms`)));
        req.on('error', reject);
        req.on('response', (res) => {
          if (req.reusedSocket) reused++;
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.end();
      });
      assert.equal(status, 200);
    }
    agent.destroy();
    assert.equal(reused, 19, 'the client kept one connection to the door');
    const after = await of();
    const made = { connects: after.connects - before.connects, reuses: after.reuses - before.reuses };
    assert.ok(made.connects <= 2 && made.reuses >= 18, `20 requests to exit-c: ${JSON.stringify(made)}`);
  });

  it('an exit leaving the list takes no new request; a tunnel open through it goes on; it is deleted once that closes', async () => {
    const homes = await spread();
    const user = SESSIONS.find((s) => homes.get(s) === 'exit-b')!;
    assert.ok(user, 'a session lives on exit-b');
    const tunnel = await Tunnel.open(door, target, user);
    assert.match(await tunnel.get(target), /via=/);
    listed = list('exit-a', 'exit-c');
    await until(
      () => service.status().exits.some((e) => e.name === 'exit-b' && e.role === 'draining'),
      'exit-b draining',
    );
    for (const [s, exit] of await spread()) assert.notEqual(exit, 'exit-b', `${s} sent to the exit that left`);
    assert.match(await tunnel.get(target), /via=/, 'the open tunnel still carries requests');
    tunnel.close();
    await until(() => !service.status().exits.some((e) => e.name === 'exit-b'), 'exit-b deleted from HAProxy');
    await until(() => lastReport() === 'exit-a:serving:up exit-c:serving:up', 'exit-b reported gone');
    assert.ok(
      reports.some((r) => r.exits.some((e) => e.name === 'exit-b' && e.role === 'draining')),
      'its draining was reported',
    );
    const names = (await new DoorRuntime(join(dir, 'door.sock')).servers()).map((s) => s.name).sort();
    assert.deepEqual(names, ['exit-a', 'exit-c']);
  });

  it('HAProxy killed is started again with the listed exits', async () => {
    const pid = service.status().pid!;
    process.kill(pid, 'SIGKILL');
    await until(() => service.status().restarts === 1 && service.status().running, 'HAProxy running again');
    await until(() => service.status().exits.filter((e) => e.up).length === 2, 'its two exits up');
    assert.notEqual(service.status().pid, pid);
    const used = new Set((await spread()).values());
    assert.deepEqual([...used].sort(), ['exit-a', 'exit-c']);
  });

  it('a doors file with a bad field is refused naming the field and the fix', () => {
    const good = {
      entry: 'local',
      pool: 'web',
      listen: { host: HOST, port: 3130 },
      users: [{ name: 'alice', passwordHash: HASH }],
    };
    assert.equal(parseDoorsConfig({ doors: [good] }).length, 1);
    assert.throws(() => parseDoorsConfig({ doors: [] }, 'doors.json'), /doors.json: doors: must be a non-empty list/);
    assert.throws(
      () => parseDoorsConfig({ doors: [good, { ...good, listen: { host: HOST, port: 0 } }] }, 'doors.json'),
      /doors\.json: doors\[1\]\.listen\.port: must be an integer from 1 to 65535, got 0; give a TCP port/,
    );
    assert.throws(
      () => parseDoorsConfig({ doors: [{ ...good, users: [{ name: 'alice', passwordHash: 'secret' }] }] }, 'd.json'),
      /d\.json: doors\[0\]\.users\[0\]\.passwordHash: .*openssl passwd -6/,
    );
    assert.throws(
      () => parseDoorsConfig({ doors: [good, { ...good, listen: { host: HOST, port: 3131 } }] }, 'd.json'),
      /d\.json: doors\[1\]\.pool: local\/web is also doors\[0\]'s/,
    );
    assert.throws(
      () => parseDoorsConfig({ doors: [{ ...good, pool: 'Web!' }] }),
      /doors\[0\]\.pool: must be the pool's name/,
    );
  });
});

describe("the door service's stdout carries HAProxy's decision lines", { timeout: 60_000 }, () => {
  it('one whole JSON line per request, beside the service log lines, with no onLogLine', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ep-door-stdout-'));
    chmodSync(dir, 0o777);
    const exit = await startSquidExit(dir, 'exit-a');
    const target = await freePort();
    const code = `require('http').createServer((q, s) => { s.writeHead(200, { 'content-length': 3 }); s.end('ok\\n'); }).listen(${target}, '${HOST}');`;
    const targetProc = spawn(process.execPath, ['-e', code], { detached: true, stdio: 'ignore' });
    const door = await freePort();
    const options = {
      spec: {
        listen: { host: HOST, port: door },
        users: [{ name: 'alice', passwordHash: HASH }],
        runtimeSocket: join(dir, 'door.sock'),
        allowReserved: ['127.0.0.1/32'],
        health: { interMs: 500, fall: 2, rise: 1 },
      },
      configPath: join(dir, 'door.cfg'),
      exits: [{ name: 'exit-a', host: HOST, port: exit.port }],
    };
    // The service as bin/door runs it: its own log lines and HAProxy's on one stdout.
    const service = join(import.meta.dirname, '../../lib/door/service.ts');
    const script = [
      `import pino from 'pino'; import { DoorService } from ${JSON.stringify(service)};`,
      `const o = ${JSON.stringify(options)};`,
      'const s = new DoorService({ ...o, members: () => Promise.resolve(o.exits), log: pino(), syncIntervalMs: 200 });',
      "process.once('SIGTERM', () => void s.stop(2000).then(() => process.exit(0)));",
      'await s.start();',
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: join(import.meta.dirname, '../..'),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await listening(target, 'target', () => '');
      await listening(door, 'the door', () => out);
      for (let i = 0; i < 3; i++) {
        const a = await viaDoor(door, `http://${HOST}:${target}/`, basic(`alice-session-s${i}`));
        assert.equal(a.status, 200);
      }
      const lines = (): string[] => out.split('\n').filter((l) => l !== '');
      for (let i = 0; lines().filter((l) => l.includes('CANONICAL-PROXY-DECISION')).length < 3; i++) {
        assert.ok(i < BOUND_MS / 50, `three decision lines on the service's stdout within ${BOUND_MS} ms:\n${out}`);
        await sleep(50);
      }
      const parsed = lines().map((l) => JSON.parse(l) as Record<string, unknown>);
      const decisions = parsed.filter((d) => d['msg'] === 'CANONICAL-PROXY-DECISION');
      assert.deepEqual(
        decisions.map((d) => [d['credential'], d['session'], d['decision'], d['exit']]),
        [0, 1, 2].map((i) => ['alice', `alice-session-s${i}`, 'allow', 'exit-a']),
      );
      assert.ok(
        parsed.some((d) => d['msg'] === 'door: HAProxy running'),
        'the service log lines are on the same stdout',
      );
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      killGroup(exit.proc);
      killGroup(targetProc);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
