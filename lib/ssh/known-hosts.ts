/**
 * OpenSSH known_hosts: parser, host matcher and host key verifier (pure), plus the one I/O
 * helper that appends a line for the opt-in "accept new host keys" mode.
 *
 * Supported: plain host patterns (comma lists, `*` and `?` wildcards, `!` negation), hashed
 * `|1|salt|hash` entries (HMAC-SHA1 of the host name keyed by the salt), `[host]:port` names for
 * ports other than 22, the `@revoked` and `@cert-authority` markers, comments and blank lines.
 * Matching is case-insensitive, as in OpenSSH. Malformed lines are skipped (as OpenSSH does) and
 * reported in `invalid`.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { appendFile, readFile } from 'node:fs/promises';
import { DEFAULT_SSH_PORT } from '../rules.ts';

/** Default SSH port: names on it are written bare, other ports as `[host]:port`. (lib/rules.ts) */
export { DEFAULT_SSH_PORT };
const HASH_MAGIC = '|1|';
const SHA1_LENGTH = 20;
const BASE64_RE = /^[A-Za-z0-9+/]+={0,2}$/;

/** How an entry names its hosts. */
export type KnownHostNames = { kind: 'patterns'; patterns: string[] } | { kind: 'hashed'; salt: Buffer; hash: Buffer };

/** One parsed known_hosts line. */
export interface KnownHostEntry {
  /** 1-based line number in the source text. */
  line: number;
  marker: 'revoked' | 'cert-authority' | null;
  names: KnownHostNames;
  /** Key type as written, e.g. `ssh-ed25519`; always equal to the type inside `keyBlob`. */
  keyType: string;
  /** The public key blob (the base64 field decoded). */
  keyBlob: Buffer;
  comment: string;
}

/** A line that could not be parsed (skipped). */
export interface KnownHostsInvalidLine {
  line: number;
  reason: string;
}

export interface KnownHostsParseResult {
  entries: KnownHostEntry[];
  invalid: KnownHostsInvalidLine[];
}

/** Result of {@link verifyHostKey}. */
export type HostKeyVerdict =
  | { ok: true }
  | {
      ok: false;
      reason: 'unknown' | 'mismatch' | 'revoked';
      /** Fingerprint of the presented key, `SHA256:...`. */
      fingerprint: string;
      /** Type of the presented key (from its blob). */
      keyType: string;
      /** Fingerprints of the plain keys recorded for this host (empty unless `mismatch`). */
      expected: string[];
    };

/** Parses known_hosts text. Never throws; malformed lines are listed in `invalid`. */
export function parseKnownHosts(text: string): KnownHostsParseResult {
  const entries: KnownHostEntry[] = [];
  const invalid: KnownHostsInvalidLine[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const raw = (lines[i] ?? '').trim();
    if (raw === '' || raw.startsWith('#')) continue;
    const parsed = parseLine(raw, i + 1);
    if ('reason' in parsed) invalid.push(parsed);
    else entries.push(parsed);
  }
  return { entries, invalid };
}

function parseLine(text: string, line: number): KnownHostEntry | KnownHostsInvalidLine {
  const fields = text.split(/[ \t]+/);
  let marker: KnownHostEntry['marker'] = null;
  if (fields[0]?.startsWith('@')) {
    const m = fields.shift();
    if (m === '@revoked') marker = 'revoked';
    else if (m === '@cert-authority') marker = 'cert-authority';
    else return { line, reason: `unknown marker ${m}` };
  }
  const [hostField, keyType, b64, ...rest] = fields;
  if (hostField === undefined || keyType === undefined || b64 === undefined) {
    return { line, reason: 'expected "[marker] hosts keytype base64-key [comment]"' };
  }
  const names = parseNames(hostField);
  if (names === undefined) return { line, reason: `malformed hashed host field ${hostField}` };
  if (!BASE64_RE.test(b64)) return { line, reason: 'key is not base64' };
  const keyBlob = Buffer.from(b64, 'base64');
  const blobType = keyTypeOfBlob(keyBlob);
  if (blobType !== keyType) {
    return { line, reason: `key type ${keyType} does not match the key's own type ${blobType ?? '(unreadable)'}` };
  }
  return { line, marker, names, keyType, keyBlob, comment: rest.join(' ') };
}

function parseNames(field: string): KnownHostNames | undefined {
  if (!field.startsWith(HASH_MAGIC)) {
    return {
      kind: 'patterns',
      patterns: field
        .toLowerCase()
        .split(',')
        .filter((p) => p !== ''),
    };
  }
  const parts = field.slice(HASH_MAGIC.length).split('|');
  if (parts.length !== 2) return undefined;
  const [s, h] = parts as [string, string];
  if (!BASE64_RE.test(s) || !BASE64_RE.test(h)) return undefined;
  const salt = Buffer.from(s, 'base64');
  const hash = Buffer.from(h, 'base64');
  if (salt.length !== SHA1_LENGTH || hash.length !== SHA1_LENGTH) return undefined;
  return { kind: 'hashed', salt, hash };
}

/** Reads the leading SSH string of a public key blob: its type, e.g. `ssh-ed25519`. */
export function keyTypeOfBlob(blob: Buffer): string | undefined {
  if (blob.length < 4) return undefined;
  const len = blob.readUInt32BE(0);
  if (len === 0 || len > 64 || 4 + len > blob.length) return undefined;
  const type = blob.toString('latin1', 4, 4 + len);
  return /^[\x21-\x7e]+$/.test(type) ? type : undefined;
}

/** `SHA256:<base64 of sha256(blob), no padding>`, exactly as `ssh-keygen -l` prints it. */
export function fingerprintSha256(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** The name known_hosts records for host:port: `host` on port 22, `[host]:port` otherwise. */
export function knownHostsName(host: string, port: number): string {
  const h = host.toLowerCase();
  return port === DEFAULT_SSH_PORT ? h : `[${h}]:${port}`;
}

/** OpenSSH `match_pattern`: `*` matches any run of characters, `?` exactly one. */
export function matchPattern(name: string, pattern: string): boolean {
  let n = 0;
  let p = 0;
  let starP = -1;
  let starN = 0;
  while (n < name.length) {
    const pc = pattern[p];
    if (pc === '*') {
      starP = p++;
      starN = n;
    } else if (pc !== undefined && (pc === '?' || pc === name[n])) {
      p++;
      n++;
    } else if (starP >= 0) {
      p = starP + 1;
      n = ++starN;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/**
 * OpenSSH `match_pattern_list` for host names: true if some positive pattern matches and no
 * negated (`!pattern`) one does. A negated match wins over any positive match.
 */
export function matchHostPatterns(name: string, patterns: readonly string[]): boolean {
  const lower = name.toLowerCase();
  let positive = false;
  for (const raw of patterns) {
    const negated = raw.startsWith('!');
    const pattern = (negated ? raw.slice(1) : raw).toLowerCase();
    if (matchPattern(lower, pattern)) {
      if (negated) return false;
      positive = true;
    }
  }
  return positive;
}

/** `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`, the form `ssh-keygen -H` writes. */
export function hashHostName(name: string, salt: Buffer = randomBytes(SHA1_LENGTH)): string {
  const hash = createHmac('sha1', salt).update(name).digest();
  return `${HASH_MAGIC}${salt.toString('base64')}|${hash.toString('base64')}`;
}

/** Whether an entry's host field names `name` (already in {@link knownHostsName} form). */
export function entryMatchesName(entry: KnownHostEntry, name: string): boolean {
  if (entry.names.kind === 'patterns') return matchHostPatterns(name, entry.names.patterns);
  const { salt, hash } = entry.names;
  const computed = createHmac('sha1', salt).update(name.toLowerCase()).digest();
  return timingSafeEqual(computed, hash);
}

/** Key types (as written in known_hosts) of the usable plain keys recorded for host:port. */
export function knownKeyTypes(entries: readonly KnownHostEntry[], host: string, port: number): string[] {
  const name = knownHostsName(host, port);
  const types = new Set<string>();
  for (const e of entries) if (e.marker === null && entryMatchesName(e, name)) types.add(e.keyType);
  return [...types];
}

/**
 * Verifies a presented host key blob for host:port, with OpenSSH's precedence: a matching
 * `@revoked` entry refuses the key; a plain entry with the same key accepts it; any other plain
 * entry for the host makes it a mismatch (including "the host is known only under another key
 * type": we never silently accept a new key type for a known host); otherwise it is unknown.
 * `@cert-authority` entries are ignored (we do not accept host certificates).
 */
export function verifyHostKey(
  entries: readonly KnownHostEntry[],
  host: string,
  port: number,
  keyBlob: Buffer,
): HostKeyVerdict {
  const name = knownHostsName(host, port);
  const matching = entries.filter((e) => e.marker !== 'cert-authority' && entryMatchesName(e, name));
  const fingerprint = fingerprintSha256(keyBlob);
  const keyType = keyTypeOfBlob(keyBlob) ?? 'unknown-key-type';
  if (matching.some((e) => e.marker === 'revoked' && e.keyBlob.equals(keyBlob))) {
    return { ok: false, reason: 'revoked', fingerprint, keyType, expected: [] };
  }
  const plain = matching.filter((e) => e.marker === null);
  if (plain.some((e) => e.keyBlob.equals(keyBlob))) return { ok: true };
  if (plain.length === 0) return { ok: false, reason: 'unknown', fingerprint, keyType, expected: [] };
  const expected = [...new Set(plain.map((e) => `${e.keyType} ${fingerprintSha256(e.keyBlob)}`))];
  return { ok: false, reason: 'mismatch', fingerprint, keyType, expected };
}

/** Options of {@link formatKnownHostsLine} and {@link appendKnownHost}. */
export interface KnownHostLineOptions {
  /** Write the host name hashed (`|1|...`), as `HashKnownHosts yes` does. Default false. */
  hashed?: boolean;
  /** Salt for a hashed name (20 bytes). Default: random. */
  salt?: Buffer;
}

/** One known_hosts line (no newline) recording `keyBlob` for host:port. */
export function formatKnownHostsLine(
  host: string,
  port: number,
  keyBlob: Buffer,
  options: KnownHostLineOptions = {},
): string {
  const keyType = keyTypeOfBlob(keyBlob);
  if (keyType === undefined) throw new TypeError('formatKnownHostsLine: keyBlob is not an SSH public key blob');
  const name = knownHostsName(host, port);
  const hostField = options.hashed === true ? hashHostName(name, options.salt) : name;
  return `${hostField} ${keyType} ${keyBlob.toString('base64')}`;
}

/**
 * Appends a line recording `keyBlob` for host:port to the known_hosts file at `path` (created
 * with mode 0600 if missing; a missing final newline is added first). Returns the line written.
 * Used only by the opt-in "accept new host keys" mode.
 */
export async function appendKnownHost(
  path: string,
  host: string,
  port: number,
  keyBlob: Buffer,
  options: KnownHostLineOptions = {},
): Promise<string> {
  const line = formatKnownHostsLine(host, port, keyBlob, options);
  let prefix = '';
  try {
    const existing = await readFile(path);
    if (existing.length > 0 && existing[existing.length - 1] !== 0x0a) prefix = '\n';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await appendFile(path, `${prefix}${line}\n`, { mode: 0o600 });
  return line;
}
