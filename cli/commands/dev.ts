import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CliError, EXIT } from '../http.ts';
import { positive, str } from '../command.ts';
import type { Command } from '../command.ts';

/** The checkout's root (this file is cli/commands/dev.ts). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What `egressctl dev` passes to the dev stack. */
export interface DevOptions {
  providers: string;
  dataDir: string;
  apiPort: number;
  out: (line: string) => void;
}

/** What dev/stack.ts exports. */
export interface DevStack {
  /** Runs the stack until SIGINT or SIGTERM; resolves with the exit code. */
  runDev(o: DevOptions): Promise<number>;
}

/**
 * The dev stack (dev/stack.ts). dev/ is a part of the source checkout, not of the installed CLI
 * (the production image leaves it out, and nothing imports it), so it is found at run time by its
 * path, and its absence is said in words rather than as a module-not-found trace.
 */
export async function loadDevStack(root = ROOT): Promise<DevStack> {
  const file = join(root, 'dev', 'stack.ts');
  if (!existsSync(file)) {
    throw new CliError(
      EXIT.usage,
      `egressctl dev needs a source checkout of egress-proxies (it runs dev/stack.ts and scripts/temporal), ` +
        `and ${file} is not here: this install carries the worker, the API and egressctl, not the dev stack`,
    );
  }
  return (await import(pathToFileURL(file).href)) as DevStack;
}

export const dev: Command = {
  name: 'dev',
  usage: 'dev [--providers FILE] [--api-port N] [--data DIR]',
  help: `egressctl dev [--providers FILE] [--api-port N] [--data DIR]
  The embedded stack on this machine, on loopback: the Temporal dev server (scripts/temporal; left
  running if it already was), a worker (--providers, default .data/providers.yaml, which
  scripts/main writes) and the API on --api-port (default 8080) with a token file made once in
  --data (default .data). Prints the API and Web UI URLs and where the JSON logs go; Ctrl-C stops
  the API, the worker and the dev server it started. Exit 1 if the worker or the API dies. Needs a
  source checkout (dev/ and scripts/ are not in the production image).`,
  options: { providers: { type: 'string' }, 'api-port': { type: 'string' }, data: { type: 'string' } },
  async run(ctx) {
    const data = str(ctx, 'data') ?? join(process.cwd(), '.data');
    const apiPort = positive(ctx, 'api-port', 8080);
    const stack = await loadDevStack();
    return stack.runDev({
      providers: str(ctx, 'providers') ?? join(data, 'providers.yaml'),
      dataDir: data,
      apiPort,
      out: ctx.out,
    });
  },
};
