/**
 * Types of the base-image cache (lib/kvm2/images/ensure.ts): its input and output, the marker record,
 * and the internal plan and call context shared by its parts.
 */
import type { Rpc } from '../rpc.ts';
import type { HostLinks } from '../../hostlink/pool.ts';
import type { ImageFormat } from './base-names.ts';
import type { LineLogger } from '../../log/line-logger.ts';

/** One configured base image of a provider entry. */
export interface ImageSpec {
  /** The image key (an identifier, unique within the entry). */
  key: string;
  /** http(s) URL of the image file. */
  url: string;
  /** Expected SHA-256 of the file, 64 hex digits. Unset: the file is accepted as served (and recorded). */
  sha256?: string;
  /** The file's format. */
  format: ImageFormat;
}

/** Budgets of an ensure, in ms. */
export interface ImageTimeouts {
  /** Budget of each short libvirt call (lookups, info, create, delete, marker read and write). */
  rpcMs: number;
  /** Bound on connecting to the image server and, separately, on waiting for its response headers. */
  downloadHeadersMs: number;
  /** Longest pause in the image body (time paused by upload backpressure does not count). */
  downloadBodyIdleMs: number;
  /**
   * Deadline of the whole download and upload. Keep it below the activity's own budget, so the
   * download ends (and cleans up) before the activity is timed out.
   */
  downloadTotalMs: number;
}

/** Progress of a fetch. */
export interface ImageProgress {
  phase: 'download';
  /** Bytes uploaded into the base volume so far. */
  bytes: number;
  /** The image size (Content-Length). */
  totalBytes: number;
  /** Average rate since the upload started. */
  bytesPerSecond: number;
}

export interface EnsureImageInput {
  /** The provider entry's name (an identifier). */
  entry: string;
  /** Storage pool name on the host. */
  pool: string;
  image: ImageSpec;
  links: HostLinks;
  timeouts: ImageTimeouts;
  /** Called at most every PROGRESS_INTERVAL_MS during a fetch, and once at its end. */
  onProgress?: (p: ImageProgress) => void;
  /** Ends the ensure (ImageAbortedError); a fetch shared with other callers ends when all of them left. */
  signal?: AbortSignal;
  logger?: LineLogger;
}

export interface EnsuredImage {
  /** Name of the base volume in the pool. */
  volumeName: string;
  /** Path of the base volume on the host (for the overlay's backing store). */
  path: string;
  format: ImageFormat;
  /** Size of the image file. */
  sizeBytes: number;
  /** SHA-256 of the image file (lowercase hex), computed while it was uploaded. */
  sha256: string;
  url: string;
  /** True when the base was already there (no download). */
  cached: boolean;
}

/** Content of a marker volume (JSON). */
export interface ImageMarker {
  v: 1;
  entry: string;
  key: string;
  url: string;
  sha256: string;
  /** Size of the image file. */
  sizeBytes: number;
  /** Capacity libvirt reported for the base after the upload (the virtual size for qcow2). */
  capacityBytes: number;
  format: ImageFormat;
  /** RFC 3339 time of the verification. */
  verifiedAt: string;
}

/** One ensure, validated: names built, digest normalised (internal). */
export interface Plan {
  entry: string;
  key: string;
  url: string;
  sha256: string | undefined;
  format: ImageFormat;
  volumeName: string;
  markerName: string;
  pool: string;
  links: HostLinks;
  timeouts: ImageTimeouts;
  logger: LineLogger | undefined;
}

/** What the parts of one ensure share (internal). */
export interface Ctx {
  plan: Plan;
  signal: AbortSignal;
  what: string;
  /** A short call under the ensure's signal. */
  rpc: Rpc;
  /** A short call for cleanup: bounded, but not under the signal (it runs after an abort too). */
  cleanupRpc: Rpc;
  emit: (p: ImageProgress) => void;
}
