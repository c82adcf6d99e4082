/**
 * Certificates made at test time with openssl: a CA, and server certificates it signs for
 * 127.0.0.1, ::1 and localhost (P-256 keys, one day). Each cert gets a random serial, so a test
 * tells two of them apart by serial.
 */
import { execFile } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const pexec = promisify(execFile);

const openssl = (args: string[]): Promise<unknown> => pexec('openssl', args, { timeout: 30_000 });

export interface TestCa {
  cert: string;
  key: string;
}

export interface TestServerCert {
  cert: string;
  key: string;
  /** Serial as OpenSSL and node's X509Certificate print it (upper-case hex). */
  serial: string;
  /** SHA-256 fingerprint, colon-separated upper-case hex. */
  fingerprint256: string;
}

/** A self-signed CA named `name` in `dir` (`<name>.pem`, `<name>.key`). */
export async function makeCa(dir: string, name: string): Promise<TestCa> {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  await openssl(['req', '-x509', '-new', '-key', key, '-out', cert, '-days', '1', '-subj', `/CN=${name}`]);
  return { cert, key };
}

/** A server certificate for 127.0.0.1, ::1 and localhost signed by `ca`, as `<name>.pem`/`<name>.key`. */
export async function makeServerCert(dir: string, ca: TestCa, name: string): Promise<TestServerCert> {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  await writeFile(
    ext,
    'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n',
  );
  await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  await openssl(['req', '-new', '-key', key, '-out', csr, '-subj', '/CN=localhost']);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-set_serial',
    `0x${randomBytes(8).toString('hex')}`,
    '-days',
    '1',
    '-extfile',
    ext,
    '-out',
    cert,
  ]);
  const x = new X509Certificate(await readFile(cert));
  return { cert, key, serial: x.serialNumber, fingerprint256: x.fingerprint256 };
}
