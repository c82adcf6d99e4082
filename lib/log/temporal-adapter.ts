/**
 * Routes the Temporal SDK's logs into pino. The SDK's `Logger` interface (`log(level, message,
 * meta)` plus one method per level, levels `TRACE`..`ERROR`) is matched structurally, so this file
 * does not import `@temporalio/*` (lib/ never does); `Runtime.install({ logger })` accepts the
 * object returned here as is.
 */
import type { Logger, LogLevelName } from './logger.ts';

/** The SDK's log levels (`@temporalio/common` `LogLevel`). */
export type SdkLogLevel = 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
/** The SDK's log metadata (`@temporalio/common` `LogMetadata`). */
export type SdkLogMetadata = Record<string | symbol, unknown>;

/** Structurally the SDK's `Logger`. */
export interface SdkLogger {
  log(level: SdkLogLevel, message: string, meta?: SdkLogMetadata): void;
  trace(message: string, meta?: SdkLogMetadata): void;
  debug(message: string, meta?: SdkLogMetadata): void;
  info(message: string, meta?: SdkLogMetadata): void;
  warn(message: string, meta?: SdkLogMetadata): void;
  error(message: string, meta?: SdkLogMetadata): void;
}

/**
 * The SDK's `LogTimestamp` key (`Symbol.for('log_timestamp')`): nanoseconds since the epoch, as a
 * bigint, of when the SDK (or Core) produced the entry. The SDK buffers entries for about 100 ms
 * to sort them, so the pino `time` is later; the original goes to `eventTime`.
 */
const SDK_LOG_TIMESTAMP = Symbol.for('log_timestamp');

const PINO_METHOD = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
} as const satisfies Record<SdkLogLevel, LogLevelName>;

/** Wraps a pino logger (or child) as the SDK's `Logger`. */
export function sdkLoggerFromPino(logger: Logger): SdkLogger {
  // Keys pino already writes on every line; a metadata key among them would be written twice
  // (pino does not deduplicate), so such keys move under `meta`.
  const taken = new Set(['level', 'time', 'msg', 'pid', 'hostname', ...Object.keys(logger.bindings())]);
  const emit = (level: SdkLogLevel, message: string, meta?: SdkLogMetadata): void => {
    const method = PINO_METHOD[level] ?? 'info';
    if (!logger.isLevelEnabled(method)) return;
    logger[method](meta === undefined ? {} : toFields(meta, taken), message);
  };
  return {
    log: emit,
    trace: (message, meta) => emit('TRACE', message, meta),
    debug: (message, meta) => emit('DEBUG', message, meta),
    info: (message, meta) => emit('INFO', message, meta),
    warn: (message, meta) => emit('WARN', message, meta),
    error: (message, meta) => emit('ERROR', message, meta),
  };
}

/**
 * The SDK level matching a pino level, for Core's log filter (`telemetryOptions.logging.filter`):
 * Core then drops what pino would drop anyway. `fatal` and `silent` map to `ERROR`.
 */
export function sdkLogLevelFor(level: string): SdkLogLevel {
  switch (level) {
    case 'trace':
      return 'TRACE';
    case 'debug':
      return 'DEBUG';
    case 'info':
      return 'INFO';
    case 'warn':
      return 'WARN';
    default:
      return 'ERROR';
  }
}

function toFields(meta: SdkLogMetadata, taken: ReadonlySet<string>): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  let clashing: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(meta)) {
    // Object.entries skips symbol keys (the SDK's LogTimestamp), which JSON cannot carry anyway.
    if (taken.has(key)) (clashing ??= {})[key] = value;
    else fields[key] = value;
  }
  if (clashing !== undefined) fields['meta'] = clashing;
  const ts = meta[SDK_LOG_TIMESTAMP];
  if (typeof ts === 'bigint') fields['eventTime'] = new Date(Number(ts / 1_000_000n)).toISOString();
  // pino serialises errors under `err` (message, stack, cause); the SDK passes them as `error`.
  if (fields['error'] instanceof Error && fields['err'] === undefined) {
    fields['err'] = fields['error'];
    delete fields['error'];
  }
  return fields;
}
