/**
 * Errors of configuration loading. Every problem names the field (as a path such as
 * `providers[1].hosts[0].keyFile`), what is wrong with it, and the fix. Class names are stable:
 * Temporal matches retry policies on them.
 */
import { CODES } from '../../contracts/errors.ts';
import { ProjectError } from '../errors.ts';
import type { ErrorKind, ProjectErrorOptions } from '../errors.ts';

/** One problem found in a configuration file. */
export interface ConfigIssue {
  /** Where: a field path (`providers[0].squid.port`), `(root)`, or `(yaml)` for a syntax error. */
  path: string;
  /** What is wrong, e.g. `must be an integer from 1 to 65535, got "http"`. */
  message: string;
  /** What to do about it, e.g. `set squid.port to the TCP port Squid listens on, e.g. 3128`. */
  fix: string;
  /** 1-based line of the offending text in the source, when known. */
  line?: number;
  /** 1-based column of the offending text in the source, when known. */
  col?: number;
}

/** Stable codes of {@link ConfigError}. */
export type ConfigErrorCode = 'CONFIG_INVALID' | 'CONFIG_UNREADABLE';

/**
 * A configuration file is unreadable (`CONFIG_UNREADABLE`) or invalid (`CONFIG_INVALID`: YAML
 * syntax or schema). Permanent: the same file fails the same way until an operator edits it. The
 * message lists every issue, one per line, as `path (line L, column C): problem — fix`.
 */
export class ConfigError extends ProjectError {
  readonly kind: ErrorKind = 'Permanent';
  readonly code: ConfigErrorCode;
  /** The file (or test source name) the problems were found in. */
  readonly source: string;
  readonly issues: readonly ConfigIssue[];
  constructor(
    source: string,
    issues: ConfigIssue[],
    code: ConfigErrorCode = 'CONFIG_INVALID',
    options?: ProjectErrorOptions,
  ) {
    super(formatConfigMessage(source, issues, code), options);
    this.code = code;
    this.source = source;
    this.issues = issues;
  }
}

/** `path (line L, column C): problem — fix`, the line/column part only when known. */
export function formatIssue(issue: ConfigIssue): string {
  const where = issue.line === undefined ? '' : ` (line ${issue.line}, column ${issue.col ?? 1})`;
  return `${issue.path}${where}: ${issue.message} — ${issue.fix}`;
}

function formatConfigMessage(source: string, issues: ConfigIssue[], code: ConfigErrorCode): string {
  const head =
    code === 'CONFIG_UNREADABLE'
      ? `cannot read configuration file ${source}`
      : `configuration file ${source} is invalid (${issues.length} problem${issues.length === 1 ? '' : 's'})`;
  return [`${head}:`, ...issues.map((i) => `  - ${formatIssue(i)}`)].join('\n');
}

/**
 * A proxy spec (or an image warm) that does not fit the providers file: an unknown entry or image
 * key, a bad name or size (`PROXY_SPEC_INVALID`, Permanent). The message starts with the field.
 */
export class ProxySpecError extends ProjectError {
  readonly code = CODES.proxySpecInvalid;
  readonly kind: ErrorKind = 'Permanent';
  /** The input field at fault, e.g. `imageKey` or `vm.memoryMiB`. */
  readonly field: string;
  constructor(field: string, message: string) {
    super(`${field}: ${message}`);
    this.field = field;
  }
}
