// egressctl's HTTP side: one bounded request to the API (undici), the exit code its answer maps
// to, and table output.
import { readFile } from 'node:fs/promises';
import type { ErrorResponse } from '../api/responses.ts';

/** Exit codes scripts can rely on (docs/api.md, README). */
export const EXIT = { ok: 0, failure: 1, usage: 2, notFound: 3, conflict: 4, unavailable: 5 } as const;

/** A failure that ends the command with `code` after printing `message` on stderr. */
export class CliError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

export interface ApiTarget {
  base: URL;
  token: string | undefined;
  timeoutMs: number;
  /** The PEM of --cacert: the only CAs trusted for an https API when given (as curl's --cacert). */
  ca?: string;
  /** The file --cacert named, for messages. */
  caFile?: string;
}

/** Reads --cacert's PEM file; a file that is unreadable or holds no certificate is a usage error. */
export async function readCa(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(EXIT.usage, `cannot read --cacert ${file}: ${(err as Error).message}`);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) {
    throw new CliError(EXIT.usage, `--cacert ${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  return text;
}

/** Reads the first token of a token file (the API's format: `TOKEN [role]` lines, `#` comments). */
export async function readToken(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(EXIT.usage, `cannot read --token-file ${file}: ${(err as Error).message}`);
  }
  const line = text.split('\n').find((l) => l.trim() !== '' && !l.trim().startsWith('#'));
  const token = line?.trim().split(/\s+/)[0];
  if (token === undefined) throw new CliError(EXIT.usage, `--token-file ${file} holds no token`);
  return token;
}

/** The exit code of an API status. */
export function exitFor(status: number): number {
  if (status === 404) return EXIT.notFound;
  if (status === 409) return EXIT.conflict;
  if ([400, 413, 414, 415, 422].includes(status)) return EXIT.usage;
  if (status === 503 || status === 502 || status === 504 || status === 429) return EXIT.unavailable;
  return EXIT.failure;
}

/**
 * Calls the API; answers 2xx with the parsed body (typed as the route's response, api/responses.ts)
 * and throws CliError with the mapped exit code otherwise.
 */
export async function api<T>(
  t: ApiTarget,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const url = new URL(path, t.base);
  const headers: Record<string, string> = {};
  if (t.token !== undefined) headers['authorization'] = `Bearer ${t.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const { request, Agent } = await import('undici'); // loaded by the first call, not by `--help`
  const dispatcher = t.ca === undefined ? undefined : new Agent({ connect: { ca: t.ca } });
  let res;
  try {
    res = await request(url, {
      dispatcher,
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: t.timeoutMs,
      bodyTimeout: t.timeoutMs,
      signal: AbortSignal.timeout(t.timeoutMs),
    });
  } catch (err) {
    const hint = tlsHint(err, t.base, t.caFile);
    await dispatcher?.close();
    throw new CliError(
      EXIT.unavailable,
      `the API at ${t.base.origin} did not answer: ${(err as Error).message}${hint === undefined ? '' : `; ${hint}`}`,
    );
  }
  const text = await res.body.text();
  await dispatcher?.close();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = text;
  }
  if (res.statusCode >= 200 && res.statusCode < 300) return { status: res.statusCode, body: parsed as T };
  const e = (parsed as Partial<ErrorResponse> | undefined)?.error;
  const message = e?.message ?? `HTTP ${res.statusCode}`;
  throw new CliError(exitFor(res.statusCode), `${res.statusCode} ${e?.code ?? ''}: ${message}`.replace(' :', ':'));
}

/** Node's codes for a server certificate the client does not trust (a CA it does not know). */
const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
]);

/**
 * What to do about a TLS failure talking to an https API, or undefined for any other failure.
 * egressctl trusts the CAs of --cacert when given, else the system's plus those of
 * NODE_EXTRA_CA_CERTS (a PEM file, read by Node at start).
 */
export function tlsHint(err: unknown, base: URL, caFile?: string): string | undefined {
  if (base.protocol !== 'https:') return undefined;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  if (UNTRUSTED.has(code)) {
    if (caFile !== undefined) return `the API's certificate is not signed by a CA in --cacert ${caFile}`;
    const given = process.env['NODE_EXTRA_CA_CERTS'];
    return given
      ? `the API's certificate is not signed by a CA in NODE_EXTRA_CA_CERTS (${given}) or the system's`
      : "the API's certificate is not signed by a CA this machine trusts: pass the CA's PEM file with --cacert (or NODE_EXTRA_CA_CERTS)";
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `the API's certificate does not name ${base.hostname}: use an --api address the certificate names`;
  }
  if (code === 'CERT_HAS_EXPIRED') return "the API's certificate has expired: the API's operator must renew it";
  return undefined;
}

/** Rows as an aligned text table with a header. */
export function table(rows: readonly object[], columns: string[]): string {
  const cell = (v: unknown): string => {
    if (v === undefined || v === null) return '-';
    if (typeof v === 'string') return v;
    return typeof v === 'object' ? JSON.stringify(v) : (JSON.stringify(v) ?? '-');
  };
  const at = (r: object, c: string): unknown => (r as Record<string, unknown>)[c];
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(at(r, c)).length)));
  const line = (vals: string[]): string =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(at(r, c)))))].join(
    '\n',
  );
}
