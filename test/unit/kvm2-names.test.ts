/**
 * Volume names of the kvm2 provider (lib/kvm2/images/base-names.ts): the base and marker names per provider
 * entry, and the identifier rule that keeps them safe in file names and XML.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kvm2NameError } from '../../lib/kvm2/errors.ts';
import { baseVolumeName, markerVolumeName } from '../../lib/kvm2/images/base-names.ts';
import { checkIdentifier } from '../../lib/kvm2/identifier.ts';
import { isIdentifier, MAX_IDENTIFIER_LENGTH } from '../../lib/rules.ts';
import type { ImageFormat } from '../../lib/kvm2/images/base-names.ts';

describe('kvm2 volume names', () => {
  it('base and marker names carry the entry, the key and the format', () => {
    assert.equal(baseVolumeName('lab-a', 'debian12', 'qcow2'), 'base-lab-a-debian12.qcow2');
    assert.equal(baseVolumeName('e', 'k', 'raw'), 'base-e-k.raw');
    assert.equal(markerVolumeName('lab-a', 'debian12', 'qcow2'), 'base-lab-a-debian12.qcow2.marker');
    assert.equal(markerVolumeName('e', 'k', 'raw'), 'base-e-k.raw.marker');
  });

  it('two entries never get the same base for one key (H4)', () => {
    assert.notEqual(baseVolumeName('lab-a', 'debian12', 'qcow2'), baseVolumeName('lab-b', 'debian12', 'qcow2'));
    assert.notEqual(baseVolumeName('lab-a', 'debian12', 'qcow2'), baseVolumeName('lab-a', 'debian12', 'raw'));
  });

  it('identifiers: a lowercase letter, then lowercase letters, digits or "-"', () => {
    for (const ok of ['a', 'lab', 'lab-a', 'debian12', 'x-1-y', 'a'.repeat(MAX_IDENTIFIER_LENGTH)]) {
      assert.equal(isIdentifier(ok), true, ok);
      assert.equal(checkIdentifier('entry', ok), ok);
    }
    const bad: unknown[] = [
      '',
      '1lab',
      '-lab',
      'Lab',
      'lab_a',
      'lab.a',
      'lab/a',
      '../x',
      'lab a',
      'läb',
      'lab\n',
      'a'.repeat(MAX_IDENTIFIER_LENGTH + 1),
      undefined,
      null,
      42,
    ];
    for (const value of bad) assert.equal(isIdentifier(value), false, JSON.stringify(value));
  });

  it('an invalid entry, key or format throws a Permanent Kvm2NameError naming the field', () => {
    const cases: [string, string, string, string][] = [
      ['Lab', 'k', 'raw', 'entry'],
      ['lab', 'deb/12', 'raw', 'image key'],
      ['lab', '', 'qcow2', 'image key'],
      ['lab', 'k', 'vmdk', 'format'],
      ['lab', 'k', 'raw.marker', 'format'],
    ];
    for (const [entry, key, format, field] of cases) {
      for (const build of [baseVolumeName, markerVolumeName]) {
        assert.throws(
          () => build(entry, key, format as ImageFormat),
          (err: unknown) => {
            assert.ok(err instanceof Kvm2NameError);
            assert.equal(err.kind, 'Permanent');
            assert.equal(err.code, 'KVM2_INVALID_NAME');
            assert.equal(err.field, field);
            assert.ok(err.message.startsWith(field), err.message);
            return true;
          },
        );
      }
    }
  });
});
