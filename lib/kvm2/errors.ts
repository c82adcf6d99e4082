/**
 * Errors of the kvm2 provider. Class names are stable: Temporal matches retry policies on them.
 * Every code is listed in docs/errors.md.
 */
import { ProjectError } from '../errors.ts';
import type { ErrorKind, ProjectErrorOptions } from '../errors.ts';

/**
 * Every address source of a domain failed (agent, DHCP leases, ARP): the address is unreadable,
 * which is not the same as "no address yet" (H3). Transient. (A dead link is not this error: the
 * reading rethrows the link's own Transient error, e.g. LibvirtConnectionError.)
 */
export class Kvm2AddressUnreadableError extends ProjectError {
  readonly code = 'KVM2_ADDRESS_UNREADABLE';
  readonly kind: ErrorKind = 'Transient';
}

/**
 * A name the provider builds volume names from (a provider entry, an image key) is not a lowercase
 * identifier. Permanent: the same configuration fails the same way. `field` names the input.
 */
export class Kvm2NameError extends ProjectError {
  readonly code = 'KVM2_INVALID_NAME';
  readonly kind: ErrorKind = 'Permanent';
  readonly field: string;
  constructor(field: string, problem: string, options?: ProjectErrorOptions) {
    super(`${field} ${problem}`, options);
    this.field = field;
  }
}

/** An image's settings cannot be used (a URL that is not http(s), a sha256 that is not 64 hex digits). */
export class ImageSpecError extends ProjectError {
  readonly code = 'KVM2_IMAGE_SPEC';
  readonly kind: ErrorKind = 'Permanent';
  readonly field: string;
  constructor(field: string, problem: string, options?: ProjectErrorOptions) {
    super(`${field} ${problem}`, options);
    this.field = field;
  }
}

/**
 * The configured image (URL or sha256) differs from what the marker of the existing base records,
 * or the marker belongs to another provider entry and image key whose volume names collide with
 * these. Permanent, and nothing is deleted: overlays may use the base. `remedy` says what to do.
 */
export class ImageConflictError extends ProjectError {
  readonly code = 'KVM2_IMAGE_CONFLICT';
  readonly kind: ErrorKind = 'Permanent';
  readonly volumeName: string;
  /** Which setting differs. */
  readonly field: 'url' | 'sha256' | 'entry/key';
  readonly configured: string;
  readonly recorded: string;
  constructor(
    volumeName: string,
    field: 'url' | 'sha256' | 'entry/key',
    configured: string,
    recorded: string,
    options?: ProjectErrorOptions,
  ) {
    const remedy =
      field === 'entry/key'
        ? 'the volume names collide: rename the provider entry or the image key'
        : 'use a new image key for the new image; the old base stays for the overlays that use it';
    super(
      `base image ${volumeName}: the configured ${field} ${configured} differs from the recorded ${field} ${recorded}; ${remedy}`,
      options,
    );
    this.volumeName = volumeName;
    this.field = field;
    this.configured = configured;
    this.recorded = recorded;
  }
}

/**
 * The existing base or its marker is in a state the provider cannot vouch for and must not delete:
 * the base's size changed outside the provider, or the marker was written by a newer version.
 * Permanent, and nothing is deleted: overlays may use the base. The message says what to do.
 */
export class ImageCorruptError extends ProjectError {
  readonly code = 'KVM2_IMAGE_CORRUPT';
  readonly kind: ErrorKind = 'Permanent';
}

/**
 * The image could not be fetched: an HTTP error status (404 and other client errors are Permanent;
 * 5xx, 408, 425 and 429 are Transient), a missing Content-Length (Permanent), a network failure or a
 * timeout (Transient). `statusCode` is set when the server answered.
 */
export class ImageDownloadError extends ProjectError {
  readonly code = 'KVM2_IMAGE_DOWNLOAD';
  readonly kind: ErrorKind;
  readonly url: string;
  readonly statusCode: number | undefined;
  constructor(url: string, message: string, options?: ProjectErrorOptions & { kind?: ErrorKind; statusCode?: number }) {
    super(message, options);
    this.url = url;
    this.kind = options?.kind ?? 'Transient';
    this.statusCode = options?.statusCode;
  }
}

/** The body ended before (or ran past) the announced Content-Length. Transient. */
export class ImageTruncatedError extends ProjectError {
  readonly code = 'KVM2_IMAGE_TRUNCATED';
  readonly kind: ErrorKind = 'Transient';
  readonly expectedBytes: number;
  readonly receivedBytes: number;
  constructor(url: string, expectedBytes: number, receivedBytes: number, options?: ProjectErrorOptions) {
    super(`${url}: the body had ${receivedBytes} bytes where Content-Length announced ${expectedBytes}`, options);
    this.expectedBytes = expectedBytes;
    this.receivedBytes = receivedBytes;
  }
}

/** The downloaded bytes do not have the configured sha256. Permanent; the base was deleted. */
export class ImageDigestMismatchError extends ProjectError {
  readonly code = 'KVM2_IMAGE_DIGEST_MISMATCH';
  readonly kind: ErrorKind = 'Permanent';
  readonly expectedSha256: string;
  readonly actualSha256: string;
  constructor(url: string, expectedSha256: string, actualSha256: string, options?: ProjectErrorOptions) {
    super(
      `${url}: sha256 mismatch: expected (configured) ${expectedSha256}, actual (downloaded) ${actualSha256}; ` +
        'fix the image URL or its sha256',
      options,
    );
    this.expectedSha256 = expectedSha256;
    this.actualSha256 = actualSha256;
  }
}

/**
 * The downloaded bytes are not in the configured format (a qcow2 image without the qcow2 magic,
 * a raw image libvirt probes as another format). Permanent; the base was deleted.
 */
export class ImageFormatError extends ProjectError {
  readonly code = 'KVM2_IMAGE_FORMAT';
  readonly kind: ErrorKind = 'Permanent';
}

/**
 * After the upload the base volume does not look as expected (libvirt reports no capacity), or
 * the base volume appeared while this fetch was creating it. Transient; the base was deleted
 * where it was this fetch's own.
 */
export class ImageVerifyError extends ProjectError {
  readonly code = 'KVM2_IMAGE_VERIFY';
  readonly kind: ErrorKind = 'Transient';
}

/** The caller aborted the ensure (its AbortSignal fired). Transient. */
export class ImageAbortedError extends ProjectError {
  readonly code = 'KVM2_IMAGE_ABORTED';
  readonly kind: ErrorKind = 'Transient';
}

/**
 * The storage pool has less free space than a volume needs (a base image, an overlay). Transient:
 * the workflow turns it into a quota wait. The byte counts are those seen at the check.
 */
export class InsufficientCapacity extends ProjectError {
  readonly code = 'KVM2_INSUFFICIENT_CAPACITY';
  readonly kind: ErrorKind = 'Transient';
  readonly pool: string;
  readonly neededBytes: number;
  readonly availableBytes: number;
  constructor(pool: string, neededBytes: number, availableBytes: number, options?: ProjectErrorOptions) {
    super(`storage pool ${pool} has ${availableBytes} bytes available; ${neededBytes} are needed`, options);
    this.pool = pool;
    this.neededBytes = neededBytes;
    this.availableBytes = availableBytes;
  }
}

/**
 * The domain lacks our mark or carries another owner UID or provider entry: the provider never
 * adopts, changes or deletes it. Permanent: an operator must look.
 */
export class Kvm2AdoptionRefusedError extends ProjectError {
  readonly code = 'KVM2_ADOPTION_REFUSED';
  readonly kind: ErrorKind = 'Permanent';
}

/**
 * The domain definition read back from the host does not have exactly one `<memory>`,
 * `<currentMemory>` and `<vcpu>` element to change. Permanent: the definition was edited by hand.
 */
export class Kvm2ResizeError extends ProjectError {
  readonly code = 'KVM2_RESIZE_UNSUPPORTED';
  readonly kind: ErrorKind = 'Permanent';
}

/**
 * The host lacks a storage pool or network that the provider entry names. Permanent: an operator
 * must create it on the host or fix the providers file; the message names the field.
 */
export class Kvm2HostSetupError extends ProjectError {
  readonly code = 'KVM2_HOST_SETUP';
  readonly kind: ErrorKind = 'Permanent';
}

/**
 * A volume under a proxy's name (its overlay or seed) is not provably the one this proxy's
 * workflow made (no owner record of this run, a backing file other than the entry's verified
 * base, a standalone or non-qcow2 overlay, a seed that is not raw) and a domain uses it, so it
 * can be neither booted nor replaced. Permanent, and nothing was deleted; the message names the
 * volume, why it is not ours, the domains that use it, and the remedy.
 */
export class Kvm2DiskNotOwnError extends ProjectError {
  readonly code = 'KVM2_DISK_NOT_OWN';
  readonly kind: ErrorKind = 'Permanent';
  readonly volume: string;
  constructor(volume: string, message: string, options?: ProjectErrorOptions) {
    super(message, options);
    this.volume = volume;
  }
}

/**
 * The base a proxy's overlay is to be backed by is not a verified base of its provider entry in
 * the pool (no volume of that path, or no valid marker of this entry beside it; H4). Permanent:
 * the base must be ensured again (the ensure-image workflow writes the marker after verifying).
 */
export class Kvm2BaseUnverifiedError extends ProjectError {
  readonly code = 'KVM2_BASE_UNVERIFIED';
  readonly kind: ErrorKind = 'Permanent';
}
