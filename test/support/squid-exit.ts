/**
 * Real Squid exits on loopback for the door's tests: Debian's squid, unpacked by scripts/test into
 * EP_SQUID_ROOT, run in the foreground with no cache, allowing 127.0.0.1 only and refusing the
 * reserved ranges (other than loopback) as the guests' Squid does, each with its own
 * `visible_hostname` (so a `Via` header names the exit that carried a request) and an access log
 * of what reached it (`pa=` the Proxy-Authorization header it got, `-` when none).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './sshd.ts';

export const SQUID_ROOT = process.env['EP_SQUID_ROOT'] ?? join(import.meta.dirname, '../../.local/squid/root');
export const NO_SQUID = `no squid at ${SQUID_ROOT}: scripts/test unpacks Debian squid into .local/squid and sets EP_SQUID_ROOT`;
const HOST = '127.0.0.1';

export interface SquidExit {
  name: string;
  port: number;
  proc: ChildProcess;
  /** Its access log: one line per request, `<method> <url> pa=<Proxy-Authorization or ->`. */
  accessLog: string;
  /** Recent stdout and stderr. */
  log: () => string;
}

/** Waits (bounded by `boundMs`) until a TCP connect to 127.0.0.1:`port` succeeds. */
export async function listening(port: number, what: string, log: () => string, boundMs = 10_000): Promise<void> {
  for (const t0 = Date.now(); ; await sleep(50)) {
    const up = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, HOST, () => resolve(Boolean(sock.destroy())));
      sock.on('error', () => resolve(false));
    });
    if (up) return;
    if (Date.now() - t0 > boundMs) throw new Error(`${what} not listening on ${port} after ${boundMs} ms:\n${log()}`);
  }
}

/**
 * Starts a Squid exit named `name` on a free loopback port, in its own process group (kill it
 * with `process.kill(-proc.pid)`); `dir` holds its config and logs and must be writable by nobody.
 */
export async function startSquidExit(dir: string, name: string, boundMs = 10_000): Promise<SquidExit> {
  if (!existsSync(join(SQUID_ROOT, 'usr/sbin/squid'))) throw new Error(NO_SQUID);
  const port = await freePort();
  const conf = join(dir, `${name}.conf`);
  const accessLog = join(dir, `${name}.access.log`);
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
      'logformat door %rm %ru pa=%{Proxy-Authorization}>h',
      `access_log stdio:${accessLog} door`,
      'cache deny all',
      'cache_mem 0 MB',
      'pinger_enable off',
      'netdb_filename none',
      'shutdown_lifetime 0 seconds',
      `visible_hostname ${name}`,
      `http_port ${HOST}:${port}`,
      `acl local src ${HOST}/32`,
      // As the real exits do: reserved addresses refused (so nothing a door lets by by mistake
      // leaves the machine), names resolved from /etc/hosts only.
      'acl reserved dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 169.254.0.0/16 172.16.0.0/12 192.168.0.0/16',
      'http_access deny reserved',
      'dns_nameservers 127.0.0.1',
      'http_access allow local',
      'http_access deny all',
      '',
    ].join('\n'),
  );
  const env = { ...process.env, LD_LIBRARY_PATH: join(SQUID_ROOT, 'usr/lib/x86_64-linux-gnu') };
  const proc = spawn(join(SQUID_ROOT, 'usr/sbin/squid'), ['-N', '-d1', '-f', conf], {
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (c: Buffer): void => void (out = (out + c.toString()).slice(-10_000));
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const log = (): string => out;
  await listening(port, `squid ${name}`, log, boundMs);
  return { name, port, proc, accessLog, log };
}

/** Kills a child's whole process group (it was started detached); no-op once it has exited. */
export function killGroup(proc: ChildProcess): void {
  if (proc.pid !== undefined && proc.exitCode === null && proc.signalCode === null) {
    try {
      process.kill(-proc.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
