// Option parsing shared by the entry points: an unknown option, a missing value or a bad number is
// a usage error (exit 2) that names the option, never a stack trace.
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';

/** A bad option value; its message names the option and what it must be. */
export class OptionError extends Error {
  override readonly name = 'OptionError';
}

/**
 * The whole number an option's text holds: counts, ports, sizes and durations in ms
 * (`--timeout-ms`). At least `min` (default 1: a positive whole number) and at most `max` when
 * given; anything else throws OptionError naming `--name`.
 */
export function wholeNumber(name: string, text: string, o: { min?: number; max?: number } = {}): number {
  const min = o.min ?? 1;
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) {
    const what = min === 1 ? 'a positive whole number' : `a whole number ≥ ${min}`;
    throw new OptionError(`--${name} must be ${what}, got ${JSON.stringify(text)}`);
  }
  if (o.max !== undefined && n > o.max) throw new OptionError(`--${name} must be at most ${o.max}, got ${n}`);
  return n;
}

/** `wholeNumber` of an optional option: `dflt` when it was not given. */
export function optionalWholeNumber<D extends number | undefined>(
  name: string,
  text: string | undefined,
  dflt: D,
  o: { min?: number; max?: number } = {},
): number | D {
  return text === undefined ? dflt : wholeNumber(name, text, o);
}

/** `f()`, or its OptionError's message on stderr and exit 2: for entry points that check options once at start. */
export function orExit<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (!(err instanceof OptionError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
}

/** `parseArgs(config)`, or the error and `help` on stderr and exit 2. */
export function parseArgsOrExit<T extends ParseArgsConfig>(config: T, help: string): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${help}\n`);
    process.exit(2);
  }
}
