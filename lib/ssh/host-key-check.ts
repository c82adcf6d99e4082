/**
 * The host key check of one connection, as ssh2's `hostVerifier`. ssh2 calls it on the first key
 * exchange and again on every re-key (OpenSSH re-keys after its RekeyLimit, i.e. during long
 * uploads), so the first accepted key is pinned: a re-key must present the same key, and an
 * "accept new host keys" append happens at most once. A refusal is kept in `refusal` (ssh2 itself
 * only reports "Host denied (verification failed)") and, after the dial, passed to
 * `onLateRefusal`.
 */
import { SshCredentialsError, SshHostKeyError } from './errors.ts';
import { appendKnownHost, fingerprintSha256, keyTypeOfBlob, verifyHostKey } from './known-hosts.ts';
import type { KnownHostEntry } from './known-hosts.ts';
import type { SshTarget } from './target.ts';

const DEFAULT_HOST_KEY_ALGORITHMS = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'rsa-sha2-512',
  'rsa-sha2-256',
  'ssh-rsa',
];
/** Host key algorithms that prove a key of a known_hosts key type. */
const HOST_KEY_ALGORITHMS_BY_TYPE: Record<string, string[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
};

/**
 * Host key algorithms to offer, those proving a key type that known_hosts records for the host
 * first (as OpenSSH orders them), so that a host with several keys presents a known one.
 */
export function hostKeyAlgorithms(knownTypes: readonly string[]): string[] {
  const preferred = knownTypes.flatMap((t) => HOST_KEY_ALGORITHMS_BY_TYPE[t] ?? []);
  return [...new Set([...preferred, ...DEFAULT_HOST_KEY_ALGORITHMS])];
}

/** See the module comment. */
export class HostKeyCheck {
  /** Fingerprint of the last key presented (`SHA256:...`). */
  fingerprint = '';
  /** True once a new key was appended to known_hosts (acceptNewHostKeys). */
  recorded = false;
  /** Why the last presented key was refused, if it was. */
  refusal: Error | undefined;
  /** Told about a refusal that happens after the dial (a re-key with another key). */
  onLateRefusal: ((err: Error) => void) | undefined;
  readonly #target: SshTarget;
  readonly #entries: readonly KnownHostEntry[];
  #pinned: Buffer | undefined;

  constructor(target: SshTarget, entries: readonly KnownHostEntry[]) {
    this.#target = target;
    this.#entries = entries;
  }

  /** ssh2 `hostVerifier` (callback form). */
  readonly verify = (key: Buffer, done: (valid: boolean) => void): void => {
    const t = this.#target;
    this.fingerprint = fingerprintSha256(key);
    if (this.#pinned !== undefined) {
      if (key.equals(this.#pinned)) return done(true);
      const pinnedType = keyTypeOfBlob(this.#pinned) ?? 'unknown-key-type';
      return this.#refuse(
        this.#hostKeyError('mismatch', key, [`${pinnedType} ${fingerprintSha256(this.#pinned)}`]),
        done,
      );
    }
    const verdict = verifyHostKey(this.#entries, t.host, t.port, key);
    if (verdict.ok) {
      this.#pinned = key;
      return done(true);
    }
    if (verdict.reason === 'unknown' && t.acceptNewHostKeys === true) {
      appendKnownHost(t.knownHostsPath, t.host, t.port, key).then(
        () => {
          this.#pinned = key;
          this.recorded = true;
          done(true);
        },
        (err: unknown) => {
          const code = (err as NodeJS.ErrnoException).code ?? String(err);
          const e = new SshCredentialsError(
            `cannot record the new host key of ${t.host}:${t.port} in ${t.knownHostsPath} (${code}): ` +
              `fix that file's permissions or disable acceptNewHostKeys`,
            { cause: err },
          );
          this.#refuse(e, done);
        },
      );
      return;
    }
    this.#refuse(this.#hostKeyError(verdict.reason, key, verdict.expected), done);
  };

  #hostKeyError(reason: 'unknown' | 'mismatch' | 'revoked', key: Buffer, expected: string[]): SshHostKeyError {
    const t = this.#target;
    return new SshHostKeyError({
      host: t.host,
      port: t.port,
      reason,
      fingerprint: fingerprintSha256(key),
      keyType: keyTypeOfBlob(key) ?? 'unknown-key-type',
      expected,
      knownHostsPath: t.knownHostsPath,
    });
  }

  #refuse(err: Error, done: (valid: boolean) => void): void {
    this.refusal = err;
    this.onLateRefusal?.(err);
    done(false);
  }
}
