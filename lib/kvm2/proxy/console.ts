/**
 * The last lines of a proxy VM's serial console log on its host (written by virtlogd to the file
 * the domain XML names), for the reason of a failed boot. libvirt has no call that reads a log
 * file, so this runs `tail` over the host's SSH session: bounded in bytes read and in time, and
 * the bytes (guest-controlled) are decoded leniently and stripped of control characters.
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
