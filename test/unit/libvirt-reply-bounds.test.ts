/**
 * Replies that carry guest-reported data (REPLY_MAX_BYTES in lib/libvirt/client.ts) are refused
 * above their bound before anything is decoded: that call fails with LibvirtProtocolError and the
 * connection stays up for the next one.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { LibvirtClient, REPLY_MAX_BYTES } from '../../lib/libvirt/client.ts';
import { LibvirtConnection } from '../../lib/libvirt/connection.ts';
import { LibvirtProtocolError } from '../../lib/libvirt/errors.ts';
import { pairWithPeer, rejectionOf, within, xdr } from '../support/fake-daemon.ts';
import type { ScriptedPeer } from '../support/fake-daemon.ts';

const DOMAIN_INTERFACE_ADDRESSES = 353; // remote_protocol.x, as a literal
const domain = { name: 'ep_lab_p1', uuid: new Uint8Array(16), id: 1 };

const open: { conn: LibvirtConnection; peer: ScriptedPeer }[] = [];
afterEach(() => {
  for (const r of open.splice(0)) {
    r.conn.kill(new Error('test over'));
    r.peer.dispose();
  }
});

describe('reply bounds', () => {
  it('an agent reply over its bound fails the call, undecoded, and leaves the connection up', async () => {
    const { client, peer } = pairWithPeer();
    const conn = new LibvirtConnection(client, { label: 'test' });
    open.push({ conn, peer });
    const c = new LibvirtClient(conn);
    const bound = REPLY_MAX_BYTES.get(DOMAIN_INTERFACE_ADDRESSES)!;
    const tooBig = c.domainInterfaceAddresses(domain, 1, { timeoutMs: 2_000 });
    const call = await peer.nextCall();
    assert.equal(call.proc, DOMAIN_INTERFACE_ADDRESSES);
    peer.reply(call, xdr.cat(xdr.u32(0), Buffer.alloc(bound)));
    const err = await rejectionOf(tooBig, 1_000);
    assert.ok(err instanceof LibvirtProtocolError, String(err));
    assert.match(err.message, /over its 1048576-byte bound/);
    assert.equal(conn.isDead, false);
    const fine = c.domainInterfaceAddresses(domain, 1, { timeoutMs: 2_000 });
    peer.reply(await peer.nextCall(), xdr.u32(0));
    assert.deepEqual(await within(fine, 1_000), []);
  });
});
