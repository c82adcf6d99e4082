/**
 * Client credentials for Squid's Basic authentication, read on the worker: an htpasswd-style file
 * of `user:hash` lines (the hashes go to the guest; no password ever does), and the health
 * probe's own `user:password` file (read at probe time, never recorded). Errors name the field
 * and the line, never the line's text: a wrong line may hold a password.
 */
import { readFileSync } from 'node:fs';
import type { SquidUser } from '../../contracts/squid.ts';
import { ProxySpecError } from './errors.ts';

/** The largest credentials file read, in bytes. */
export const MAX_HTPASSWD_BYTES = 1024 * 1024;
/** A user name Squid's basic_ncsa_auth and the seed's file take as is. */
export const AUTH_USER_RE = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/**
 * crypt(3) hashes that Squid's basic_ncsa_auth verifies on Debian 12 (libxcrypt): bcrypt
 * (`htpasswd -B`), SHA-512 and SHA-256 crypt (`openssl passwd -6` / `-5`), yescrypt, MD5 crypt
 * and Apache's apr1 (`htpasswd -m`). Plain text, DES crypt and `{SHA}` are refused.
 */
export const HASH_RE = /^\$(2[aby]|5|6|y|1|apr1)\$[./0-9A-Za-z$=]{8,}$/;

/** The users and hashes of an htpasswd-style file; `field` names the setting in errors. */
export function readHtpasswd(path: string, field: string): SquidUser[] {
  const text = readText(path, field, 'an htpasswd-style file of user:hash lines');
  const users: SquidUser[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const colon = line.indexOf(':');
    const user = colon < 0 ? '' : line.slice(0, colon);
    const hash = colon < 0 ? '' : line.slice(colon + 1);
    const at = `${path} line ${i + 1}`;
    if (!AUTH_USER_RE.test(user)) {
      throw new ProxySpecError(
        field,
        `${at}: the user name must be 1-64 letters, digits, ".", "_", "@" or "-" before a ":"`,
      );
    }
    if (!HASH_RE.test(hash)) {
      throw new ProxySpecError(
        field,
        `${at}: user ${user} has no supported password hash (plain text, DES and {SHA} are refused); ` +
          'write it with `htpasswd -B`, `htpasswd -m` or `openssl passwd -6`',
      );
    }
    if (seen.has(user)) throw new ProxySpecError(field, `${at}: user ${user} is listed twice; keep one line per user`);
    seen.add(user);
    users.push({ user, hash });
  });
  if (users.length === 0) throw new ProxySpecError(field, `${path} lists no user; add user:hash lines`);
  return users;
}

/** The probe's credential: `user:password` on the first line of `path`. */
export function readProbeCredentials(path: string, field: string): { user: string; password: string } {
  const line = readText(path, field, 'a file with one line user:password').split('\n')[0]!.replace(/\r$/, '');
  const colon = line.indexOf(':');
  const user = colon < 0 ? '' : line.slice(0, colon);
  const password = colon < 0 ? '' : line.slice(colon + 1);
  if (!AUTH_USER_RE.test(user) || password === '') {
    throw new ProxySpecError(field, `${path} must hold one line user:password (a user of htpasswdFile)`);
  }
  return { user, password };
}

/** `Proxy-Authorization` header value for Basic credentials. */
export function basicProxyAuthorization(credentials: { user: string; password: string }): string {
  return `Basic ${Buffer.from(`${credentials.user}:${credentials.password}`, 'utf8').toString('base64')}`;
}

function readText(path: string, field: string, what: string): string {
  let buf: Buffer;
  try {
    buf = readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new ProxySpecError(field, `${path} cannot be read (${code}): give the worker ${what} there`);
  }
  if (buf.length > MAX_HTPASSWD_BYTES) {
    throw new ProxySpecError(field, `${path} is larger than ${MAX_HTPASSWD_BYTES} bytes; list fewer users`);
  }
  return buf.toString('utf8');
}
