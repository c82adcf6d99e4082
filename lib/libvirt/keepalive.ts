/**
 * The dead-peer detector of a connection: after `intervalMs` without a byte from the peer it sends
 * a PING, and after `countMax` unanswered PINGs (about `intervalMs × (countMax + 1)` of silence)
 * it declares the peer dead. Any byte received resets it.
 */
import { KEEPALIVE_PROTOCOL_VERSION, KeepaliveProc, MessageStatus, MessageType, Program } from './constants.ts';
import { LibvirtKeepaliveError } from './errors.ts';
import { encodePacket } from './packet.ts';

export interface KeepaliveOptions {
  /** Idle time after which a PING is sent, in milliseconds. Default 5000. */
  intervalMs?: number;
  /**
   * Unanswered PINGs tolerated. The peer is declared dead after about
   * `intervalMs × (countMax + 1)` without any byte from it. Default 3.
   */
  countMax?: number;
}

/** A keepalive message (PING or PONG) as bytes. */
export function keepalivePacket(proc: number): Buffer {
  return encodePacket({
    prog: Program.KEEPALIVE,
    vers: KEEPALIVE_PROTOCOL_VERSION,
    proc,
    type: MessageType.MESSAGE,
    serial: 0,
    status: MessageStatus.OK,
  });
}

export class Keepalive {
  #timer: NodeJS.Timeout | undefined;
  #lastReceivedAt = Date.now();
  #missedPings = 0;

  /** Something arrived from the peer. */
  received(): void {
    this.#lastReceivedAt = Date.now();
    this.#missedPings = 0;
  }

  get running(): boolean {
    return this.#timer !== undefined;
  }

  /**
   * Starts checking; `send` writes a packet, `dead` is called once with the keepalive error.
   * The timer does not keep the process alive.
   */
  start(label: string, options: KeepaliveOptions, send: (packet: Buffer) => void, dead: (err: Error) => void): void {
    if (this.#timer) return;
    const intervalMs = options.intervalMs ?? 5000;
    const countMax = options.countMax ?? 3;
    const tickMs = Math.max(50, Math.floor(intervalMs / 2));
    this.received();
    let lastPingAt = 0;
    this.#timer = setInterval(() => {
      const now = Date.now();
      if (now - this.#lastReceivedAt < intervalMs || now - lastPingAt < intervalMs) return;
      if (this.#missedPings >= countMax) {
        this.stop();
        dead(
          new LibvirtKeepaliveError(
            `${label}: no answer from the peer for ${now - this.#lastReceivedAt} ms (keepalive ${intervalMs} ms × ${countMax + 1}); connection killed`,
          ),
        );
        return;
      }
      this.#missedPings++;
      lastPingAt = now;
      send(keepalivePacket(KeepaliveProc.PING));
    }, tickMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
