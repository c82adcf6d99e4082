/**
 * Fault injection on the namespaced test hosts (test/hosts/testhost): packet filter rules inside a
 * host's network namespace (a black hole that drops every SSH segment both ways, or a RST for
 * every segment sent to sshd), the sshd processes that serve one of our connections (found by its
 * local port with `ss`), signals to daemons, and restoring a host. Every command is bounded in
 * time; rules carry a comment so that `clearFaultRules` removes whatever a crashed test left.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestHost } from './testhosts.ts';

const pexecFile = promisify(execFile);

/** Comment on every rule we add, so leftovers can be found and removed. */
export const FAULT_RULE_COMMENT = 'ep-test-fault';

async function sh(argv: string[], timeoutMs = 10_000): Promise<string> {
  const { stdout } = await pexecFile(argv[0]!, argv.slice(1), { timeout: timeoutMs, encoding: 'utf8' });
  return stdout;
}

/** Runs `argv` in the host's network namespace. */
function inNetns(host: TestHost, argv: string[], timeoutMs?: number): Promise<string> {
  return sh(['ip', 'netns', 'exec', host.name, ...argv], timeoutMs);
}

/** What a fault rule does to SSH traffic of the host. */
export type SshFault = 'blackhole' | 'reset';

function faultRules(host: TestHost, fault: SshFault): string[][] {
  const port = String(host.port);
  const tag = ['-m', 'comment', '--comment', FAULT_RULE_COMMENT];
  if (fault === 'reset')
    return [['INPUT', '-p', 'tcp', '--dport', port, ...tag, '-j', 'REJECT', '--reject-with', 'tcp-reset']];
  // Both directions: nothing from us reaches sshd, nothing from sshd reaches us, and no RST or ICMP.
  return [
    ['INPUT', '-p', 'tcp', '--dport', port, ...tag, '-j', 'DROP'],
    ['OUTPUT', '-p', 'tcp', '--sport', port, ...tag, '-j', 'DROP'],
  ];
}

/**
 * Inserts the fault's rules at the head of the host's INPUT/OUTPUT chains; resolves once they are in
 * place. Returns the function that removes exactly those rules (idempotent).
 */
export async function injectSshFault(host: TestHost, fault: SshFault): Promise<() => Promise<void>> {
  const rules = faultRules(host, fault);
  const added: string[][] = [];
  let removed = false;
  const remove = async (): Promise<void> => {
    if (removed) return;
    removed = true;
    for (const rule of added) await inNetns(host, ['iptables', '-D', ...rule]).catch(() => undefined);
  };
  try {
    for (const rule of rules) {
      await inNetns(host, ['iptables', '-I', ...rule]);
      added.push(rule);
    }
  } catch (err) {
    await remove();
    throw err;
  }
  return remove;
}

/** Removes every rule carrying {@link FAULT_RULE_COMMENT} from the host's filter table (bounded). */
export async function clearFaultRules(host: TestHost): Promise<number> {
  let removed = 0;
  for (let round = 0; round < 20; round++) {
    const rules = (await inNetns(host, ['iptables', '-S']))
      .split('\n')
      .filter((l) => l.startsWith('-A ') && l.includes(`--comment ${FAULT_RULE_COMMENT}`));
    if (rules.length === 0) return removed;
    for (const line of rules) {
      const spec = line.slice(3).trim().split(/\s+/);
      await inNetns(host, ['iptables', '-D', ...spec]).catch(() => undefined);
      removed++;
    }
  }
  throw new Error(`${host.name}: fault rules still present after 20 rounds of removal`);
}

interface TcpEnd {
  localPort: number;
  remotePort: number;
  pids: number[];
}

function parseSs(out: string): TcpEnd[] {
  const ends: TcpEnd[] = [];
  for (const line of out.split('\n')) {
    const m = /\S+:(\d+)\s+\S+:(\d+)\s+users:\((.*)\)\s*$/.exec(line.trim());
    if (!m) continue;
    const pids = [...m[3]!.matchAll(/pid=(\d+)/g)].map((p) => Number(p[1]));
    ends.push({ localPort: Number(m[1]), remotePort: Number(m[2]), pids });
  }
  return ends;
}

/** Local ports of this process's established TCP connections to the host's sshd. */
export async function ourSshPorts(host: TestHost): Promise<Set<number>> {
  const out = await sh(['ss', '-tnpH', 'state', 'established', 'dst', host.address, 'dport', '=', `:${host.port}`]);
  return new Set(
    parseSs(out)
      .filter((e) => e.pids.includes(process.pid))
      .map((e) => e.localPort),
  );
}

/**
 * Runs `open` and returns its result with the local port of the one SSH connection to the host
 * it made (found by comparing this process's connections before and after).
 */
export async function withNewSshPort<T>(host: TestHost, open: () => Promise<T>): Promise<{ value: T; port: number }> {
  const before = await ourSshPorts(host);
  const value = await open();
  const fresh = [...(await ourSshPorts(host))].filter((p) => !before.has(p));
  if (fresh.length !== 1) throw new Error(`expected one new SSH connection to ${host.name}, found ${fresh.length}`);
  return { value, port: fresh[0]! };
}

/** Pids of the sshd processes (inside the host) serving our connection from `localPort`. */
export async function sshdPidsFor(host: TestHost, localPort: number): Promise<number[]> {
  const out = await inNetns(host, [
    'ss',
    '-tnpH',
    'state',
    'established',
    'sport',
    '=',
    `:${host.port}`,
    'dport',
    '=',
    `:${localPort}`,
  ]);
  const pids = [...new Set(parseSs(out).flatMap((e) => e.pids))];
  const listener = (host.pids as { sshd?: number } | undefined)?.sshd;
  // Never the listener: only the per-connection processes of this one connection.
  return pids.filter((p) => p !== listener && p !== process.pid);
}

/** Sends `signal` to each pid that still exists. */
export function signalPids(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
}

/** The process state letter from /proc (R, S, D, T for stopped, Z), or undefined if it is gone. */
export function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

/** Resolves once none of `pids` exists any more (bounded); returns the ones still alive. */
export async function waitGone(pids: readonly number[], timeoutMs = 5_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive = pids.filter((p) => {
      const s = processState(p);
      return s !== undefined && s !== 'Z';
    });
    if (alive.length === 0 || Date.now() >= deadline) return alive;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const TESTHOST = join(import.meta.dirname, '..', 'hosts', 'testhost');

/**
 * Puts a host back in shape after a fault test: removes fault rules, resumes stopped daemons, and
 * if a daemon is gone runs `test/hosts/testhost up <hostCount>` (idempotent; rebuilds unhealthy
 * hosts; the count keeps every existing host).
 * Returns what it had to do.
 */
export async function restoreHost(host: TestHost, hostCount: number): Promise<string[]> {
  const done: string[] = [];
  const rules = await clearFaultRules(host).catch(() => 0);
  if (rules > 0) done.push(`removed ${rules} fault rule(s)`);
  const pids = (host.pids ?? {}) as Record<string, number>;
  let missing = false;
  for (const [name, pid] of Object.entries(pids)) {
    const state = processState(pid);
    if (state === 'T' || state === 't') {
      signalPids([pid], 'SIGCONT');
      done.push(`resumed ${name}`);
    } else if (state === undefined || state === 'Z') {
      missing = true;
    }
  }
  if (missing) {
    // `up N` keeps hosts 1..N and removes any above N: pass the number of hosts there are.
    await sh([TESTHOST, 'up', String(hostCount)], 300_000);
    done.push('ran testhost up');
  }
  return done;
}
