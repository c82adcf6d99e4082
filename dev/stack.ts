// `egressctl dev`: the embedded stack on one machine, on loopback: the Temporal dev server (SQLite
// under the data folder, started by scripts/temporal unless one already runs), a worker and the
// HTTP API (with a token file it creates once), each a child process whose JSON logs go to a file.
// Prints the API and Web UI URLs; Ctrl-C (SIGINT) or SIGTERM stops the API and the worker (bounded,
// then SIGKILL), and the dev server if this command started it.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DevOptions } from '../cli/commands/dev.ts';
import { CliError, EXIT } from '../cli/http.ts';
import { webUiUrl } from '../cli/temporal.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const STOP_GRACE_MS = 20_000;
const READY_TIMEOUT_MS = 120_000;

/** Runs scripts/temporal with `args`; resolves with its exit code (output goes to `log`). */
function temporal(args: string[], log: NodeJS.WritableStream): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(join(ROOT, 'scripts/temporal'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    child.once('exit', (code) => resolve(code ?? 1));
    child.once('error', () => resolve(127));
  });
}

/** Starts `node script args` with stdout and stderr appended to `logFile`; resolves once `ready` is logged. */
function startNode(script: string, args: string[], logFile: string, ready: RegExp): Promise<ChildProcess> {
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(process.execPath, [join(ROOT, script), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: process.env['LOG_LEVEL'] ?? 'info' },
  });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new CliError(EXIT.failure, `${script} did not get ready within ${READY_TIMEOUT_MS} ms; see ${logFile}`));
    }, READY_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      seen = (seen + chunk.toString('utf8')).slice(-64 * 1024);
      if (ready.test(seen)) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        resolve(child);
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new CliError(EXIT.failure, `${script} exited (${code}) before it was ready; see ${logFile}`));
    });
  });
}

/** SIGTERM, then SIGKILL after the grace; resolves once the process is gone. */
function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Runs the stack until SIGINT or SIGTERM; returns the exit code. */
export async function runDev(o: DevOptions): Promise<number> {
  if (!existsSync(o.providers)) {
    throw new CliError(
      EXIT.usage,
      `no providers file at ${o.providers}: pass --providers FILE (docs/operator-guide.md), or run scripts/main once to write the embedded default`,
    );
  }
  mkdirSync(o.dataDir, { recursive: true });
  const tokenFile = join(o.dataDir, 'api-tokens');
  if (!existsSync(tokenFile)) {
    writeFileSync(tokenFile, `# made by egressctl dev\n${randomBytes(24).toString('hex')} admin\n`, { mode: 0o600 });
  }
  const temporalLog = createWriteStream(join(o.dataDir, 'dev-temporal.log'), { flags: 'a' });
  const wasUp = (await temporal(['status'], temporalLog)) === 0;
  if (!wasUp) {
    o.out('starting the Temporal dev server (scripts/temporal up)...');
    if ((await temporal(['up'], temporalLog)) !== 0) {
      throw new CliError(EXIT.unavailable, `scripts/temporal up failed; see ${join(o.dataDir, 'dev-temporal.log')}`);
    }
  }
  let worker: ChildProcess | undefined;
  let api: ChildProcess | undefined;
  const shutdown = async (): Promise<void> => {
    await stop(api);
    await stop(worker);
    if (!wasUp) await temporal(['down'], temporalLog);
  };
  try {
    worker = await startNode(
      'bin/worker',
      ['--providers', o.providers],
      join(o.dataDir, 'dev-worker.log'),
      /"msg":"worker running"/,
    );
    api = await startNode(
      'bin/api',
      ['--token-file', tokenFile, '--listen', '127.0.0.1', '--port', String(o.apiPort)],
      join(o.dataDir, 'dev-api.log'),
      /"msg":"api listening"/,
    );
  } catch (err) {
    await shutdown();
    throw err;
  }
  const apiUrl = `http://127.0.0.1:${o.apiPort}`;
  const ui = webUiUrl();
  o.out(`ready.
  API:        ${apiUrl}   (token file ${tokenFile}: export EGRESSCTL_API=${apiUrl} EGRESSCTL_TOKEN_FILE=${tokenFile})
  Web UI:     ${ui}
  logs:       ${join(o.dataDir, 'dev-worker.log')}, ${join(o.dataDir, 'dev-api.log')} (JSON lines)
  Ctrl-C stops the API, the worker${wasUp ? '' : ' and the dev server'}.`);
  const code = await new Promise<number>((resolve) => {
    const onSignal = (): void => resolve(EXIT.ok);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    worker.once('exit', () => resolve(EXIT.failure));
    api.once('exit', () => resolve(EXIT.failure));
  });
  o.out('stopping...');
  await shutdown();
  o.out('stopped.');
  return code;
}
