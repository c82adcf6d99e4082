// TLS on the API: which certificate and key to serve (--tls-cert/--tls-key or EP_API_TLS_CERT and
// EP_API_TLS_KEY), reading and checking them (a PEM certificate chain whose first certificate
// matches the key), and the rule that plain HTTP listens only on loopback unless the operator says
// --insecure-listen (EP_API_INSECURE_LISTEN=true). The server's side is in api/server.ts (HTTP/2
// with HTTP/1.1 by ALPN); the reload on SIGHUP is workers/api.ts's.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { BlockList, isIP } from 'node:net';
import { createSecureContext } from 'node:tls';

/** A bad TLS option, file or listen address; the message names the flag, the variable and the fix. */
export class ApiTlsError extends Error {
  override readonly name = 'ApiTlsError';
}

/** The files to serve: a PEM certificate (chain, leaf first) and its PEM private key. */
export interface ApiTlsFiles {
  cert: string;
  key: string;
}

export interface ApiTlsSettings {
  /** Unset: plain HTTP. */
  files?: ApiTlsFiles;
  /** Plain HTTP on a non-loopback address was asked for. */
  insecureListen: boolean;
}

/** The values of the API's TLS flags (parseArgs; unset means "from the environment"). */
export interface ApiTlsValues {
  'tls-cert'?: string | undefined;
  'tls-key'?: string | undefined;
  'insecure-listen'?: boolean | undefined;
}

/** The flags laid over EP_API_TLS_CERT, EP_API_TLS_KEY and EP_API_INSECURE_LISTEN; a flag wins. */
export function apiTlsSettings(values: ApiTlsValues, env: NodeJS.ProcessEnv = process.env): ApiTlsSettings {
  const pick = (flag: 'tls-cert' | 'tls-key', name: string): string | undefined => {
    const v = values[flag];
    if (v === '') throw new ApiTlsError(`--${flag} must not be empty (omit it to use ${name})`);
    return v ?? (env[name] || undefined);
  };
  const cert = pick('tls-cert', 'EP_API_TLS_CERT');
  const key = pick('tls-key', 'EP_API_TLS_KEY');
  if ((cert === undefined) !== (key === undefined)) {
    const [has, lacks] = cert === undefined ? ['--tls-key', '--tls-cert'] : ['--tls-cert', '--tls-key'];
    throw new ApiTlsError(
      `${has} needs ${lacks} (env EP_API_TLS_CERT and EP_API_TLS_KEY): give both the certificate and its key`,
    );
  }
  const insecureEnv = env['EP_API_INSECURE_LISTEN'] ?? '';
  if (insecureEnv !== '' && !/^(1|true|0|false)$/i.test(insecureEnv)) {
    throw new ApiTlsError(`EP_API_INSECURE_LISTEN must be true or false, got ${JSON.stringify(insecureEnv)}`);
  }
  const insecureListen = values['insecure-listen'] === true || /^(1|true)$/i.test(insecureEnv);
  return { ...(cert !== undefined && key !== undefined ? { files: { cert, key } } : {}), insecureListen };
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/**
 * Whether `host` (a --listen value) is a loopback address: 127.0.0.0/8, ::1 (brackets allowed),
 * ::ffff:127.x.y.z, or the name `localhost`. Any other name is not: it is not resolved here.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1');
  if (h.toLowerCase() === 'localhost') return true;
  const family = isIP(h);
  if (family === 0) return false;
  return LOOPBACK.check(h, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Throws unless listening on `host` is allowed: with TLS anywhere; without it on loopback, or
 * elsewhere only with --insecure-listen (bearer tokens would cross the network in clear text).
 */
export function checkListen(host: string, s: ApiTlsSettings): void {
  if (s.files !== undefined || s.insecureListen || isLoopbackHost(host)) return;
  const what = isIP(host.replace(/^\[(.*)\]$/, '$1')) === 0 ? 'a name other than localhost' : 'not a loopback address';
  throw new ApiTlsError(
    `--listen ${host} is ${what}, and plain HTTP there would send bearer tokens in clear text: ` +
      'give --tls-cert FILE and --tls-key FILE (env EP_API_TLS_CERT, EP_API_TLS_KEY) to serve HTTPS, ' +
      'or --insecure-listen (env EP_API_INSECURE_LISTEN=true) when something in front of the API terminates TLS, ' +
      'or listen on 127.0.0.1 or ::1',
  );
}

/** A certificate and key read from their files and checked, with what the log says about them. */
export interface ApiTlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** The leaf certificate's serial number (hex, upper case as OpenSSL prints it). */
  serial: string;
  /** SHA-256 fingerprint of the leaf, colon-separated hex (as `openssl x509 -fingerprint -sha256`). */
  fingerprint256: string;
  subject: string;
  subjectAltName: string | undefined;
  validTo: string;
  /** The leaf's notAfter is in the past. */
  expired: boolean;
}

/**
 * Reads and checks the certificate and key: both PEM, the key matches the first certificate (the
 * leaf), and Node's TLS accepts the pair. Throws ApiTlsError naming the flag and the file.
 */
export async function loadTlsFiles(files: ApiTlsFiles, now = new Date()): Promise<ApiTlsMaterial> {
  const read = async (flag: string, file: string): Promise<Buffer> => {
    try {
      return await readFile(file);
    } catch (err) {
      throw new ApiTlsError(`cannot read --${flag} ${file}: ${(err as Error).message}`);
    }
  };
  const [cert, key] = await Promise.all([read('tls-cert', files.cert), read('tls-key', files.key)]);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch (err) {
    throw new ApiTlsError(
      `--tls-cert ${files.cert} holds no PEM certificate (${(err as Error).message}); give the server's certificate, leaf first, then any intermediates`,
    );
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new ApiTlsError(
      `--tls-key ${files.key} holds no unencrypted PEM private key (${(err as Error).message}); give the key of --tls-cert`,
    );
  }
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new ApiTlsError(
      `--tls-key ${files.key} is not the key of the certificate in --tls-cert ${files.cert} (subject ${leaf.subject.replaceAll('\n', ', ')}, serial ${leaf.serialNumber}): give the matching pair`,
    );
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new ApiTlsError(`--tls-cert ${files.cert} with --tls-key ${files.key}: ${(err as Error).message}`);
  }
  return {
    cert,
    key,
    serial: leaf.serialNumber,
    fingerprint256: leaf.fingerprint256,
    subject: leaf.subject.replaceAll('\n', ', '),
    subjectAltName: leaf.subjectAltName,
    validTo: leaf.validToDate.toISOString(),
    expired: leaf.validToDate.getTime() < now.getTime(),
  };
}

/** What the log says about a certificate (no key material). */
export function tlsLogFields(m: ApiTlsMaterial): Record<string, unknown> {
  return {
    serial: m.serial,
    fingerprint256: m.fingerprint256,
    subject: m.subject,
    subjectAltName: m.subjectAltName,
    validTo: m.validTo,
  };
}
