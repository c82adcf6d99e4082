/**
 * Names of the provider's volumes. Base images are per provider entry (H4): no two entries share a
 * base, and the provider only ever touches volumes whose names it builds here.
 *
 * - base:   `base-<entry>-<key>.<format>`
 * - marker: `base-<entry>-<key>.<format>.marker` (a small raw volume recording digest and URL,
 *           written only after the base is verified)
 *
 * Identifiers may contain `-`, so two pairs can build one name (entry `lab` with key `a-deb`, and
 * entry `lab-a` with key `deb`). The marker records entry and key, and ensureImage refuses a base
 * whose marker names another pair (ImageConflictError), so such a collision never shares a base.
 */
import { Kvm2NameError } from '../errors.ts';
import { checkIdentifier } from '../identifier.ts';

/** Image file formats a base may have. */
export type ImageFormat = 'qcow2' | 'raw';

const FORMATS: readonly string[] = ['qcow2', 'raw'];

function checkFormat(value: unknown): ImageFormat {
  if (typeof value !== 'string' || !FORMATS.includes(value)) {
    throw new Kvm2NameError('format', `must be qcow2 or raw, got ${JSON.stringify(value)}`);
  }
  return value as ImageFormat;
}

/** The base volume of image `key` of provider entry `entry`: `base-<entry>-<key>.<format>`. */
export function baseVolumeName(entry: string, key: string, format: ImageFormat): string {
  return `base-${checkIdentifier('entry', entry)}-${checkIdentifier('image key', key)}.${checkFormat(format)}`;
}

/** The marker volume of that base: `base-<entry>-<key>.<format>.marker`. */
export function markerVolumeName(entry: string, key: string, format: ImageFormat): string {
  return `${baseVolumeName(entry, key, format)}.marker`;
}
