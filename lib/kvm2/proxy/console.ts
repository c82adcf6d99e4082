/**
 * The last lines of a proxy VM's serial console log on its host (written by virtlogd to the file
 * the domain XML names), for the reason of a failed boot. libvirt has no call that reads a log
 * file, so this runs `tail` over the host's SSH session: bounded in bytes read and in time, and
 * the bytes (guest-controlled) are decoded leniently and stripped of control characters. And the
 * removal of a deleted proxy's log files, the same way.
 */
import type { SshSession } from '../../ssh/session.ts';
import { proxyObjectNames } from './object-names.ts';
import type { ProxyIdentity } from './object-names.ts';

/** Bytes read from the end of the log at most. */
export const CONSOLE_TAIL_MAX_BYTES = 8 * 1024;

export interface ConsoleTailOptions {
  /** Lines returned at most (the last ones). Default 20. */
  lines?: number;
  /** Bound on the whole read, in ms. Default 10000. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** The console log's last lines (empty when the log does not exist yet or is empty). */
export async function readConsoleTail(
  session: SshSession,
  id: ProxyIdentity,
  options: ConsoleTailOptions = {},
): Promise<string[]> {
  const path = proxyObjectNames(id).consoleLogPath; // built from identifiers: no quote inside
  const { stdout } = await session.exec(`tail -c ${CONSOLE_TAIL_MAX_BYTES} -- '${path}' 2>/dev/null`, {
    timeoutMs: options.timeoutMs ?? 10_000,
    maxBytes: CONSOLE_TAIL_MAX_BYTES,
    signal: options.signal,
  });
  // Guest output: keep printable text, tabs and newlines only.
  const text = [...stdout.toString('utf8')]
    .filter((ch) => ch === '\n' || ch === '\t' || (ch >= ' ' && ch !== '\u007f'))
    .join('');
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return lines.slice(-(options.lines ?? 20));
}

/** Rotated copies of a log that virtlogd keeps beside it (`<log>.0` …), removed with it. */
export const LOG_BACKUPS_REMOVED = 10;

/** What {@link removeProxyLogs} did. */
export interface RemovedLogs {
  /** Paths removed (absent ones are not listed). */
  removed: string[];
  /** Some file could not be removed (the shell's exit status was not 0). */
  failed: boolean;
}

/**
 * Removes the proxy's console and QEMU logs on its host and their rotated copies, over the host's
 * SSH session: one bounded command, explicit paths built from identifiers (no glob, no variable
 * from outside), `rm -f` of the names themselves (a symlink is removed, never followed). Never a
 * path outside `/var/log/libvirt/qemu/ep_<entry>_<name>.{console.log,log}[.N]`.
 */
export async function removeProxyLogs(
  session: SshSession,
  id: ProxyIdentity,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<RemovedLogs> {
  const paths = proxyLogPaths(id);
  const list = paths.map((p) => `'${p}'`).join(' '); // built from identifiers: no quote inside
  const script = `rc=0; for f in ${list}; do if [ -e "$f" ] || [ -L "$f" ]; then rm -f -- "$f" && printf '%s\\n' "$f" || rc=1; fi; done; exit $rc`;
  const { stdout, code } = await session.exec(script, {
    timeoutMs: options.timeoutMs ?? 10_000,
    maxBytes: 16 * 1024,
    signal: options.signal,
  });
  const removed = stdout
    .toString('utf8')
    .split('\n')
    .filter((l) => paths.includes(l));
  return { removed, failed: code !== 0 };
}

/** Every log file of the proxy on its host, rotated copies included. */
export function proxyLogPaths(id: ProxyIdentity): string[] {
  const names = proxyObjectNames(id);
  return [names.consoleLogPath, names.qemuLogPath].flatMap((p) => [
    p,
    ...Array.from({ length: LOG_BACKUPS_REMOVED }, (_, i) => `${p}.${i}`),
  ]);
}
