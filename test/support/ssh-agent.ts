/** A throwaway ssh-agent (the real one) on a given socket path, for agent authentication tests. */
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { reapOnExit } from './sshd.ts';

const execFileAsync = promisify(execFile);

export interface TestAgent {
  socketPath: string;
  /** Adds a private key file to the agent (ssh-add). */
  add(privateKeyPath: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts `ssh-agent -D -a socketPath`; resolves once the socket exists (bounded). */
export async function startAgent(socketPath: string, timeoutMs = 5_000): Promise<TestAgent> {
  const child = spawn('ssh-agent', ['-D', '-a', socketPath], { stdio: 'ignore' });
  reapOnExit(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const ready = await stat(socketPath).then(
      (s) => s.isSocket(),
      () => false,
    );
    if (ready) break;
    if (performance.now() > deadline || child.exitCode !== null) {
      await close();
      throw new Error(`ssh-agent did not create ${socketPath} within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    socketPath,
    add: async (privateKeyPath) => {
      await execFileAsync('ssh-add', ['-q', privateKeyPath], {
        timeout: 5_000,
        env: { ...process.env, SSH_AUTH_SOCK: socketPath },
      });
    },
    close,
  };
}
