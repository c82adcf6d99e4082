#!/usr/bin/env node
// egressctl: the operator CLI (docs/api.md, README "The CLI"). Run with Node 22.6+ (type
// stripping); installed as the package's `egressctl` bin. This file parses the command line and
// dispatches through the command table (cli/commands/); each command loads its heavy dependencies
// (undici, the Temporal client, the SSH side, the dev stack) when it runs, so that `--help` and a
// mistyped option answer at once (docs/benchmarks.md, start-up).
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { findCommand, GLOBAL_HELP, TOP_HELP } from '../cli/commands/index.ts';
import type { Command, Context, OptionValues } from '../cli/command.ts';
import { usage } from '../cli/command.ts';
import { CliError, EXIT, readCa, readToken } from '../cli/http.ts';
import type { ApiTarget } from '../cli/http.ts';
import { OptionError, optionalWholeNumber } from '../runtime/options.ts';

const globalOptions = {
  api: { type: 'string' },
  'token-file': { type: 'string' },
  cacert: { type: 'string' },
  output: { type: 'string' },
  'timeout-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} satisfies ParseArgsConfig['options'];

const out = (s: string): void => void process.stdout.write(s + '\n');

/** The API target of --api, --token-file and --cacert. */
async function apiTarget(v: OptionValues, timeoutMs: number): Promise<ApiTarget> {
  const tokenFile = (v['token-file'] as string | undefined) ?? process.env['EGRESSCTL_TOKEN_FILE'];
  const caFile = (v['cacert'] as string | undefined) ?? process.env['EGRESSCTL_CACERT'];
  const apiUrl = (v['api'] as string | undefined) ?? process.env['EGRESSCTL_API'] ?? 'http://127.0.0.1:8080';
  if (!URL.canParse(apiUrl)) throw usage(`--api must be a URL such as http://127.0.0.1:8080, got ${apiUrl}`);
  const target: ApiTarget = {
    base: new URL(apiUrl),
    token: tokenFile === undefined ? undefined : await readToken(tokenFile),
    timeoutMs,
  };
  if (caFile !== undefined) Object.assign(target, { ca: await readCa(caFile), caFile });
  return target;
}

/** Strict parse of the command's and the global options; an unknown one is a usage error, then `after`. */
function parse(argv: string[], options: ParseArgsConfig['options'], after: string) {
  try {
    return parseArgs({ args: argv, options: { ...globalOptions, ...options }, allowPositionals: true, strict: true });
  } catch (err) {
    throw usage(`${(err as Error).message}${after}`);
  }
}

async function main(argv: string[]): Promise<number> {
  const words = parseArgs({ args: argv, options: globalOptions, allowPositionals: true, strict: false }).positionals;
  const command: Command | undefined = findCommand(words);
  if (command === undefined) {
    const { values } = parse(argv, {}, `\n\n${TOP_HELP}`);
    if (values.help === true && words.length === 0) return (out(TOP_HELP), EXIT.ok);
    const what =
      words.length === 0 ? 'a command is needed' : `unknown command ${JSON.stringify(words.slice(0, 2).join(' '))}`;
    throw usage(`${what}\n\n${TOP_HELP}`);
  }
  const parsed = parse(argv, command.options, `; see egressctl ${command.name} --help`);
  const values = parsed.values as OptionValues;
  if (values['help'] === true) return (out(`${command.help}\n\n${GLOBAL_HELP}`), EXIT.ok);
  const args = parsed.positionals.slice(command.name.split(' ').length);
  const maxArgs = command.maxArgs ?? 0;
  if (args.length > maxArgs) throw usage(`unexpected argument ${JSON.stringify(args[maxArgs])}; see --help`);
  const output = (values['output'] as string | undefined) ?? 'table';
  if (output !== 'json' && output !== 'table') throw usage(`--output must be json or table, got ${output}`);
  const timeoutMs = optionalWholeNumber('timeout-ms', values['timeout-ms'] as string | undefined, 30_000);
  const ctx: Context = {
    args,
    values,
    json: output === 'json',
    timeoutMs,
    out,
    api: () => apiTarget(values, timeoutMs),
  };
  return command.run(ctx);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof CliError || err instanceof OptionError) {
    process.stderr.write(`${err.message}\n`);
    process.exitCode = err instanceof CliError ? err.code : EXIT.usage;
  } else {
    process.stderr.write(`egressctl failed: ${(err as Error).message}\n`);
    process.exitCode = EXIT.failure;
  }
}
