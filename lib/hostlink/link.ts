/**
 * A link: one SSH session, one channel forwarded to the host's libvirt socket, and one libvirt
 * client on it. Links die in one place, `markDead`, which (H1) records the reason, rejects every
 * waiter (pending calls and streams), and only then destroys the TCP socket. It never waits for a
 * polite close, takes no lock and is idempotent; the first reason wins.
 */
import { LibvirtClient } from '../libvirt/client.ts';
import type { ClientOptions } from '../libvirt/client.ts';
import { tracingObserver } from '../libvirt/observe.ts';
import { dialSsh } from '../ssh/dial.ts';
import type { DialOptions } from '../ssh/dial.ts';
import type { SshSession } from '../ssh/session.ts';
import type { SshTarget } from '../ssh/target.ts';
import { DEFAULT_LIBVIRT_SOCKET } from '../rules.ts';

/** What a link is for: short RPCs (pooled), bulk transfers, or health checks (dedicated). */
export type LinkPurpose = 'rpc' | 'bulk' | 'health';

/** A host as the transport sees it: where to dial, and where libvirt listens there. */
export interface HostTarget extends SshTarget {
  /** A stable name for logs and errors (e.g. the config's host name). */
  name: string;
  /** The libvirt socket on the host. Default {@link DEFAULT_LIBVIRT_SOCKET} (`/var/run/libvirt/libvirt-sock`). */
  socketPath?: string;
  /** URI for CONNECT_OPEN. Default `qemu:///system`. */
  uri?: string;
}

export interface LinkOptions {
  /** SSH dial settings (timeouts, keepalive, ciphers, logger; the logger also gets one line per libvirt call). */
  dial?: DialOptions;
  /** libvirt client settings (call budget, keepalive, observer); `uri` and `label` come from the target. */
  client?: Omit<ClientOptions, 'uri' | 'label' | 'signal'>;
  /** Bound on opening the forwarded channel, in ms. Default 10000. */
  openTimeoutMs?: number;
  signal?: AbortSignal;
}

export class Link {
  readonly host: string;
  readonly purpose: LinkPurpose;
  readonly session: SshSession;
  readonly client: LibvirtClient;
  readonly openedAt = Date.now();
  #reason: Error | undefined;
  readonly #dead: Promise<Error>;
  #resolveDead!: (reason: Error) => void;

  constructor(host: string, purpose: LinkPurpose, session: SshSession, client: LibvirtClient) {
    this.host = host;
    this.purpose = purpose;
    this.session = session;
    this.client = client;
    this.#dead = new Promise((resolve) => (this.#resolveDead = resolve));
    session.once('dead', (reason) => this.markDead(reason));
    client.connection.onDeath((reason) => this.markDead(reason));
  }

  get isDead(): boolean {
    return this.#reason !== undefined;
  }
  get deadReason(): Error | undefined {
    return this.#reason;
  }
  /** Resolves with the reason once the link is dead. */
  get dead(): Promise<Error> {
    return this.#dead;
  }

  /**
   * Kills the link now: the reason is set first, then every pending call and stream is rejected
   * (the libvirt connection's kill), then the TCP socket is destroyed (the session's kill).
   */
  markDead(reason: Error): void {
    if (this.#reason) return;
    this.#reason = reason;
    this.client.connection.kill(reason);
    this.session.kill(reason);
    this.#resolveDead(reason);
  }

  /** A polite end for an idle link: CONNECT_CLOSE within a short bound, then markDead. */
  async close(): Promise<void> {
    if (this.#reason) return;
    await this.client.close({ timeoutMs: 1000 });
    this.markDead(new Error(`${this.host}: ${this.purpose} link closed`));
  }
}

/** Dials the host, forwards its libvirt socket and performs the libvirt handshake. */
export async function openLink(target: HostTarget, purpose: LinkPurpose, options: LinkOptions = {}): Promise<Link> {
  const session = await dialSsh(target, { ...options.dial, signal: options.signal ?? options.dial?.signal });
  try {
    const channel = await session.openStreamLocal(target.socketPath ?? DEFAULT_LIBVIRT_SOCKET, {
      timeoutMs: options.openTimeoutMs,
      signal: options.signal,
    });
    const logger = options.dial?.logger;
    const client = await LibvirtClient.connect(channel, {
      // One span and one log line per libvirt call, on the dial's logger, unless the caller chose.
      observer: logger ? tracingObserver({ logger, attributes: { host: target.name, link: purpose } }) : undefined,
      ...options.client,
      uri: target.uri,
      label: `${target.name}/${purpose}`,
      signal: options.signal,
    });
    return new Link(target.name, purpose, session, client);
  } catch (err) {
    session.kill(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
}
