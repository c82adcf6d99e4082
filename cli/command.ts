// What an egressctl command is: a small module in cli/commands/ with its help, its options and
// its run function, listed in cli/commands/index.ts. A command module imports only what `--help`
// needs; the Temporal SDK, the SSH side and the dev stack are loaded inside `run`.
import type { ParseArgsConfig } from 'node:util';
import { optionalWholeNumber } from '../runtime/options.ts';
import { CliError, EXIT, table } from './http.ts';
import type { ApiTarget } from './http.ts';

export type OptionValues = Record<string, string | boolean | string[] | undefined>;

/** What a command's `run` gets: its arguments, its option values and the global settings. */
export interface Context {
  /** The positional arguments after the command's words (at most `maxArgs`). */
  args: string[];
  values: OptionValues;
  /** `--output json`: one JSON document (or one line per item) instead of a table. */
  json: boolean;
  /** `--timeout-ms`: the bound on each request or step, in ms. */
  timeoutMs: number;
  /** Writes one line on stdout. */
  out: (line: string) => void;
  /** The API from --api and --token-file (the token file is read on the first call). */
  api: () => Promise<ApiTarget>;
}

export interface Command {
  /** The command's words: `proxy create`, `dev`. */
  name: string;
  /** Its line in the top-level help: the usage with every option. */
  usage: string;
  /** `egressctl <name> --help`: starts with `egressctl <name>`. */
  help: string;
  options: NonNullable<ParseArgsConfig['options']>;
  /** How many positional arguments it takes after its words (default 0). */
  maxArgs?: number;
  run(ctx: Context): Promise<number>;
}

export const usage = (message: string): CliError => new CliError(EXIT.usage, message);

/** A string option's value. */
export const str = (ctx: Context, name: string): string | undefined => ctx.values[name] as string | undefined;

/** A positive whole-number option (counts, sizes, durations in ms), or `dflt` when not given. */
export function positive<D extends number | undefined>(ctx: Context, name: string, dflt: D): number | D {
  return optionalWholeNumber(name, str(ctx, name), dflt);
}

/** A string option the command cannot do without. */
export function required(ctx: Context, name: string, what: string): string {
  const v = str(ctx, name);
  if (v === undefined) throw usage(`${what} needs --${name}`);
  return v;
}

/** `ENTRY/NAME` (or `ENTRY/KEY`) as its two parts; `example` is shown when it is not one. */
export function ref(arg: string | undefined, what = 'ENTRY/NAME', example = 'lab/p1'): [string, string] {
  const m = arg === undefined ? null : /^([^/\s]+)\/([^/\s]+)$/.exec(arg);
  if (m === null) throw usage(`expected ${what} (e.g. ${example}), got ${JSON.stringify(arg ?? '')}`);
  return [m[1]!, m[2]!];
}

export const enc = encodeURIComponent;

/** The proxy's path in the API. */
export const proxyPath = (entry: string, name: string): string => `/v1/proxies/${enc(entry)}/${enc(name)}`;

/** `body` as JSON with --output json, else `rows` as a table of `columns`. */
export function print(ctx: Context, body: unknown, rows: object[], columns: string[]): void {
  ctx.out(ctx.json ? JSON.stringify(body) : table(rows, columns));
}
