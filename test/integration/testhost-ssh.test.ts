// Smoke test for the libvirt test hosts made by test/hosts/testhost (see test/hosts/README.md).
// For each host in <state root>/hosts.json: SSH in with the descriptor's key (host key checked
// against its known_hosts), open an OpenSSH direct-streamlocal channel to the host's libvirt
// socket, send a hand-built AUTH_LIST call and expect libvirtd's REPLY; then `virsh` over
// qemu+ssh. Needs `test/hosts/testhost up` first; every wait here is bounded.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { Client } from 'ssh2';
import type { ClientChannel } from 'ssh2';
import { loadTestHosts, TESTHOST_STATE } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const REMOTE_PROGRAM = 0x20008086;
const REMOTE_PROTOCOL_VERSION = 1;
const PROC_AUTH_LIST = 66;
const TYPE_CALL = 0;
const TYPE_REPLY = 1;
const STATUS_OK = 0;
const HEADER_BYTES = 28;
const REMOTE_AUTH_NONE = 0;

const indexPath = join(TESTHOST_STATE, 'hosts.json');

/** Keys listed for host:port in an OpenSSH known_hosts file (plain entries, as testhost writes). */
function knownHostKeys(path: string, host: string, port: number): Buffer[] {
  const names = port === 22 ? [host, `[${host}]:22`] : [`[${host}]:${port}`];
  const keys: Buffer[] = [];
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith('@')) continue;
    const [patterns, , blob] = line.split(/\s+/);
    if (patterns === undefined || blob === undefined) continue;
    if (patterns.split(',').some((p) => names.includes(p))) keys.push(Buffer.from(blob, 'base64'));
  }
  return keys;
}

function withTimeout<T>(
  what: string,
  ms: number,
  start: (done: (err: Error | null, v?: T) => void) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => done(new Error(`${what}: no result within ${ms} ms`)), ms);
    function done(err: Error | null, v?: T): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(v as T);
    }
    start(done);
  });
}

function tcpConnect(host: string, port: number, ms: number): Promise<Socket> {
  return withTimeout<Socket>(`TCP connect ${host}:${port}`, ms, (done) => {
    const sock = connect({ host, port });
    // withTimeout rejects at `ms`; this kills the attempt too if it is still connecting then.
    const killer = setTimeout(() => sock.destroy(), ms);
    sock.once('connect', () => {
      clearTimeout(killer);
      done(null, sock);
    });
    sock.once('error', (err) => {
      clearTimeout(killer);
      sock.destroy();
      done(err);
    });
  });
}

/**
 * SSH to the host over a TCP socket we own (ssh2's end() queues behind buffered data, so teardown
 * destroys the socket), accepting only a host key in `expected`; runs fn, then tears down.
 */
async function withSsh<T>(h: TestHost, expected: Buffer[], fn: (client: Client) => Promise<T>): Promise<T> {
  const sock = await tcpConnect(h.address, h.port, 5_000);
  const client = new Client();
  let hostKeyAccepted = false;
  client.on('error', () => {
    /* reported through the ready promise or the channel; keeps the emitter from throwing */
  });
  try {
    await withTimeout<void>(`SSH handshake with ${h.address}:${h.port}`, 15_000, (done) => {
      client.once('ready', () => done(null));
      client.once('error', (err) => done(err));
      client.once('close', () => done(new Error('SSH connection closed before ready')));
      client.connect({
        sock,
        username: h.user,
        privateKey: readFileSync(h.keyPath),
        readyTimeout: 10_000,
        algorithms: { serverHostKey: ['ssh-ed25519'] },
        hostVerifier: (key: Buffer) => {
          hostKeyAccepted = expected.some((k) => k.equals(key));
          return hostKeyAccepted;
        },
      });
    });
    assert.ok(hostKeyAccepted, 'ready without an accepted host key');
    return await fn(client);
  } finally {
    client.end();
    sock.destroy();
  }
}

function authListCall(serial: number): Buffer {
  const b = Buffer.alloc(HEADER_BYTES);
  b.writeUInt32BE(HEADER_BYTES, 0);
  b.writeUInt32BE(REMOTE_PROGRAM, 4);
  b.writeUInt32BE(REMOTE_PROTOCOL_VERSION, 8);
  b.writeInt32BE(PROC_AUTH_LIST, 12);
  b.writeInt32BE(TYPE_CALL, 16);
  b.writeUInt32BE(serial, 20);
  b.writeInt32BE(STATUS_OK, 24);
  return b;
}

/** Reads exactly one libvirt packet (length-prefixed) from the channel. */
function readPacket(ch: ClientChannel, ms: number): Promise<Buffer> {
  return withTimeout<Buffer>('libvirt reply', ms, (done) => {
    let buf = Buffer.alloc(0);
    ch.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length < 4) return;
      const len = buf.readUInt32BE(0);
      if (len < HEADER_BYTES || len > 1 << 20) {
        done(new Error(`bad libvirt packet length ${len}`));
        return;
      }
      if (buf.length >= len) done(null, buf.subarray(0, len));
    });
    ch.once('close', () => done(new Error(`channel closed after ${buf.length} bytes, before a full reply`)));
    ch.stderr.on('data', () => undefined);
  });
}

function execVirsh(uri: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'virsh',
      ['-c', uri, 'version', '--daemon'],
      { timeout: 45_000, killSignal: 'SIGKILL', env: { ...process.env, LC_ALL: 'C' } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`virsh -c ${uri} version failed: ${err.message}\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}

if (!existsSync(indexPath)) {
  it('test hosts are up', () => {
    assert.fail(`no ${indexPath}: run \`test/hosts/testhost up\` first (state root from EP_TESTHOST_STATE)`);
  });
} else {
  const hosts = loadTestHosts();
  it('hosts.json lists at least one host', () => {
    assert.ok(hosts.length > 0);
  });
  for (const h of hosts) {
    it(
      `${h.name}: AUTH_LIST over ssh direct-streamlocal to ${h.socketPath} gets a REPLY`,
      { timeout: 40_000 },
      async () => {
        const known = knownHostKeys(h.knownHostsPath, h.address, h.port);
        assert.ok(known.length > 0, `${h.knownHostsPath} lists no key for ${h.address}:${h.port}`);
        const reply = await withSsh(h, known, async (client) => {
          const ch = await withTimeout<ClientChannel>(`direct-streamlocal to ${h.socketPath}`, 10_000, (done) => {
            client.openssh_forwardOutStreamLocal(h.socketPath, (err, channel) => done(err ?? null, channel));
          });
          try {
            const pending = readPacket(ch, 10_000);
            ch.write(authListCall(1));
            return await pending;
          } finally {
            ch.destroy();
          }
        });
        assert.equal(reply.readUInt32BE(0), reply.length, 'length field');
        assert.equal(reply.readUInt32BE(4), REMOTE_PROGRAM, 'prog');
        assert.equal(reply.readUInt32BE(8), REMOTE_PROTOCOL_VERSION, 'vers');
        assert.equal(reply.readInt32BE(12), PROC_AUTH_LIST, 'proc');
        assert.equal(reply.readInt32BE(16), TYPE_REPLY, 'type');
        assert.equal(reply.readUInt32BE(20), 1, 'serial');
        assert.equal(reply.readInt32BE(24), STATUS_OK, 'status');
        // remote_auth_list_ret: array<remote_auth_type>; testhost configures auth_unix_rw = "none".
        const count = reply.readUInt32BE(HEADER_BYTES);
        assert.equal(reply.length, HEADER_BYTES + 4 + 4 * count, 'body size');
        const types = Array.from({ length: count }, (_, i) => reply.readInt32BE(HEADER_BYTES + 4 + 4 * i));
        assert.ok(types.includes(REMOTE_AUTH_NONE), `auth types ${JSON.stringify(types)} lack NONE`);
      },
    );

    it(`${h.name}: a host key other than the known_hosts one is refused`, { timeout: 20_000 }, async () => {
      const known = knownHostKeys(h.knownHostsPath, h.address, h.port)[0];
      assert.ok(known);
      const wrong = Buffer.from(known);
      wrong[wrong.length - 1] = (wrong[wrong.length - 1] ?? 0) ^ 0xff;
      await assert.rejects(
        withSsh(h, [wrong], () => Promise.resolve()),
        /Host denied \(verification failed\)/,
      );
    });

    it(`${h.name}: virsh over qemu+ssh prints the daemon version`, { timeout: 60_000 }, async () => {
      const out = await execVirsh(h.virshUri);
      assert.match(out, /Running against daemon: \d+\.\d+\.\d+/);
    });

    if (h.virshLibsshUri) {
      const uri = h.virshLibsshUri;
      it(
        `${h.name}: virsh over qemu+libssh (known_hosts checked) prints the daemon version`,
        { timeout: 60_000 },
        async () => {
          const out = await execVirsh(uri);
          assert.match(out, /Running against daemon: \d+\.\d+\.\d+/);
        },
      );
    }
  }
}
