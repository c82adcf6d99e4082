/**
 * An immediate answer to OpenSSH's host-keys notice, so that sshd's next packet is not held back
 * for 40 ms.
 *
 * Right after authentication OpenSSH's sshd sends `hostkeys-00@openssh.com` (a global request
 * listing its host keys); ssh2 answers with `hostkeys-prove-00@openssh.com`, and sshd replies with
 * signatures. sshd sets TCP_NODELAY only for interactive sessions, so Nagle's algorithm holds its
 * next small packet (the channel-open confirmation, or the first libvirt reply) until that reply
 * has been acknowledged, and our kernel delays the acknowledgement by up to 40 ms because we have
 * nothing to send. Measured on the test hosts: the first libvirt call after a dial took 41-46 ms in
 * 7 of 8 dials, against 1-5 ms when an SSH_MSG_IGNORE goes out as soon as the signatures are in
 * (its segment carries the acknowledgement). RFC 4253 §11.2: every implementation ignores
 * SSH_MSG_IGNORE at any time after the key exchange.
 *
 * ssh2 has no public way to send one, so this uses its packet writer and `sendPacket` (ssh2 1.17,
 * the same internals as packet-pool.ts). Where they are not as expected nothing is sent and the
 * session works as before, 40 ms slower to start; test/integration/ssh-dial.test.ts notices.
 */
import { createRequire } from 'node:module';
import type { Client } from 'ssh2';

const SSH_MSG_IGNORE = 2;

interface PacketWriter {
  allocStart: number;
  alloc(payloadBytes: number): Buffer;
  finalize(packet: Buffer): Buffer;
}
type SendPacket = (protocol: unknown, packet: Buffer) => boolean;

let sendPacketFn: SendPacket | null | undefined;
function sendPacket(): SendPacket | null {
  if (sendPacketFn === undefined) {
    try {
      const utils = createRequire(import.meta.url)('ssh2/lib/protocol/utils.js') as { sendPacket?: unknown };
      sendPacketFn = typeof utils.sendPacket === 'function' ? (utils.sendPacket as SendPacket) : null;
    } catch {
      sendPacketFn = null;
    }
  }
  return sendPacketFn;
}

/** Sends SSH_MSG_IGNORE with an empty payload; false where ssh2's internals are not as expected. */
export function sendIgnore(client: Client): boolean {
  const send = sendPacket();
  const protocol = (client as unknown as { _protocol?: { _packetRW?: { write?: PacketWriter } } })._protocol;
  const writer = protocol?._packetRW?.write;
  if (send === null || writer === undefined || typeof writer.alloc !== 'function') return false;
  const at = writer.allocStart;
  const packet = writer.alloc(5);
  packet[at] = SSH_MSG_IGNORE;
  packet.writeUInt32BE(0, at + 1); // the ignored data: an empty string
  send(protocol, writer.finalize(packet));
  return true;
}

/**
 * Answers every host-keys proof (ssh2's `hostkeys` event) with an SSH_MSG_IGNORE. Returns a
 * counter of those sent. Never throws into ssh2: a failure leaves the session as it was.
 */
export function ackHostKeysPromptly(client: Client): { readonly sent: number } {
  const counter = { sent: 0 };
  (client as unknown as NodeJS.EventEmitter).on('hostkeys', () => {
    try {
      if (sendIgnore(client)) counter.sent++;
    } catch {
      // an optimisation only
    }
  });
  return counter;
}
