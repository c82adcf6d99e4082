/**
 * The adoption guard (lib/kvm2/proxy/adoption-guard.ts, assertOwned): the provider acts only on a
 * domain whose mark names this installation's owner UID and the expected provider entry.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kvm2AdoptionRefusedError } from '../../lib/kvm2/errors.ts';
import { assertOwned } from '../../lib/kvm2/proxy/adoption-guard.ts';
import type { OwnerMetadata } from '../../lib/kvm2/proxy/domain-xml.ts';

const OWNER = '7f1c2a9e-0000-4000-8000-000000000001';
const mark: OwnerMetadata = {
  ownerUid: OWNER,
  proxyName: 'p1',
  providerEntry: 'lab',
  createdAt: '2025-01-01T00:00:00Z',
};

function refusal(fn: () => unknown): Kvm2AdoptionRefusedError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof Kvm2AdoptionRefusedError, String(err));
    assert.equal(err.kind, 'Permanent');
    return err;
  }
  assert.fail('not refused');
}

describe('assertOwned', () => {
  it('returns the mark when it names this owner and this entry', () => {
    assert.equal(assertOwned('ep_lab_p1', mark, OWNER, 'lab'), mark);
  });

  it('refuses a domain without the mark, naming the domain and the remedy', () => {
    const err = refusal(() => assertOwned('ep_lab_p1', undefined, OWNER, 'lab'));
    assert.match(err.message, /ep_lab_p1 exists but lacks the egress-proxies mark/);
  });

  it('refuses a domain of another owner', () => {
    const err = refusal(() => assertOwned('ep_lab_p1', { ...mark, ownerUid: 'someone-else' }, OWNER, 'lab'));
    assert.match(err.message, /belongs to owner someone-else/);
  });

  it('refuses a domain of another provider entry of this owner', () => {
    const err = refusal(() => assertOwned('ep_lab_p1', { ...mark, providerEntry: 'lab-b' }, OWNER, 'lab'));
    assert.match(err.message, /belongs to provider entry lab-b, not lab/);
  });
});
