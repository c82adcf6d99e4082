/**
 * The project's one pino factory. Every process logs JSON lines with RFC 3339 timestamps and
 * string level labels, so `... | jq` parses every line, including those routed in from Temporal
 * (see `temporal-adapter.ts`).
 */
import { pino } from 'pino';
import type { Logger } from 'pino';
import { LogConfigError } from './errors.ts';

/** Log levels accepted in `LOG_LEVEL`, from most to least verbose. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

/** The level used when neither the option nor `LOG_LEVEL` says otherwise. */
export const DEFAULT_LOG_LEVEL: LogLevelName = 'info';

export interface CreateLoggerOptions {
  /** Component name, written as `name` on every line (e.g. `worker`, `api`). */
  name: string;
  /** Minimum level. Default: `LOG_LEVEL` from the environment, else `info`. */
  level?: LogLevelName;
  /** Where lines go: `stdout` (services) or `stderr` (CLIs and tests). Default `stdout`. */
  stream?: 'stdout' | 'stderr';
  /** Fields added to every line. */
  base?: Record<string, unknown>;
}

/**
 * Reads `LOG_LEVEL` (case-insensitive). Unset or empty gives `fallback`; anything else that is
 * not a level throws a `LogConfigError` naming the variable and the accepted values.
 */
export function logLevelFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  fallback: LogLevelName = DEFAULT_LOG_LEVEL,
): LogLevelName {
  const raw = env['LOG_LEVEL']?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (isLogLevel(raw)) return raw;
  throw new LogConfigError(
    `LOG_LEVEL=${JSON.stringify(env['LOG_LEVEL'])} is not a log level; use one of ${LOG_LEVELS.join(', ')}`,
  );
}

export function isLogLevel(value: string): value is LogLevelName {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

/** Creates a pino logger writing synchronous JSON lines to stdout or stderr. */
export function createLogger(options: CreateLoggerOptions): Logger {
  const fd = options.stream === 'stderr' ? 2 : 1;
  const logger = pino(
    {
      name: options.name,
      level: options.level ?? logLevelFromEnv(),
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    // Synchronous: lines written just before an exit are not lost.
    pino.destination({ dest: fd, sync: true }),
  );
  return options.base === undefined ? logger : logger.child(options.base);
}

export type { Logger } from 'pino';
