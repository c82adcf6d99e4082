/**
 * A verified base for provider-level integration tests: an empty qcow2 uploaded as
 * `base-<entry>-<key>.qcow2` with the marker ensureImage writes after verifying a base (H4), so
 * createProxy accepts it as the entry's verified base without an image fetch.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { HostLinks } from '../../lib/hostlink/pool.ts';
import { baseVolumeName, markerVolumeName } from '../../lib/kvm2/index.ts';
import { emptyQcow2 } from './empty-image.ts';

export interface VerifiedBase {
  name: string;
  markerName: string;
  path: string;
}

/** Uploads an empty 64 MiB qcow2 base and its marker into `pool`; returns where the base is. */
export async function plantVerifiedBase(
  links: HostLinks,
  pool: string,
  entry: string,
  key = 'empty',
): Promise<VerifiedBase> {
  const tmp = await mkdtemp(join(tmpdir(), 'ep-base-'));
  try {
    const bytes = await emptyQcow2(tmp);
    const name = baseVolumeName(entry, key, 'qcow2');
    const markerName = markerVolumeName(entry, key, 'qcow2');
    const marker = Buffer.from(
      JSON.stringify({
        v: 1,
        entry,
        key,
        url: `http://127.0.0.1/${entry}/${key}.qcow2`,
        sha256: createHash('sha256').update(bytes).digest('hex'),
        sizeBytes: bytes.length,
        capacityBytes: 64 * 1024 * 1024,
        format: 'qcow2',
        verifiedAt: new Date().toISOString(),
      }),
    );
    const path = await links.call(async (c, call) => {
      const p = await c.storagePoolLookupByName(pool, call);
      const raw = (n: string, size: number): string =>
        `<volume><name>${n}</name><capacity unit='bytes'>${size}</capacity><target><format type='raw'/></target></volume>`;
      const vol = await c.storageVolCreateXml(p, raw(name, bytes.length), 0, call);
      await c.storageVolUpload(vol, Readable.from([bytes]));
      const m = await c.storageVolCreateXml(p, raw(markerName, marker.length), 0, call);
      await c.storageVolUpload(m, Readable.from([marker]));
      return c.storageVolGetPath(vol, call);
    });
    return { name, markerName, path };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Deletes the base and its marker (errors ignored: cleanup). */
export async function removeVerifiedBase(links: HostLinks, pool: string, base: VerifiedBase): Promise<void> {
  for (const n of [base.name, base.markerName]) {
    await links
      .call(async (c, call) => {
        const p = await c.storagePoolLookupByName(pool, call);
        await c.storageVolDelete(await c.storageVolLookupByName(p, n, call), 0, call);
      })
      .catch(() => {});
  }
}
