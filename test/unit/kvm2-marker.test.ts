/**
 * Parsing of base-image markers (lib/kvm2/images/volumes.ts): a valid v1 record is accepted; any
 * other content is debris (a reason string); a marker of a newer version is refused, never debris.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ImageCorruptError } from '../../lib/kvm2/errors.ts';
import { parseMarker } from '../../lib/kvm2/images/ensure.ts';

const valid = {
  v: 1,
  entry: 'lab-a',
  key: 'debian12',
  url: 'https://mirror.example/debian-12.qcow2',
  sha256: 'a'.repeat(64),
  sizeBytes: 123_456,
  capacityBytes: 2 * 1024 ** 3,
  format: 'qcow2',
  verifiedAt: '2026-01-02T03:04:05.000Z',
};

describe('kvm2 image markers', () => {
  it('a valid v1 marker is accepted, trailing NULs and whitespace ignored', () => {
    assert.deepEqual(parseMarker(JSON.stringify(valid), 'qcow2'), valid);
    assert.deepEqual(parseMarker(`${JSON.stringify(valid)}\n\0\0`, 'qcow2'), valid);
  });

  it('anything else is debris, with a reason', () => {
    const bad: string[] = [
      '',
      'this is not json',
      'null',
      '[]',
      '42',
      JSON.stringify({ ...valid, v: 0 }),
      JSON.stringify({ ...valid, sha256: 'A'.repeat(64) }),
      JSON.stringify({ ...valid, sha256: 'abc' }),
      JSON.stringify({ ...valid, url: 7 }),
      JSON.stringify({ ...valid, entry: undefined }),
      JSON.stringify({ ...valid, sizeBytes: 0 }),
      JSON.stringify({ ...valid, sizeBytes: 1.5 }),
      JSON.stringify({ ...valid, capacityBytes: '1' }),
      JSON.stringify({ ...valid, format: 'raw' }),
      JSON.stringify({ ...valid, verifiedAt: undefined }),
    ];
    for (const text of bad) {
      const got = parseMarker(text, 'qcow2');
      assert.equal(typeof got, 'string', text);
    }
  });

  it('a marker of a newer version is refused (Permanent), not treated as debris', () => {
    assert.throws(
      () => parseMarker(JSON.stringify({ ...valid, v: 2 }), 'qcow2', 'base-lab-a-debian12.qcow2'),
      (err: unknown) => {
        assert.ok(err instanceof ImageCorruptError);
        assert.equal(err.kind, 'Permanent');
        assert.match(err.message, /base-lab-a-debian12\.qcow2.*version 2/);
        return true;
      },
    );
  });
});
