// Limits every layer applies (the providers file, the API's schemas, the proxy workflow's
// validators, the provider's names), written once. Plain constants and pure checks; no imports,
// so workflows and the API import it alike.

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

/** Virtual CPUs of a proxy VM: a whole number in this range. */
export const VCPUS = { min: 1, max: 64 } as const;
/** Memory of a proxy VM in MiB: a whole number in this range. */
export const MEMORY_MIB = { min: 128, max: 262_144 } as const;
/** Overlay disk of a proxy VM in GiB: a whole number in this range. */
export const DISK_GIB = { min: 1, max: 4096 } as const;
/** A TCP port (Squid's on the guest). */
export const PORT = { min: 1, max: 65_535 } as const;

/** The VM size limits by field, as `vm.<field>` names them. */
export const VM_LIMITS = { vcpus: VCPUS, memoryMiB: MEMORY_MIB, diskGiB: DISK_GIB } as const;

/** Whether `value` is a whole number within `range`. */
export function inRange(value: unknown, range: { readonly min: number; readonly max: number }): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= range.min && value <= range.max;
}

/** `field must be a whole number from MIN to MAX, got VALUE`: the words every layer uses. */
export function rangeMessage(
  field: string,
  range: { readonly min: number; readonly max: number },
  got: unknown,
): string {
  return `${field} must be a whole number from ${range.min} to ${range.max}, got ${String(got)}`;
}

/**
 * Margin added to an entry's `timeouts.downloadTotalMs` for one fetch-and-upload attempt of the
 * ensure-image workflow (connecting, verifying, writing the marker): 60 s.
 */
export const IMAGE_ATTEMPT_MARGIN_MS = 60_000;

/** Bound on one fetch-and-upload attempt for an entry whose download budget is `downloadTotalMs`. */
export function imageAttemptTimeoutMs(downloadTotalMs: number): number {
  return downloadTotalMs + IMAGE_ATTEMPT_MARGIN_MS;
}
