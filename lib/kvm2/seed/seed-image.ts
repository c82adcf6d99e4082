/**
 * The cloud-init NoCloud seed image: an ISO 9660 + Joliet volume labelled `cidata` holding
 * `meta-data`, `user-data` and optionally `ep-seed` and `network-config` in its root. cloud-init finds it by
 * label (blkid) and reads the Joliet names. Attach it as a read-only virtio disk, not a SATA
 * CD-ROM: Debian's cloud kernel has no AHCI driver (see proxy/domain-xml.ts).
 */
import { buildIso9660 } from './iso9660.ts';

/** The volume label cloud-init's NoCloud datasource looks for. */
export const SEED_VOLUME_ID = 'cidata';

/** The seed's files, as text (UTF-8). */
export interface SeedFiles {
  metaData: string;
  userData: string;
  /** The project's image reads this instead of running cloud-init (cloud-config.ts buildEpSeed). */
  epSeed?: string;
  networkConfig?: string;
}

/** Builds the seed image (a few KiB; deterministic for the same input). */
export function buildSeedImage(seed: SeedFiles): Buffer {
  const files = [
    { name: 'meta-data', data: Buffer.from(seed.metaData, 'utf8') },
    { name: 'user-data', data: Buffer.from(seed.userData, 'utf8') },
  ];
  if (seed.epSeed !== undefined) files.push({ name: 'ep-seed', data: Buffer.from(seed.epSeed, 'utf8') });
  if (seed.networkConfig !== undefined) {
    files.push({ name: 'network-config', data: Buffer.from(seed.networkConfig, 'utf8') });
  }
  return buildIso9660({ volumeId: SEED_VOLUME_ID, files });
}
