/**
 * Test fixtures around a real OpenSSH sshd: a throwaway sshd on 127.0.0.1 (own host key,
 * authorized_keys, config; killed by `stop()`), key generation with the real `ssh-keygen`, unix
 * socket servers to forward to, a tarpit that never sends a banner, and a counting TCP relay that
 * can black-hole traffic. Everything is loopback-only and bounded in time.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);
const SSHD = '/usr/sbin/sshd';
const LOOPBACK = '127.0.0.1';

/** Runs a command with a time bound; rejects on a non-zero exit. */
export async function run(cmd: string, args: string[], timeoutMs = 10_000): Promise<string> {
  const { stdout } = await execFileAsync(cmd, args, { timeout: timeoutMs, encoding: 'utf8' });
  return stdout;
}

export interface GeneratedKey {
  privatePath: string;
  publicPath: string;
  /** The `.pub` line: `type base64 comment`. */
  publicLine: string;
  /** The public key blob (base64 field decoded). */
  blob: Buffer;
}

/** Generates a key pair with the real ssh-keygen (overwrites `path` and `path.pub`). */
export async function generateKey(
  path: string,
  type: 'ed25519' | 'ecdsa' | 'rsa' = 'ed25519',
  options: { passphrase?: string; pem?: boolean } = {},
): Promise<GeneratedKey> {
  await rm(path, { force: true });
  await rm(`${path}.pub`, { force: true });
  const args = ['-q', '-t', type, '-N', options.passphrase ?? '', '-C', 'egress-proxies-test', '-f', path];
  if (type === 'rsa') args.push('-b', '2048');
  if (options.pem === true) args.push('-m', 'PEM');
  await run('ssh-keygen', args);
  const publicLine = (await readFile(`${path}.pub`, 'utf8')).trim();
  return {
    privatePath: path,
    publicPath: `${path}.pub`,
    publicLine,
    blob: Buffer.from(publicLine.split(' ')[1] ?? '', 'base64'),
  };
}

/** The `SHA256:...` fingerprint the real `ssh-keygen -lf` prints for a key file. */
export async function sshKeygenFingerprint(publicPath: string): Promise<string> {
  const out = await run('ssh-keygen', ['-l', '-E', 'sha256', '-f', publicPath]);
  const fp = out.split(' ')[1];
  if (fp === undefined || !fp.startsWith('SHA256:')) throw new Error(`unexpected ssh-keygen -l output: ${out}`);
  return fp;
}

export interface SshdOptions {
  /** Value of AllowStreamLocalForwarding. Default 'yes'. */
  allowStreamLocalForwarding?: 'yes' | 'no' | 'local' | 'remote' | 'all';
  /** Value of AllowTcpForwarding (OpenSSH also applies it to unix sockets). Default: unset (yes). */
  allowTcpForwarding?: 'yes' | 'no' | 'local' | 'remote' | 'all';
  /** Host key type. Default ed25519. */
  hostKeyType?: 'ed25519' | 'ecdsa' | 'rsa';
  /** Extra sshd_config lines. */
  extraConfig?: string[];
  /** Bound on startup. Default 10000 ms. */
  startTimeoutMs?: number;
}

export interface ThrowawaySshd {
  host: string;
  port: number;
  user: string;
  /** Temporary directory holding every file of this sshd (removed by stop()). */
  dir: string;
  hostKey: GeneratedKey;
  /** A client key authorized at start. */
  clientKey: GeneratedKey;
  authorizedKeysPath: string;
  /** A known_hosts file holding exactly this sshd's host key for [127.0.0.1]:port. */
  knownHostsPath: string;
  /** The known_hosts line for this sshd's host key. */
  knownHostsLine: string;
  /** Replaces authorized_keys with the given public key lines. */
  authorize(publicLines: string[]): Promise<void>;
  /** sshd's stderr so far (for diagnostics). */
  log(): string;
  stop(): Promise<void>;
  /** Same as stop(). */
  close(): Promise<void>;
}

/** Starts a throwaway sshd on 127.0.0.1 at a free high port. */
export async function startSshd(options: SshdOptions = {}): Promise<ThrowawaySshd> {
  const dir = await mkdtemp(join(tmpdir(), 'ep-sshd-'));
  try {
    if (process.getuid?.() === 0) await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
    const hostKey = await generateKey(join(dir, 'host_key'), options.hostKeyType ?? 'ed25519');
    const clientKey = await generateKey(join(dir, 'client_key'));
    const authorizedKeysPath = join(dir, 'authorized_keys');
    await writeFile(authorizedKeysPath, `${clientKey.publicLine}\n`, { mode: 0o600 });
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const port = await freePort();
      try {
        return await launch(dir, port, hostKey, clientKey, authorizedKeysPath, options);
      } catch (err) {
        lastError = err; // most likely the port was taken in between: try another
      }
    }
    throw lastError;
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

async function launch(
  dir: string,
  port: number,
  hostKey: GeneratedKey,
  clientKey: GeneratedKey,
  authorizedKeysPath: string,
  options: SshdOptions,
): Promise<ThrowawaySshd> {
  const configPath = join(dir, `sshd_config.${port}`);
  const config = [
    `Port ${port}`,
    `ListenAddress ${LOOPBACK}`,
    `HostKey ${hostKey.privatePath}`,
    `PidFile ${join(dir, `sshd.${port}.pid`)}`,
    `AuthorizedKeysFile ${authorizedKeysPath}`,
    'StrictModes no',
    'UsePAM no',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password',
    `AllowStreamLocalForwarding ${options.allowStreamLocalForwarding ?? 'yes'}`,
    ...(options.allowTcpForwarding === undefined ? [] : [`AllowTcpForwarding ${options.allowTcpForwarding}`]),
    'X11Forwarding no',
    'PrintMotd no',
    'MaxStartups 100',
    'LogLevel VERBOSE',
    ...(options.extraConfig ?? []),
  ];
  await writeFile(configPath, `${config.join('\n')}\n`);
  const child = spawn(SSHD, ['-f', configPath, '-D', '-e'], { stdio: ['ignore', 'ignore', 'pipe'] });
  reapOnExit(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    stderr += d;
  });
  await waitForListening(child, () => stderr, options.startTimeoutMs ?? 10_000);
  const knownHostsLine = `[${LOOPBACK}]:${port} ${hostKey.publicLine.split(' ').slice(0, 2).join(' ')}`;
  const knownHostsPath = join(dir, 'known_hosts');
  await writeFile(knownHostsPath, `${knownHostsLine}\n`);
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await killChild(child);
    await rm(dir, { recursive: true, force: true });
  };
  return {
    host: LOOPBACK,
    port,
    user: userInfo().username,
    dir,
    hostKey,
    clientKey,
    authorizedKeysPath,
    knownHostsPath,
    knownHostsLine,
    authorize: (lines) => writeFile(authorizedKeysPath, lines.map((l) => `${l}\n`).join(''), { mode: 0o600 }),
    log: () => stderr,
    stop,
    close: stop,
  };
}

function waitForListening(child: ChildProcess, stderr: () => string, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const check = (): void => {
      if (/Server listening on/.test(stderr())) done();
    };
    const onExit = (code: number | null): void => done(new Error(`sshd exited (${code}) at startup:\n${stderr()}`));
    const timer = setTimeout(
      () => done(new Error(`sshd did not start within ${timeoutMs} ms:\n${stderr()}`)),
      timeoutMs,
    );
    const done = (err?: Error): void => {
      clearTimeout(timer);
      child.stderr?.removeListener('data', check);
      child.removeListener('exit', onExit);
      if (err === undefined) return resolve();
      void killChild(child).finally(() => reject(err));
    };
    child.stderr?.on('data', check);
    child.once('exit', onExit);
    check();
  });
}

const live = new Set<ChildProcess>();
let reaperInstalled = false;

/**
 * Safety net for a test that fails before its after hook: the child does not keep the event
 * loop alive, and whatever is still running when the process exits gets SIGKILL.
 */
export function reapOnExit(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.unref();
  (child.stderr as (NodeJS.ReadableStream & { unref?: () => void }) | null)?.unref?.();
  if (!reaperInstalled) {
    reaperInstalled = true;
    process.once('exit', () => {
      for (const c of live) c.kill('SIGKILL');
    });
  }
}

/** SIGTERM, then SIGKILL after 2 s; resolves when the process has exited. */
async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
  await exited;
  clearTimeout(timer);
}

/** A free TCP port on loopback (bound then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, LOOPBACK, () => resolve());
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export interface TestServer {
  /** Unix socket path, or TCP port (as a string) for TCP servers. */
  address: string;
  port: number;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** Listens, tracks every accepted socket, and destroys them all on close(). */
async function trackedServer(
  listen: (server: Server) => void,
  onConnection: (socket: Socket) => void,
): Promise<TestServer> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server = createServer((socket) => {
    count++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
    onConnection(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => resolve());
    listen(server);
  });
  const address = server.address();
  return {
    address: typeof address === 'string' ? address : String(address?.port),
    port: typeof address === 'object' && address !== null ? address.port : 0,
    connections: () => count,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A unix socket server that echoes every byte back. */
export function startUnixEcho(path: string): Promise<TestServer> {
  return trackedServer(
    (s) => s.listen(path),
    (socket) => socket.pipe(socket),
  );
}

/** A unix socket server that accepts and never reads (its peers' writes back up). */
export function startUnixSink(path: string): Promise<TestServer> {
  return trackedServer(
    (s) => s.listen(path),
    (socket) => socket.pause(),
  );
}

/** A TCP server on 127.0.0.1 that accepts and never sends a byte (an SSH tarpit). */
export function startTarpit(): Promise<TestServer> {
  return trackedServer(
    (s) => s.listen(0, LOOPBACK),
    (socket) => socket.pause(),
  );
}

export interface TcpRelay extends TestServer {
  /** Stops forwarding in both directions without closing anything (a silent black hole). */
  blackhole(): void;
}

/** A TCP relay 127.0.0.1:<port> → 127.0.0.1:targetPort that counts connections. */
export async function startTcpRelay(targetPort: number): Promise<TcpRelay> {
  const pairs = new Set<[Socket, Socket]>();
  let holed = false;
  const server = await trackedServer(
    (s) => s.listen(0, LOOPBACK),
    (inbound) => {
      const outbound = new (inbound.constructor as typeof Socket)();
      outbound.on('error', () => inbound.destroy());
      outbound.connect(targetPort, LOOPBACK);
      const pair: [Socket, Socket] = [inbound, outbound];
      pairs.add(pair);
      inbound.pipe(outbound);
      outbound.pipe(inbound);
      inbound.once('close', () => {
        outbound.destroy();
        pairs.delete(pair);
      });
      outbound.once('close', () => inbound.destroy());
      if (holed) hole(pair);
    },
  );
  const hole = ([a, b]: [Socket, Socket]): void => {
    a.unpipe(b);
    b.unpipe(a);
    a.pause();
    b.pause();
  };
  return {
    ...server,
    blackhole: () => {
      holed = true;
      for (const p of pairs) hole(p);
    },
    close: async () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      await server.close();
    },
  };
}
