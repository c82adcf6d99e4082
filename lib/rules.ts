/**
 * Value rules and defaults that more than one layer applies (the providers file, the transport,
 * the provider), written once: identifiers, http(s) URLs, timer durations, and where SSH and
 * libvirt listen by default. Pure; no imports.
 */

/** Longest identifier (provider entry, host, image key, proxy name), in characters. */
export const MAX_IDENTIFIER_LENGTH = 40;

/**
 * A lowercase identifier: a letter, then lowercase letters, digits or `-`; at most
 * {@link MAX_IDENTIFIER_LENGTH} characters. Identifiers never contain `_` or `.`, which the
 * provider uses to join them into libvirt names.
 */
export const IDENTIFIER_RE = new RegExp(`^[a-z][a-z0-9-]{0,${MAX_IDENTIFIER_LENGTH - 1}}$`);

/** The identifier rule in words, for error messages. */
export const IDENTIFIER_RULE = `must be a lowercase identifier (a letter, then lowercase letters, digits or "-", at most ${MAX_IDENTIFIER_LENGTH})`;

/** Whether `value` is an identifier (see {@link IDENTIFIER_RE}). */
export function isIdentifier(value: unknown): value is string {
  return typeof value === 'string' && IDENTIFIER_RE.test(value);
}

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
