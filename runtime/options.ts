// Option parsing shared by the entry points: an unknown option or a missing value is a usage
// error (exit 2) with the help, never a stack trace.
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';

/** `parseArgs(config)`, or the error and `help` on stderr and exit 2. */
export function parseArgsOrExit<T extends ParseArgsConfig>(config: T, help: string): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${help}\n`);
    process.exit(2);
  }
}
