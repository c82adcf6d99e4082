/**
 * The API as operators start it (`bin/api`), a process of its own on a free loopback port, for
 * integration tests that need the real entry point (its options, its OTEL_* set-up, its shutdown).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PROJECT_ROOT, withTimeout } from './temporal.ts';

export interface ApiProcess {
  child: ChildProcess;
  /** `http://127.0.0.1:PORT`, from its `api listening` line. */
  url: string;
  /** Every line it printed (stderr's prefixed `stderr: `). */
  lines: string[];
  /** SIGTERM and wait for the exit (bounded by 20 s). */
  stop(): Promise<void>;
}

/**
 * Starts `bin/api --token-file tokenFile --port 0 --task-queue taskQueue` with `env` over this
 * process's (LOG_LEVEL=info unless `env` says otherwise); resolves once it listens (bounded by
 * `listenTimeoutMs`), and kills it when it does not.
 */
export async function spawnApiProcess(
  tokenFile: string,
  taskQueue: string,
  env: Record<string, string> = {},
  listenTimeoutMs = 30_000,
): Promise<ApiProcess> {
  const child = spawn(
    process.execPath,
    [join(PROJECT_ROOT, 'bin/api'), '--token-file', tokenFile, '--port', '0', '--task-queue', taskQueue],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info', ...env } },
  );
  const lines: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(line);
      if (m && line.includes('"api listening"')) resolve(m[1]!);
    });
    createInterface({ input: child.stderr }).on('line', (line) => lines.push(`stderr: ${line}`));
    void exited.then(() => reject(new Error(`the API exited before it listened:\n${lines.slice(-20).join('\n')}`)));
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await withTimeout(exited, 20_000, 'the API process to stop');
  };
  try {
    return { child, lines, url: await withTimeout(listening, listenTimeoutMs, 'the API process to listen'), stop };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}
