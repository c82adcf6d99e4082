/**
 * dialSsh and SshSession against a real OpenSSH sshd started on 127.0.0.1 by the test itself
 * (test/support/sshd.ts), plus, when present, the namespaced test hosts described in
 * /var/lib/egress-proxies-testhosts/hosts.json. Loopback only; every wait is bounded.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { dialSsh } from '../../lib/ssh/dial.ts';
import type { DialOptions } from '../../lib/ssh/dial.ts';
import {
  SshAbortedError,
  SshAuthError,
  SshChannelOpenError,
  SshConfigError,
  SshConnectError,
  SshHandshakeError,
  SshHostKeyError,
  SshSessionDeadError,
  SshTimeoutError,
} from '../../lib/ssh/errors.ts';
import type { LineLogger } from '../../lib/log/line-logger.ts';
import type { SshSession } from '../../lib/ssh/session.ts';
import type { SshTarget } from '../../lib/ssh/target.ts';
import {
  freePort,
  generateKey,
  sshKeygenFingerprint,
  startSshd,
  startTarpit,
  startTcpRelay,
  startUnixEcho,
  startUnixSink,
} from '../support/sshd.ts';
import type { TestServer, ThrowawaySshd } from '../support/sshd.ts';
import { startAgent } from '../support/ssh-agent.ts';
import { loadTestHosts, TESTHOST_STATE } from '../support/testhosts.ts';

const T = { timeout: 15_000 };

/** Rejects if `p` does not settle within `ms`. */
function within<V>(p: Promise<V>, ms: number, what: string): Promise<V> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

async function failure(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => (e instanceof Error ? e : assert.fail(`rejected with a non-Error: ${String(e)}`)),
  );
}

function recordingLogger(): LineLogger & { lines: { level: string; obj: Record<string, unknown>; msg: string }[] } {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    info: (obj, msg) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
    warn: (obj, msg) => lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
  };
}

/** Reads exactly `n` bytes from a stream (bounded by the caller). */
async function readBytes(stream: Duplex, n: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    got += (chunk as Buffer).length;
    if (got >= n) break;
  }
  return Buffer.concat(chunks).subarray(0, n);
}

describe('dialSsh against a throwaway OpenSSH sshd', () => {
  let sshd: ThrowawaySshd;
  let echo: TestServer;
  let sink: TestServer;
  const sessions: SshSession[] = [];
  const servers: { close(): Promise<void> }[] = [];

  const target = (over: Partial<SshTarget> = {}): SshTarget => ({
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    keyPath: sshd.clientKey.privatePath,
    knownHostsPath: sshd.knownHostsPath,
    ...over,
  });
  const dial = async (t: SshTarget, o: DialOptions = {}): Promise<SshSession> => {
    const s = await dialSsh(t, { readyTimeoutMs: 5_000, connectTimeoutMs: 2_000, ...o });
    sessions.push(s);
    return s;
  };
  /** A known_hosts file holding `lines`, in the sshd's directory. */
  const knownHosts = async (name: string, lines: string[]): Promise<string> => {
    const path = join(sshd.dir, name);
    await writeFile(path, lines.map((l) => `${l}\n`).join(''));
    return path;
  };
  const hostKeyLine = (port: number): string =>
    `[127.0.0.1]:${port} ${sshd.hostKey.publicLine.split(' ').slice(0, 2).join(' ')}`;

  before(async () => {
    sshd = await startSshd();
    echo = await startUnixEcho(join(sshd.dir, 'echo.sock'));
    sink = await startUnixSink(join(sshd.dir, 'sink.sock'));
  });
  after(async () => {
    for (const s of sessions) s.kill(new Error('test cleanup'));
    const results = await Promise.allSettled([...servers, echo, sink].map((s) => s.close()));
    await sshd.stop();
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  });

  it('dials, forwards to a unix socket and round-trips 1 MiB; logs one line without secrets', T, async () => {
    const logger = recordingLogger();
    const s = await dial(target(), { logger });
    assert.equal(s.negotiated?.cipher, 'aes128-gcm@openssh.com');
    assert.equal(s.hostKeyFingerprint, await sshKeygenFingerprint(sshd.hostKey.publicPath));
    const ch = await s.openStreamLocal(echo.address, { timeoutMs: 2_000 });
    const payload = randomBytes(1024 * 1024);
    ch.end(payload);
    const back = await within(readBytes(ch, payload.length), 5_000, 'echo');
    assert.ok(back.equals(payload));
    assert.equal(logger.lines.length, 1);
    const [line] = logger.lines;
    assert.equal(line?.level, 'info');
    assert.equal(line?.obj.outcome, 'ok');
    assert.equal(line?.obj.host, sshd.host);
    assert.equal(line?.obj.port, sshd.port);
    assert.equal(typeof line?.obj.duration_ms, 'number');
    const text = JSON.stringify(line);
    assert.ok(!text.includes(sshd.clientKey.privatePath) && !text.includes('PRIVATE KEY'));
  });

  it(
    'refuses an unknown host with SshHostKeyError naming the fingerprint and the fix, after one connection',
    T,
    async () => {
      const relay = await startTcpRelay(sshd.port);
      servers.push(relay);
      const path = await knownHosts('kh-empty', ['# nothing yet']);
      const logger = recordingLogger();
      const err = await failure(dial(target({ port: relay.port, knownHostsPath: path }), { logger }));
      assert.ok(err instanceof SshHostKeyError, String(err));
      assert.equal(err.code, 'SSH_HOST_UNKNOWN');
      assert.equal(err.kind, 'Permanent');
      const fp = await sshKeygenFingerprint(sshd.hostKey.publicPath);
      assert.equal(err.fingerprint, fp);
      assert.ok(err.message.includes(fp));
      assert.ok(err.message.includes(`127.0.0.1:${relay.port}`));
      assert.ok(err.message.includes(`ssh-keyscan -p ${relay.port} 127.0.0.1 >> ${path}`));
      assert.match(err.message, /acceptNewHostKeys/);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(relay.connections(), 1, 'a host key failure must not be retried');
      assert.equal(logger.lines[0]?.obj.code, 'SSH_HOST_UNKNOWN');
    },
  );

  it('refuses a changed host key with SSH_HOST_KEY_MISMATCH naming both fingerprints', T, async () => {
    const other = await generateKey(join(sshd.dir, 'other-host-key'));
    const path = await knownHosts('kh-mismatch', [`[127.0.0.1]:${sshd.port} ${other.publicLine}`]);
    const err = await failure(dial(target({ knownHostsPath: path })));
    assert.ok(err instanceof SshHostKeyError, String(err));
    assert.equal(err.code, 'SSH_HOST_KEY_MISMATCH');
    assert.ok(err.message.includes(await sshKeygenFingerprint(sshd.hostKey.publicPath)));
    assert.ok(err.message.includes(await sshKeygenFingerprint(other.publicPath)));
    assert.match(err.message, /ssh-keygen -R/);
  });

  it('refuses a @revoked host key even when it is also listed', T, async () => {
    const path = await knownHosts('kh-revoked', [hostKeyLine(sshd.port), `@revoked * ${sshd.hostKey.publicLine}`]);
    const err = await failure(dial(target({ knownHostsPath: path })));
    assert.ok(err instanceof SshHostKeyError, String(err));
    assert.equal(err.code, 'SSH_HOST_KEY_REVOKED');
    assert.equal(err.kind, 'Permanent');
  });

  it('with acceptNewHostKeys records an unknown host key, but still refuses a changed one', T, async () => {
    const path = join(sshd.dir, 'kh-tofu');
    const logger = recordingLogger();
    const s = await dial(target({ knownHostsPath: path, acceptNewHostKeys: true }), { logger });
    s.kill(new Error('done'));
    assert.equal(logger.lines[0]?.obj.host_key_recorded, true);
    assert.equal(await readFile(path, 'utf8'), `${hostKeyLine(sshd.port)}\n`);
    const again = await dial(target({ knownHostsPath: path }));
    again.kill(new Error('done'));
    const other = await generateKey(join(sshd.dir, 'tofu-other'));
    const changed = await knownHosts('kh-tofu-changed', [`[127.0.0.1]:${sshd.port} ${other.publicLine}`]);
    const err = await failure(dial(target({ knownHostsPath: changed, acceptNewHostKeys: true })));
    assert.ok(err instanceof SshHostKeyError && err.code === 'SSH_HOST_KEY_MISMATCH', String(err));
  });

  it(
    'survives server re-keys mid-transfer (host key pinned, recorded once, packet buffers pooled by every cipher)',
    T,
    async () => {
      const rekeying = await startSshd({ extraConfig: ['RekeyLimit 1M'] });
      servers.push(rekeying);
      const sock = await startUnixEcho(join(rekeying.dir, 'echo.sock'));
      servers.push(sock);
      const path = join(rekeying.dir, 'kh-rekey');
      const s = await dial({
        host: rekeying.host,
        port: rekeying.port,
        user: rekeying.user,
        keyPath: rekeying.clientKey.privatePath,
        knownHostsPath: path,
        acceptNewHostKeys: true,
      });
      const ch = await s.openStreamLocal(sock.address, { timeoutMs: 2_000 });
      const payload = randomBytes(8 * 1024 * 1024);
      ch.end(payload);
      const back = await within(readBytes(ch, payload.length), 10_000, 'echo across re-keys');
      assert.ok(back.equals(payload));
      assert.ok(s.keyExchanges > 2, `only ${s.keyExchanges} key exchanges`);
      // Each new cipher got the pooled packet buffers: every 32 KiB packet of the 8 MiB came from the pool.
      const pooled = s.packetPool?.stats;
      assert.ok(pooled !== undefined && pooled.reused + pooled.allocated >= 256, `pool: ${JSON.stringify(pooled)}`);
      assert.ok(pooled.allocated <= 96, `pool allocated ${pooled.allocated} buffers`);
      assert.ok(!s.isDead);
      assert.equal((await readFile(path, 'utf8')).split('\n').filter((l) => l !== '').length, 1);
    },
  );

  it(
    'answers the host-keys proof with one SSH_MSG_IGNORE (prompt-ack.ts); the session works; stock writes send none',
    T,
    async () => {
      // sshd holds its next small packet until the proof's reply is acknowledged; the IGNORE carries
      // that acknowledgement at once (40 ms per dial otherwise). If ssh2's internals change, no IGNORE
      // goes out and this count stays 0.
      const waitAcks = async (s: SshSession, n: number): Promise<void> => {
        for (let i = 0; i < 100 && s.promptAcks < n; i++) await new Promise((r) => setTimeout(r, 20));
      };
      const s = await dial(target());
      await waitAcks(s, 1);
      assert.equal(s.promptAcks, 1);
      const ch = await s.openStreamLocal(echo.address, { timeoutMs: 2_000 });
      const payload = randomBytes(64 * 1024);
      ch.end(payload);
      assert.ok((await within(readBytes(ch, payload.length), 5_000, 'echo')).equals(payload));
      assert.ok(!s.isDead);
      const stock = await dial(target(), { stockSsh2Writes: true });
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(stock.promptAcks, 0);
      assert.ok(!stock.isDead);
    },
  );

  it(
    'uses the configured cipher list: a listed cipher is negotiated, none in common is Permanent, a bogus name is a config error',
    T,
    async () => {
      const s = await dial(target(), { ciphers: ['chacha20-poly1305@openssh.com'] });
      assert.equal(s.negotiated?.cipher, 'chacha20-poly1305@openssh.com');
      s.kill(new Error('done'));
      const none = await failure(dial(target(), { ciphers: ['aes128-cbc'] }));
      assert.ok(none instanceof SshHandshakeError, String(none));
      assert.equal(none.kind, 'Permanent');
      const bogus = await failure(dial(target(), { ciphers: ['rot13'] }));
      assert.ok(bogus instanceof SshConfigError, String(bogus));
      assert.match(bogus.message, /rot13/);
    },
  );

  it('fails authentication with an unauthorized key as SshAuthError naming the offered key', T, async () => {
    const stranger = await generateKey(join(sshd.dir, 'stranger'));
    const err = await failure(dial(target({ keyPath: stranger.privatePath })));
    assert.ok(err instanceof SshAuthError, String(err));
    assert.equal(err.code, 'SSH_AUTH_FAILED');
    assert.equal(err.kind, 'Permanent');
    assert.ok(err.message.includes(await sshKeygenFingerprint(stranger.publicPath)));
    assert.match(err.message, /authorized_keys/);
  });

  it('reads the key afresh on every dial: a key rotated on disk is used by the next dial', T, async () => {
    const keyPath = join(sshd.dir, 'rotating');
    const first = await generateKey(keyPath);
    await sshd.authorize([first.publicLine]);
    try {
      (await dial(target({ keyPath }))).kill(new Error('done'));
      const second = await generateKey(keyPath);
      await sshd.authorize([second.publicLine]);
      const s = await dial(target({ keyPath }));
      s.kill(new Error('done'));
    } finally {
      await sshd.authorize([sshd.clientKey.publicLine]);
    }
  });

  it('decrypts an encrypted key with its passphrase file', T, async () => {
    const key = await generateKey(join(sshd.dir, 'encrypted'), 'ecdsa', { passphrase: 'pass phrase' });
    await writeFile(join(sshd.dir, 'encrypted.pass'), 'pass phrase\n');
    await sshd.authorize([sshd.clientKey.publicLine, key.publicLine]);
    const s = await dial(target({ keyPath: key.privatePath, passphrasePath: join(sshd.dir, 'encrypted.pass') }));
    s.kill(new Error('done'));
  });

  it('authenticates with keys held by an ssh-agent', T, async () => {
    const agent = await startAgent(join(sshd.dir, 'agent.sock'));
    servers.push(agent);
    const key = await generateKey(join(sshd.dir, 'agent-key'));
    await agent.add(key.privatePath);
    await sshd.authorize([sshd.clientKey.publicLine, key.publicLine]);
    const s = await dial(target({ keyPath: undefined, agentSocket: agent.socketPath }));
    s.kill(new Error('done'));
  });

  it('reports a missing unix socket as a Transient SshChannelOpenError and keeps the session', T, async () => {
    const s = await dial(target());
    const err = await failure(s.openStreamLocal(join(sshd.dir, 'missing.sock'), { timeoutMs: 2_000 }));
    assert.ok(err instanceof SshChannelOpenError, String(err));
    assert.equal(err.kind, 'Transient');
    assert.ok(!s.isDead);
    const ch = await s.openStreamLocal(echo.address, { timeoutMs: 2_000 });
    ch.destroy();
  });

  for (const [what, options] of [
    ['AllowStreamLocalForwarding no', { allowStreamLocalForwarding: 'no' }],
    ['AllowTcpForwarding no (OpenSSH applies it to unix sockets too)', { allowTcpForwarding: 'no' }],
  ] as const) {
    it(`with ${what}, the open fails with the sshd remedy in the message`, T, async () => {
      const strict = await startSshd(options);
      servers.push(strict);
      const sock = await startUnixEcho(join(strict.dir, 'echo.sock'));
      servers.push(sock);
      const s = await dial({
        host: strict.host,
        port: strict.port,
        user: strict.user,
        keyPath: strict.clientKey.privatePath,
        knownHostsPath: strict.knownHostsPath,
      });
      const err = await failure(s.openStreamLocal(sock.address, { timeoutMs: 2_000 }));
      // OpenSSH 9.x answers a refusal with reason 2 "open failed", exactly like a missing socket;
      // only older sshd say "administratively prohibited" (reason 1 -> SshForwardingRefusedError,
      // covered in test/unit/ssh-classify.test.ts).
      assert.ok(err instanceof SshChannelOpenError, String(err));
      assert.match(err.message, /AllowStreamLocalForwarding yes/);
      assert.match(err.message, /AllowTcpForwarding yes/);
      assert.ok(err.message.includes(sock.address));
      assert.ok(!s.isDead);
    });
  }

  it('times out a server that never sends a banner (tarpit) with a Transient SSH_READY_TIMEOUT', T, async () => {
    const tarpit = await startTarpit();
    servers.push(tarpit);
    const path = await knownHosts('kh-tarpit', [`[127.0.0.1]:${tarpit.port} ${sshd.hostKey.publicLine}`]);
    const started = performance.now();
    const err = await failure(dial(target({ port: tarpit.port, knownHostsPath: path }), { readyTimeoutMs: 500 }));
    const elapsed = performance.now() - started;
    assert.ok(err instanceof SshTimeoutError, String(err));
    assert.equal(err.code, 'SSH_READY_TIMEOUT');
    assert.equal(err.kind, 'Transient');
    assert.ok(elapsed >= 450 && elapsed < 1_500, `took ${elapsed} ms`);
    assert.equal(tarpit.connections(), 1);
  });

  it('aborts a dial stuck on a tarpit when its signal fires', T, async () => {
    const tarpit = await startTarpit();
    servers.push(tarpit);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('operator cancelled')), 100);
    const started = performance.now();
    const err = await failure(
      dial(target({ port: tarpit.port }), { readyTimeoutMs: 5_000, signal: controller.signal }),
    );
    assert.ok(err instanceof SshAbortedError, String(err));
    assert.ok(performance.now() - started < 1_000);
  });

  it('reports a refused TCP connect as a Transient SSH_CONNECT_FAILED', T, async () => {
    const port = await freePort();
    const err = await failure(dial(target({ port })));
    assert.ok(err instanceof SshConnectError, String(err));
    assert.equal(err.code, 'SSH_CONNECT_FAILED');
    assert.equal(err.kind, 'Transient');
    assert.match(err.message, /ECONNREFUSED/);
  });

  it(
    'kill() with a large write pending (peer not reading) returns at once and errors the channel within 100 ms',
    T,
    async () => {
      const s = await dial(target());
      const ch = await s.openStreamLocal(sink.address, { timeoutMs: 2_000 });
      const writeDone = new Promise<Error | null | undefined>((resolve) => {
        ch.write(randomBytes(32 * 1024 * 1024), (e) => resolve(e));
      });
      const errorEvent = new Promise<Error>((resolve) => ch.once('error', resolve));
      const done = finished(ch).then(
        () => undefined,
        (e: unknown) => e,
      );
      let deadEvents = 0;
      s.on('dead', () => deadEvents++);
      await new Promise((r) => setTimeout(r, 300)); // the window fills; the write stays pending
      assert.ok(ch.writableLength > 0, 'the write should still be pending');
      const reason = new Error('kill under backpressure');
      const t0 = performance.now();
      s.kill(reason);
      const killMs = performance.now() - t0;
      assert.ok(killMs < 20, `kill() took ${killMs} ms`);
      assert.equal(await within(writeDone, 100, 'write callback error'), reason);
      assert.equal(await within(errorEvent, 100, 'channel error event'), reason);
      assert.equal(await within(done, 100, 'finished() rejection'), reason);
      assert.equal(await within(s.dead, 100, 'dead promise'), reason);
      s.kill(new Error('second reason'));
      assert.equal(s.deadReason, reason);
      assert.equal(deadEvents, 1);
      const after = await failure(s.openStreamLocal(echo.address));
      assert.ok(after instanceof SshSessionDeadError && after.cause === reason);
    },
  );

  it('kills the session with SSH_KEEPALIVE_TIMEOUT when the peer goes silent (black hole)', T, async () => {
    const relay = await startTcpRelay(sshd.port);
    servers.push(relay);
    const path = await knownHosts('kh-relay-ka', [hostKeyLine(relay.port)]);
    const s = await dial(target({ port: relay.port, knownHostsPath: path }), {
      keepaliveIntervalMs: 200,
      keepaliveCountMax: 2,
    });
    const ch = await s.openStreamLocal(echo.address, { timeoutMs: 2_000 });
    const chErr = new Promise<Error>((resolve) => ch.once('error', resolve));
    relay.blackhole();
    const started = performance.now();
    const reason = await within(s.dead, 200 * 3 + 1_500, 'keepalive death');
    assert.ok(reason instanceof SshTimeoutError, String(reason));
    assert.equal(reason.code, 'SSH_KEEPALIVE_TIMEOUT');
    assert.equal(reason.kind, 'Transient');
    assert.ok(performance.now() - started >= 400);
    assert.equal(await within(chErr, 100, 'channel error'), reason);
  });

  it('kills the session with SSH_CONNECTION_LOST when the connection is closed under it', T, async () => {
    const relay = await startTcpRelay(sshd.port);
    const path = await knownHosts('kh-relay-lost', [hostKeyLine(relay.port)]);
    const s = await dial(target({ port: relay.port, knownHostsPath: path }));
    await relay.close();
    const reason = await within(s.dead, 2_000, 'death after close');
    assert.ok(reason instanceof SshConnectError, String(reason));
    assert.equal(reason.code, 'SSH_CONNECTION_LOST');
  });

  it('bounds a channel open on a stalled connection (SSH_OPEN_TIMEOUT kills the session)', T, async () => {
    const relay = await startTcpRelay(sshd.port);
    servers.push(relay);
    const path = await knownHosts('kh-relay-open', [hostKeyLine(relay.port)]);
    const s = await dial(target({ port: relay.port, knownHostsPath: path }), { keepaliveIntervalMs: 0 });
    relay.blackhole();
    const err = await failure(within(s.openStreamLocal(echo.address, { timeoutMs: 300 }), 2_000, 'open timeout'));
    assert.ok(err instanceof SshTimeoutError && err.code === 'SSH_OPEN_TIMEOUT', String(err));
    assert.equal(s.deadReason, err);
  });
});

// A hand-annotated libvirt CALL: REMOTE_PROC_AUTH_LIST (66), serial 1, empty body.
const AUTH_LIST_CALL = Buffer.from(
  [
    '0000001c', // total length 28, header included
    '20008086', // program: REMOTE_PROGRAM
    '00000001', // version 1
    '00000042', // procedure 66: AUTH_LIST
    '00000000', // type: CALL
    '00000001', // serial 1
    '00000000', // status: OK
  ].join(''),
  'hex',
);

describe('dialSsh against the namespaced test hosts', () => {
  const hosts = existsSync(join(TESTHOST_STATE, 'hosts.json')) ? loadTestHosts() : [];
  for (const h of hosts) {
    it(`dials ${h.name} (${h.address}:${h.port}) and reaches libvirtd through its socket`, T, async () => {
      const s = await dialSsh(
        { host: h.address, port: h.port, user: h.user, keyPath: h.keyPath, knownHostsPath: h.knownHostsPath },
        { readyTimeoutMs: 5_000, connectTimeoutMs: 2_000 },
      );
      try {
        const ch = await s.openStreamLocal(h.socketPath, { timeoutMs: 2_000 });
        ch.write(AUTH_LIST_CALL);
        const reply = await within(readBytes(ch, 28), 5_000, 'libvirtd reply');
        assert.equal(reply.readUInt32BE(4), 0x20008086, 'program');
        assert.equal(reply.readUInt32BE(12), 66, 'procedure');
        assert.equal(reply.readUInt32BE(16), 1, 'type REPLY');
        assert.equal(reply.readUInt32BE(20), 1, 'serial');
        ch.destroy();
      } finally {
        s.kill(new Error('done'));
      }
    });
  }
  if (hosts.length === 0)
    it('needs test hosts', { skip: `no ${TESTHOST_STATE}/hosts.json (test/hosts/testhost up)` }, () => {});
});
