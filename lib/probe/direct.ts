/**
 * The probe's direct path: a TCP connection from the worker to the guest's Squid, for guests the
 * worker routes to (lib/probe/route.ts decides when). The dial is the SSH transport's own TCP
 * half (lib/ssh/tcp.ts: bounded, abortable, the socket destroyed on failure); its errors become
 * probe errors, since no SSH is involved.
 */
import type { Socket } from 'node:net';
import { connectTcp } from '../ssh/tcp.ts';
import { SshAbortedError, SshTimeoutError } from '../ssh/errors.ts';
import { ProbeFailedError } from './errors.ts';

export interface DirectOptions {
  /** Bound on the TCP handshake, in ms. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * Connects to `host:port` and resolves with the connected socket. Rejects with
 * {@link ProbeFailedError}: `PROBE_TIMEOUT`, `PROBE_ABORTED`, or `PROBE_CLOSED` (refused,
 * unreachable), each message ending in "(direct)".
 */
export async function openDirectTcp(host: string, port: number, options: DirectOptions): Promise<Socket> {
  try {
    return await connectTcp(host, port, options.timeoutMs, options.signal);
  } catch (err) {
    const message = `${err instanceof Error ? err.message : String(err)} (direct)`;
    if (err instanceof SshTimeoutError) throw new ProbeFailedError('PROBE_TIMEOUT', message, { cause: err });
    if (err instanceof SshAbortedError) throw new ProbeFailedError('PROBE_ABORTED', message, { cause: err });
    throw new ProbeFailedError('PROBE_CLOSED', message, { cause: err });
  }
}
