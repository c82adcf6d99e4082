/**
 * Loads SSH credentials FRESH for every dial (never cached): the private key (decrypted with the
 * passphrase file when given), the agent socket, and the parsed known_hosts file. Every failure
 * is an {@link SshCredentialsError} naming the file and the fix. Key material and passphrases
 * never appear in messages or logs.
 */
import { readFile, stat } from 'node:fs/promises';
import type { ParsedKey } from 'ssh2';
import { SshCredentialsError } from './errors.ts';
import { parseKnownHosts } from './known-hosts.ts';
import { parseKey } from './ssh2-parts.ts';
import type { KnownHostsParseResult } from './known-hosts.ts';
import type { SshTarget } from './target.ts';

/** What a dial needs, loaded from the target's files. */
export interface SshCredentials {
  /** The decrypted private key, when the target names a key file. */
  privateKey?: ParsedKey;
  /** The agent socket path, when the target asks for an agent. */
  agentSocket?: string;
  knownHosts: KnownHostsParseResult;
  /** True if the known_hosts file did not exist (only allowed with acceptNewHostKeys). */
  knownHostsMissing: boolean;
}

const NO_PASSPHRASE_RE = /no passphrase given/i;

/** Reads every credential file of `target`; see the module comment. */
export async function loadCredentials(
  target: SshTarget,
  env: NodeJS.ProcessEnv = process.env,
): Promise<SshCredentials> {
  if (target.keyPath === undefined && target.agentSocket === undefined) {
    throw new SshCredentialsError(
      `no SSH credentials for ${target.user}@${target.host}:${target.port}: set keyPath (a private key file) or agentSocket`,
    );
  }
  const [privateKey, agentSocket, known] = await Promise.all([
    target.keyPath === undefined ? undefined : loadPrivateKey(target.keyPath, target.passphrasePath),
    target.agentSocket === undefined ? undefined : resolveAgentSocket(target.agentSocket, env),
    loadKnownHosts(target),
  ]);
  const creds: SshCredentials = { knownHosts: known.parsed, knownHostsMissing: known.missing };
  if (privateKey !== undefined) creds.privateKey = privateKey;
  if (agentSocket !== undefined) creds.agentSocket = agentSocket;
  return creds;
}

/** Reads and parses (decrypting if needed) a private key file. */
export async function loadPrivateKey(keyPath: string, passphrasePath?: string): Promise<ParsedKey> {
  const data = await readCredentialFile(keyPath, 'SSH private key file', 'keyPath');
  const passphrase = passphrasePath === undefined ? undefined : await readPassphrase(passphrasePath);
  try {
    const parsed = parseKey(data, passphrase);
    if (!(parsed instanceof Error)) {
      const key = Array.isArray(parsed) ? (parsed as ParsedKey[])[0] : parsed;
      if (key === undefined || !key.isPrivateKey()) {
        throw new SshCredentialsError(
          `SSH key file ${keyPath} holds a public key, not a private key: point keyPath at the private half (the file without .pub)`,
        );
      }
      return key;
    }
    throw keyParseError(keyPath, passphrasePath, data, parsed);
  } finally {
    passphrase?.fill(0);
    data.fill(0);
  }
}

function keyParseError(
  keyPath: string,
  passphrasePath: string | undefined,
  data: Buffer,
  err: Error,
): SshCredentialsError {
  if (NO_PASSPHRASE_RE.test(err.message)) {
    return new SshCredentialsError(
      `SSH private key ${keyPath} is encrypted but no passphrase is configured: set passphrasePath to a file ` +
        `holding the passphrase, or remove the passphrase with \`ssh-keygen -p -f ${keyPath}\``,
    );
  }
  if (passphrasePath !== undefined) {
    // Encrypted with a passphrase that did not decrypt it? Re-parse without one: cheap (no KDF).
    const bare = parseKey(data);
    if (bare instanceof Error && NO_PASSPHRASE_RE.test(bare.message)) {
      return new SshCredentialsError(
        `SSH private key ${keyPath} could not be decrypted with the passphrase in ${passphrasePath} ` +
          `(bad passphrase): fix that file (the passphrase on one line)`,
      );
    }
  }
  const head = data.subarray(0, 64).toString('latin1');
  const pkcs8 = /-----BEGIN (ENCRYPTED )?PRIVATE KEY-----/.test(head);
  return new SshCredentialsError(
    `SSH private key ${keyPath} cannot be used: ${err.message}. ` +
      (pkcs8
        ? `PKCS#8 keys are not supported; rewrite it in OpenSSH format with \`ssh-keygen -p -f ${keyPath}\``
        : 'keyPath must name an ed25519, ecdsa or rsa private key in OpenSSH or PEM format'),
    { cause: err },
  );
}

async function readPassphrase(path: string): Promise<Buffer> {
  const raw = await readCredentialFile(path, 'SSH key passphrase file', 'passphrasePath');
  let end = raw.length;
  if (end > 0 && raw[end - 1] === 0x0a) end--;
  if (end > 0 && raw[end - 1] === 0x0d) end--;
  if (end === 0) {
    throw new SshCredentialsError(`SSH key passphrase file ${path} is empty: write the passphrase into it`);
  }
  const passphrase = Buffer.from(raw.subarray(0, end));
  raw.fill(0);
  return passphrase;
}

async function resolveAgentSocket(agent: string | true, env: NodeJS.ProcessEnv): Promise<string> {
  const path = agent === true ? env.SSH_AUTH_SOCK : agent;
  if (path === undefined || path === '') {
    throw new SshCredentialsError(
      'agentSocket is true but SSH_AUTH_SOCK is not set in the environment: start ssh-agent, or set agentSocket to its socket path',
    );
  }
  const what = agent === true ? `ssh-agent socket ${path} (from SSH_AUTH_SOCK)` : `ssh-agent socket ${path}`;
  let isSocket: boolean;
  try {
    isSocket = (await stat(path)).isSocket();
  } catch (err) {
    throw new SshCredentialsError(
      `${what} is not usable (${(err as NodeJS.ErrnoException).code ?? 'error'}): start ssh-agent or fix agentSocket`,
      { cause: err },
    );
  }
  if (!isSocket) throw new SshCredentialsError(`${what} is not a unix socket: fix agentSocket`);
  return path;
}

/** Largest known_hosts file read, in bytes (it is parsed on every dial; a few KiB is typical). */
export const MAX_KNOWN_HOSTS_BYTES = 4 * 1024 * 1024;

async function loadKnownHosts(target: SshTarget): Promise<{ parsed: KnownHostsParseResult; missing: boolean }> {
  try {
    const bytes = await readFile(target.knownHostsPath);
    if (bytes.length > MAX_KNOWN_HOSTS_BYTES) {
      throw new SshCredentialsError(
        `known_hosts file ${target.knownHostsPath} is ${bytes.length} bytes, over the ${MAX_KNOWN_HOSTS_BYTES}-byte limit: ` +
          'point knownHostsPath to a file that lists the configured hosts only',
      );
    }
    return { parsed: parseKnownHosts(bytes.toString('utf8')), missing: false };
  } catch (err) {
    if (err instanceof SshCredentialsError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && target.acceptNewHostKeys === true) {
      return { parsed: { entries: [], invalid: [] }, missing: true };
    }
    if (code === 'ENOENT') {
      throw new SshCredentialsError(
        `known_hosts file ${target.knownHostsPath} does not exist: create it with the host's verified key, e.g. ` +
          `\`ssh-keyscan -p ${target.port} ${target.host} >> ${target.knownHostsPath}\`, or fix knownHostsPath`,
        { cause: err },
      );
    }
    throw fileError(target.knownHostsPath, 'known_hosts file', 'knownHostsPath', err);
  }
}

async function readCredentialFile(path: string, what: string, field: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw fileError(path, what, field, err);
  }
}

function fileError(path: string, what: string, field: string, err: unknown): SshCredentialsError {
  const code = (err as NodeJS.ErrnoException).code;
  const uid = typeof process.getuid === 'function' ? ` (uid ${process.getuid()})` : '';
  const fix =
    code === 'ENOENT'
      ? `does not exist: fix ${field} or create the file`
      : code === 'EACCES' || code === 'EPERM'
        ? `is not readable by this process${uid}: fix its owner or mode (e.g. chmod 600, owned by the worker's user)`
        : code === 'EISDIR'
          ? `is a directory: ${field} must name a file`
          : `cannot be read (${code ?? String(err)}): fix ${field}`;
  return new SshCredentialsError(`${what} ${path} ${fix}`, { cause: err });
}
