/**
 * Volume downloads (lib/libvirt/vol-download.ts) against a scripted daemon: the content is
 * collected within `maxBytes`; the caller's abort ends the download with LibvirtAbortedError and
 * the budget with LibvirtTimeoutError (aborted is not timed out), each killing the connection.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { LibvirtConnection } from '../../lib/libvirt/connection.ts';
import {
  LibvirtAbortedError,
  LibvirtConnectionError,
  LibvirtError,
  LibvirtProtocolError,
  LibvirtTimeoutError,
} from '../../lib/libvirt/errors.ts';
import { downloadStream } from '../../lib/libvirt/vol-download.ts';
import { frame, pairWithPeer, rejectionOf, WIRE, within } from '../support/fake-daemon.ts';
import type { ScriptedPeer, WirePacket } from '../support/fake-daemon.ts';

const STORAGE_VOL_DOWNLOAD = 209; // remote_protocol.x, as a literal
const ARGS = new Uint8Array(4);

const open: { conn: LibvirtConnection; peer: ScriptedPeer }[] = [];
function rig(): { conn: LibvirtConnection; peer: ScriptedPeer } {
  const { client, peer } = pairWithPeer();
  const r = { conn: new LibvirtConnection(client, { label: 'test' }), peer };
  open.push(r);
  return r;
}
afterEach(() => {
  for (const r of open.splice(0)) {
    r.conn.kill(new Error('test over'));
    r.peer.dispose();
  }
});

const data = (call: WirePacket, bytes: Buffer): Buffer =>
  frame({ proc: call.proc, type: WIRE.STREAM, serial: call.serial, status: WIRE.CONTINUE }, bytes);

describe('downloadStream', () => {
  it('collects the data, finishes, and resolves on the daemon confirmation', async () => {
    const { conn, peer } = rig();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 2_000 });
    const call = await peer.nextCall();
    peer.reply(call);
    peer.send(data(call, Buffer.from('{"v":1}')));
    peer.send(data(call, Buffer.alloc(0))); // end of data
    await peer.nextStreamControl(call.serial); // our finish
    peer.streamOk(call);
    assert.equal((await within(p, 1_000)).toString(), '{"v":1}');
  });

  it('an abort mid-download rejects with LibvirtAbortedError (the signal reason as cause) and kills the connection', async () => {
    const { conn, peer } = rig();
    const controller = new AbortController();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 10_000, signal: controller.signal });
    const call = await peer.nextCall();
    peer.reply(call);
    peer.send(data(call, Buffer.from('partial')));
    await new Promise((r) => setTimeout(r, 20));
    const why = new Error('workflow cancelled');
    controller.abort(why);
    const err = await rejectionOf(p, 500);
    assert.ok(err instanceof LibvirtAbortedError, `${err.name}: ${err.message}`);
    assert.equal(err.cause, why);
    assert.ok(conn.isDead);
  });

  it('an abort before the daemon answered the call is LibvirtAbortedError too, not the connection loss', async () => {
    const { conn, peer } = rig();
    const controller = new AbortController();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 10_000, signal: controller.signal });
    await peer.nextCall();
    controller.abort(new Error('workflow cancelled'));
    const err = await rejectionOf(p, 500);
    assert.ok(err instanceof LibvirtAbortedError, `${err.name}: ${err.message}`);
  });

  it('overrunning the budget rejects with LibvirtTimeoutError and kills the connection', async () => {
    const { conn, peer } = rig();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 100 });
    const call = await peer.nextCall();
    peer.reply(call);
    const err = await rejectionOf(p, 1_000);
    assert.ok(err instanceof LibvirtTimeoutError, `${err.name}: ${err.message}`);
    assert.ok(conn.isDead);
  });

  it('more than maxBytes kills the connection with LibvirtProtocolError', async () => {
    const { conn, peer } = rig();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 2_000, maxBytes: 8 });
    const call = await peer.nextCall();
    peer.reply(call);
    peer.send(data(call, Buffer.alloc(9)));
    await rejectionOf(p, 1_000);
    assert.ok(conn.deadReason instanceof LibvirtProtocolError, String(conn.deadReason));
  });

  it("a STREAM/ERROR rejects with the daemon's LibvirtError", async () => {
    const { conn, peer } = rig();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 2_000 });
    const call = await peer.nextCall();
    peer.reply(call);
    peer.send(data(call, Buffer.from('part')));
    peer.streamError(call, { code: 50, domain: 18, message: 'Storage volume not found' });
    const err = await rejectionOf(p, 1_000);
    assert.ok(err instanceof LibvirtError, `${err.name}: ${err.message}`);
    assert.equal(err.libvirtCode, 50);
    assert.equal(conn.isDead, false);
  });

  it('a malformed STREAM/ERROR body kills the connection with LibvirtProtocolError', async () => {
    const { conn, peer } = rig();
    const p = downloadStream(conn, STORAGE_VOL_DOWNLOAD, ARGS, { timeoutMs: 2_000 });
    const call = await peer.nextCall();
    peer.reply(call);
    peer.send(frame({ proc: call.proc, type: WIRE.STREAM, serial: call.serial, status: WIRE.ERROR }, Buffer.alloc(2)));
    const err = await rejectionOf(p, 1_000);
    assert.ok(err instanceof LibvirtConnectionError, `${err.name}: ${err.message}`);
    assert.ok(err.cause instanceof LibvirtProtocolError, String(err.cause));
    assert.equal(conn.deadReason, err.cause);
  });
});
