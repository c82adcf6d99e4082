/**
 * Loading the providers file: YAML (syntax errors carry line and column), then the zod schema,
 * then name uniqueness. Every problem becomes one {@link ConfigIssue} naming the field, the
 * problem and the fix, located in the source where the YAML allows; all of them are reported at
 * once in a {@link ConfigError}.
 */
import { readFile } from 'node:fs/promises';
import YAML, { LineCounter } from 'yaml';
import type { Document } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from './errors.ts';
import type { ConfigIssue } from './errors.ts';
import { ALLOWED_KEYS, FIELD_HELP, ProvidersFileSchema, duplicateNameIssues } from './schema.ts';
import type { ProvidersConfig } from './schema.ts';

/** Alias expansions allowed in a providers file: aliases of aliases grow exponentially (billion laughs). */
export const MAX_YAML_ALIASES = 100;

/** Refuse files larger than this before parsing (a providers file is a few KiB). */
export const MAX_PROVIDERS_FILE_BYTES = 1024 * 1024;

/** Reads, parses and validates a providers file; throws {@link ConfigError} listing every problem. */
export async function loadProvidersFile(path: string): Promise<ProvidersConfig> {
  let text: string;
  try {
    const buf = await readFile(path);
    if (buf.length > MAX_PROVIDERS_FILE_BYTES) {
      throw new ConfigError(path, [
        {
          path: '(file)',
          message: `is ${buf.length} bytes, over the ${MAX_PROVIDERS_FILE_BYTES}-byte limit`,
          fix: 'point to the providers YAML file, not to an image or archive',
        },
      ]);
    }
    text = buf.toString('utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const e = err as NodeJS.ErrnoException;
    const issue: ConfigIssue = {
      path: '(file)',
      message: `cannot be read: ${e.code ?? ''} ${e.message}`.trim(),
      fix: 'check the path and that the worker user can read the file',
    };
    throw new ConfigError(path, [issue], 'CONFIG_UNREADABLE', { cause: err });
  }
  return parseProvidersYaml(text, path);
}

/** Parses and validates providers YAML text; `sourceName` names it in errors. */
export function parseProvidersYaml(text: string, sourceName: string): ProvidersConfig {
  const lineCounter = new LineCounter();
  const doc = YAML.parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, strict: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      sourceName,
      doc.errors.map((e) => ({
        path: '(yaml)',
        message: `YAML syntax error: ${e.message}`,
        fix: 'correct the YAML at that position (indent with spaces, quote values containing ": " or "#")',
        ...lineCounter.linePos(e.pos[0]),
      })),
    );
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (err) {
    const message = (err as Error).message;
    const issue = {
      path: '(yaml)',
      message: `YAML error: ${message}`,
      fix: /alias count/i.test(message)
        ? `use at most ${MAX_YAML_ALIASES} alias expansions (write the repeated settings out instead of nesting aliases)`
        : 'define each anchor before its aliases',
    };
    throw new ConfigError(sourceName, [issue], 'CONFIG_INVALID', { cause: err });
  }
  const locate = (path: PropertyKey[]) => locateInDocument(doc, lineCounter, path);
  const issues: ConfigIssue[] = [];
  const result = ProvidersFileSchema.safeParse(raw ?? {}, { reportInput: true });
  if (!result.success) {
    for (const zi of result.error.issues) issues.push(...toConfigIssues(zi).map((i) => ({ ...i, ...locate(i.at) })));
  }
  for (const d of duplicateNameIssues(raw)) {
    issues.push({ path: formatPath(d.path), message: d.message, fix: d.fix, ...locate(d.path) });
  }
  if (issues.length > 0 || !result.success) {
    // In reading order; issues without a position (missing top-level keys) first.
    issues.sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.col ?? 0) - (b.col ?? 0));
    throw new ConfigError(sourceName, issues.map(stripAt));
  }
  return result.data;
}

type LocatedIssue = ConfigIssue & { at: PropertyKey[] };

function stripAt(issue: ConfigIssue & { at?: unknown }): ConfigIssue {
  const { at: _at, ...rest } = issue;
  return rest;
}

/** `providers[1].hosts[0].keyFile`; keys that are not plain words are quoted: `images["a b"]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof seg === 'string' && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) out += out === '' ? seg : `.${seg}`;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out === '' ? '(root)' : out;
}

/** The path with indexes erased and image keys generalized: `providers[].images.<key>.url`. */
export function normalizePath(path: readonly PropertyKey[]): string {
  let out = '';
  path.forEach((seg, i) => {
    if (typeof seg === 'number') out += '[]';
    else if (i === 3 && path[0] === 'providers' && path[2] === 'images') out += '.<key>';
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  });
  return out;
}

function toConfigIssues(zi: z.core.$ZodIssue): LocatedIssue[] {
  const at = zi.path;
  const help = FIELD_HELP[normalizePath(at)];
  const field = String(at.findLast((s) => typeof s === 'string') ?? 'the file');
  const setFix = help ? `set ${field} to ${help.hint}, e.g. \`${help.example}\`` : 'correct the value';
  const one = (message: string, fix = setFix): LocatedIssue[] => [{ path: formatPath(at), message, fix, at }];
  const got = `got ${describe(zi.input)}`;
  switch (zi.code) {
    case 'invalid_type':
      if (zi.input === undefined && at.length > 0) {
        return one('is required but missing', help ? `add \`${help.example}\` (${help.hint})` : `add ${field}`);
      }
      if (at.length === 0) {
        return one(`must be a mapping with a providers list, ${got}`, 'start the file with `providers:`');
      }
      return one(`must be ${article(zi.expected)}, ${got}`);
    case 'too_small':
      return one(`${sizeRule('at least', zi.origin, zi.minimum, zi.inclusive)}, ${got}`);
    case 'too_big':
      return one(`${sizeRule('at most', zi.origin, zi.maximum, zi.inclusive)}, ${got}`);
    case 'invalid_value':
      return one(`must be one of ${zi.values.map((v) => JSON.stringify(v)).join(', ')}, ${got}`);
    case 'invalid_format':
      return one(`${zi.message}, ${got}`);
    case 'unrecognized_keys': {
      const allowed = ALLOWED_KEYS[normalizePath(at)] ?? [];
      return zi.keys.map((key) => {
        const near = closest(key, allowed);
        return {
          path: formatPath([...at, key]),
          message: 'is not a known key',
          fix: `${near ? `did you mean ${near}? ` : ''}remove or rename it; allowed keys here: ${allowed.join(', ')}`,
          at: [...at, key],
        };
      });
    }
    case 'invalid_key': {
      const inner = zi.issues[0];
      return one(
        `${inner?.message ?? 'is not a valid key'}, got ${JSON.stringify(String(at.at(-1)))}`,
        'rename the key',
      );
    }
    case 'custom': {
      const fix = typeof zi.params?.fix === 'string' ? zi.params.fix : setFix;
      return one(`${zi.message}, ${got}`, fix);
    }
    default:
      return one(zi.message);
  }
}

function sizeRule(bound: string, origin: string, limit: number | bigint, inclusive?: boolean): string {
  const n = Number(limit);
  if (origin === 'array') return `must list ${bound} ${n} item${n === 1 ? '' : 's'}`;
  if (origin === 'string')
    return n === 1 && bound === 'at least' ? 'must not be empty' : `must be ${bound} ${n} characters`;
  if (inclusive === false) return `must be ${bound === 'at least' ? 'greater' : 'less'} than ${n}`;
  return `must be ${bound} ${n}`;
}

function article(expected: string): string {
  const names: Record<string, string> = {
    int: 'an integer',
    number: 'a number',
    string: 'a string',
    array: 'a list',
    object: 'a mapping',
    record: 'a mapping',
    boolean: 'true or false',
  };
  return names[expected] ?? expected;
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null (an empty value)';
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : `a list of ${value.length}`;
  if (typeof value === 'object') return Object.keys(value).length === 0 ? 'an empty mapping' : 'a mapping';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}..."` : text;
}

/** The allowed key within edit distance 2 of `key`, if any (typo help). */
function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDist = 3;
  for (const cand of allowed) {
    const d = editDistance(key.toLowerCase(), cand.toLowerCase());
    if (d < bestDist) [best, bestDist] = [cand, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (cur[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** Line and column of the deepest node along `path` that exists in the YAML document. */
function locateInDocument(
  doc: Document,
  lc: LineCounter,
  path: readonly PropertyKey[],
): { line?: number; col?: number } {
  for (let n = path.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(path.slice(0, n) as unknown[], true);
    const range = (node as { range?: [number, number, number] } | undefined)?.range;
    if (range) return lc.linePos(range[0]);
  }
  return {};
}
