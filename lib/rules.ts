/**
 * Value rules and defaults that more than one layer applies (the providers file, the transport,
 * the provider), written once: identifiers (from contracts/limits.ts), http(s) URLs, timer
 * durations, and where SSH and libvirt listen by default. Pure.
 */

// The identifier rule crosses the workflow boundary (the API's schemas check it too): it lives in
// contracts/limits.ts and is re-exported here for lib/.
export { IDENTIFIER_RE, IDENTIFIER_RULE, isIdentifier, MAX_IDENTIFIER_LENGTH } from '../contracts/limits.ts';

/** Whether `text` is an absolute http:// or https:// URL with a host. */
export function isHttpUrl(text: unknown): boolean {
  if (typeof text !== 'string' || !URL.canParse(text)) return false;
  const url = new URL(text);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
}

/** Longest timer Node can arm (2^31 - 1 ms, about 24.8 days); longer values fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Validates a duration option and returns it; throws a RangeError naming the field and the fix.
 * Node turns timers over MAX_TIMER_MS (or non-finite) into 1 ms ones, which would end a wait at
 * once (and kill a connection with it).
 */
export function checkDurationMs(field: string, value: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new RangeError(`${field} must be a number of milliseconds in (0, ${MAX_TIMER_MS}], got ${String(value)}`);
  }
  return value;
}

/** The TCP port of sshd unless configured otherwise. */
export const DEFAULT_SSH_PORT = 22;

/** Where libvirtd listens on a host unless configured otherwise. */
export const DEFAULT_LIBVIRT_SOCKET = '/var/run/libvirt/libvirt-sock';
