/**
 * Libvirt XML of a storage volume (STORAGE_VOL_CREATE_XML): a raw volume (base image, seed,
 * marker) or a qcow2 overlay on a backing volume. Pure; every value is escaped or validated.
 */
import { Kvm2BuildError } from './build-errors.ts';
import { absolute, escapeXml, nonEmpty } from './xml.ts';

/** What {@link buildVolumeXml} describes. */
export interface VolumeSpec {
  name: string;
  /** Virtual size in bytes (for an overlay: at least the backing image's). */
  capacityBytes: number | bigint;
  format: 'qcow2' | 'raw';
  /** Absolute path of the backing volume (overlays only; needs format qcow2). */
  backingPath?: string;
  /** Format of the backing volume. Default `qcow2`. */
  backingFormat?: 'qcow2' | 'raw';
}

/** The volume XML for STORAGE_VOL_CREATE_XML. */
export function buildVolumeXml(spec: VolumeSpec): string {
  if (typeof spec.capacityBytes === 'number' && !Number.isSafeInteger(spec.capacityBytes)) {
    throw new Kvm2BuildError('capacityBytes', `must be a whole number of bytes, got ${spec.capacityBytes}`);
  }
  const capacity = BigInt(spec.capacityBytes);
  if (capacity <= 0n || capacity >= 2n ** 63n) {
    throw new Kvm2BuildError('capacityBytes', `must be positive and below 2^63, got ${capacity}`);
  }
  const format = oneOf(spec.format, 'format');
  const lines = [
    '<volume>',
    `  <name>${escapeXml(nonEmpty(spec.name, 'name'), 'name')}</name>`,
    `  <capacity unit='bytes'>${capacity}</capacity>`,
    ...(format === 'raw' ? ["  <allocation unit='bytes'>0</allocation>"] : []),
    '  <target>',
    `    <format type='${format}'/>`,
    '  </target>',
  ];
  if (spec.backingPath !== undefined) {
    if (format !== 'qcow2') throw new Kvm2BuildError('format', 'must be qcow2 for a volume with a backing store');
    const backingPath = escapeXml(absolute(spec.backingPath, 'backingPath'), 'backingPath');
    lines.push(
      '  <backingStore>',
      `    <path>${backingPath}</path>`,
      `    <format type='${oneOf(spec.backingFormat ?? 'qcow2', 'backingFormat')}'/>`,
      '  </backingStore>',
    );
  } else if (spec.backingFormat !== undefined) {
    throw new Kvm2BuildError('backingFormat', 'is given without backingPath');
  }
  return [...lines, '</volume>', ''].join('\n');
}

function oneOf(format: string, field: string): 'qcow2' | 'raw' {
  if (format !== 'qcow2' && format !== 'raw') {
    throw new Kvm2BuildError(field, `must be "qcow2" or "raw", got ${JSON.stringify(format)}`);
  }
  return format;
}
