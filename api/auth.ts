// Bearer-token auth. The token file holds one token per line, optionally followed by a role:
// `admin` (the default: every route) or `read` (GET routes only). Blank lines and `#` comments
// are skipped. A presented token is compared with every configured one in constant time: both
// are hashed to SHA-256 digests of equal length and compared with crypto.timingSafeEqual, and
// the loop never stops early, so neither the length nor the position of a match leaks.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ApiError } from './errors.ts';

export type Role = 'admin' | 'read';

/** Shortest token accepted in the file: a guessable token is refused at start-up. */
export const MIN_TOKEN_LENGTH = 16;
const MAX_TOKEN_FILE_BYTES = 64 * 1024;
const MAX_HEADER_TOKEN_LENGTH = 4096;

interface Entry {
  digest: Buffer;
  role: Role;
}

/** The configured tokens (as digests only) and the check of a request's Authorization header. */
export class TokenAuth {
  readonly #entries: Entry[];

  constructor(tokens: { token: string; role: Role }[]) {
    this.#entries = tokens.map((t) => ({ digest: digest(t.token), role: t.role }));
  }

  get size(): number {
    return this.#entries.length;
  }

  /**
   * The role of the request's bearer token; throws a 401 ApiError saying what is wrong when the
   * header is missing, malformed or carries an unknown token.
   */
  authenticate(header: string | undefined): Role {
    if (header === undefined || header === '') {
      throw new ApiError('UNAUTHENTICATED', 'missing Authorization header: send "Authorization: Bearer <token>"');
    }
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (match === null) {
      throw new ApiError('UNAUTHENTICATED', 'the Authorization header must be "Bearer <token>"');
    }
    const presented = match[1]!;
    if (presented.length > MAX_HEADER_TOKEN_LENGTH) {
      throw new ApiError('UNAUTHENTICATED', 'the bearer token is not one of the configured tokens');
    }
    const d = digest(presented);
    let role: Role | undefined;
    for (const e of this.#entries) {
      // No early exit: every configured token is compared.
      if (timingSafeEqual(d, e.digest) && role === undefined) role = e.role;
    }
    if (role === undefined) {
      throw new ApiError('UNAUTHENTICATED', 'the bearer token is not one of the configured tokens');
    }
    return role;
  }

  /** Throws a 403 ApiError when `role` may not call a route that changes things. */
  static requireWrite(role: Role, what: string): void {
    if (role !== 'admin') {
      throw new ApiError('FORBIDDEN', `this token is read-only; ${what} needs a token with the admin role`);
    }
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** A problem in the token file, naming the line and the fix. */
export class TokenFileError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TokenFileError';
  }
}

/** Parses token file text: `TOKEN [admin|read]` per line, `#` comments. */
export function parseTokenFile(text: string, file: string): { token: string; role: Role }[] {
  const out: { token: string; role: Role }[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const [token = '', role = 'admin', ...rest] = line.split(/\s+/);
    const at = `${file}:${i + 1}`;
    if (rest.length > 0 || (role !== 'admin' && role !== 'read')) {
      throw new TokenFileError(`${at}: a line is "TOKEN" or "TOKEN admin" or "TOKEN read"`);
    }
    if (token.length < MIN_TOKEN_LENGTH || !/^[\x21-\x7e]+$/.test(token)) {
      throw new TokenFileError(
        `${at}: a token is at least ${MIN_TOKEN_LENGTH} printable ASCII characters without spaces (e.g. \`openssl rand -hex 32\`)`,
      );
    }
    out.push({ token, role });
  });
  if (out.length === 0) throw new TokenFileError(`${file}: no token; add a line with one (openssl rand -hex 32)`);
  return out;
}

/** Reads and parses the token file (at most 64 KiB). */
export async function loadTokenFile(file: string): Promise<TokenAuth> {
  let buf: Buffer;
  try {
    buf = await readFile(file);
  } catch (err) {
    throw new TokenFileError(`cannot read the token file ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (buf.length > MAX_TOKEN_FILE_BYTES) {
    throw new TokenFileError(`${file} is ${buf.length} bytes, over ${MAX_TOKEN_FILE_BYTES}: is it the token file?`);
  }
  return new TokenAuth(parseTokenFile(buf.toString('utf8'), file));
}

/** Throws 401 without a role, 403 unless the role may change things (`what` names the action). */
export function requireWrite(role: Role | undefined, what: string): void {
  if (role === undefined) throw new ApiError('UNAUTHENTICATED', 'missing bearer token');
  TokenAuth.requireWrite(role, what);
}
