/** Where and as whom to dial, and which files hold the credentials (read fresh on every dial). */
export interface SshTarget {
  /** Host name or IP address of the sshd. */
  host: string;
  /** TCP port of the sshd (22 unless configured otherwise). */
  port: number;
  /** Remote user name. */
  user: string;
  /**
   * Private key file (ed25519, ecdsa or rsa; OpenSSH format, or traditional PEM
   * `BEGIN RSA/EC PRIVATE KEY`). Optional only when `agentSocket` is set.
   */
  keyPath?: string;
  /** File whose content (one line; a trailing newline is ignored) is the key's passphrase. */
  passphrasePath?: string;
  /**
   * ssh-agent to offer after the key file: a socket path, or `true` for `$SSH_AUTH_SOCK` as set
   * at dial time. Default: no agent.
   */
  agentSocket?: string | true;
  /** The known_hosts file the server's host key is verified against. */
  knownHostsPath: string;
  /**
   * Opt-in trust on first use: a host with no entry at all in known_hosts is accepted and its
   * key appended to `knownHostsPath`. A changed or revoked key is still refused. Default false.
   */
  acceptNewHostKeys?: boolean;
}
