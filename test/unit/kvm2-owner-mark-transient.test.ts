/**
 * readOwnerMark (lib/kvm2/proxy/adoption-guard.ts) on a transient domain: libvirt refuses the
 * persistent-config metadata read with OPERATION_INVALID, and the domain is read as unmarked (never
 * ours) instead of failing the host survey or the GC listing; other errors still propagate.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { LibvirtClient } from '../../lib/libvirt/client.ts';
import { ErrorNumber, Proc } from '../../lib/libvirt/constants.ts';
import { LibvirtError } from '../../lib/libvirt/errors.ts';
import { readOwnerMark } from '../../lib/kvm2/proxy/adoption-guard.ts';

const dom = { name: 'someone-elses', uuid: new Uint8Array(16), id: 3 };

function failing(code: number, message: string): LibvirtClient {
  return {
    domainGetMetadata: () => Promise.reject(new LibvirtError({ code, domain: 10, message }, Proc.DOMAIN_GET_METADATA)),
  } as unknown as LibvirtClient;
}

it('a transient domain (no persistent config) has no mark; a failing daemon still fails the read', async () => {
  const transient = failing(
    ErrorNumber.OPERATION_INVALID,
    'Requested operation is not valid: transient domains do not have any persistent config',
  );
  assert.equal(await readOwnerMark(transient, dom), undefined);
  assert.equal(await readOwnerMark(failing(ErrorNumber.NO_DOMAIN_METADATA, 'no metadata'), dom), undefined);
  await assert.rejects(readOwnerMark(failing(1, 'internal error'), dom), LibvirtError);
});
