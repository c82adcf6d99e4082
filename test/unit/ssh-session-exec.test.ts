/**
 * SshSession.exec against a stand-in ssh2 Client (this module's unit test): the exit status of a
 * command that finishes at once. ssh2 parses every packet of one read in one go, so the reply to
 * the exec request, the `exit-status` request, EOF and CLOSE of a fast command can all be handled
 * before the promise that hands the channel over has resumed its caller. ssh2 emits `exit` once,
 * synchronously, and keeps no listener-free copy we may read: a listener attached after the open
 * misses it and the command reads as having no exit status.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import type { Client } from 'ssh2';
import type { Socket } from 'node:net';
import { SshSession } from '../../lib/ssh/session.ts';

/** A channel like ssh2's: a Duplex with a `stderr` stream. */
function channel(): PassThrough & { stderr: PassThrough } {
  return Object.assign(new PassThrough(), { stderr: new PassThrough() });
}

/**
 * A Client whose `exec` hands over the channel and then, in the same tick (as ssh2 does when the
 * packets arrive in one read), emits its exit status and ends it with `output`.
 */
function clientFinishingAtOnce(exitCode: number | null, output = ''): Client {
  const client = new EventEmitter() as EventEmitter & { exec: unknown };
  client.exec = (_command: string, cb: (err: Error | undefined, ch: unknown) => void): void => {
    const ch = channel();
    cb(undefined, ch);
    ch.emit('exit', exitCode);
    ch.end(output);
  };
  return client as unknown as Client;
}

function session(client: Client): SshSession {
  const socket = new PassThrough() as unknown as Socket;
  return new SshSession({
    client,
    socket,
    host: 'h',
    port: 22,
    user: 'u',
    hostKeyFingerprint: 'SHA256:x',
    negotiated: undefined,
    logger: undefined,
    stockWrites: true,
  });
}

describe('SshSession.exec of a command that finishes in the tick its channel opens', () => {
  it('reports exit code 0, not "no exit status"', async () => {
    const result = await session(clientFinishingAtOnce(0)).exec('true', { timeoutMs: 2000, maxBytes: 1024 });
    assert.equal(result.code, 0);
  });

  it('reports a non-zero exit code and the output', async () => {
    const result = await session(clientFinishingAtOnce(3, 'out\n')).exec('x', { timeoutMs: 2000, maxBytes: 1024 });
    assert.deepEqual({ code: result.code, stdout: result.stdout.toString() }, { code: 3, stdout: 'out\n' });
  });

  it('reports no exit code for a command ended by a signal', async () => {
    const result = await session(clientFinishingAtOnce(null)).exec('x', { timeoutMs: 2000, maxBytes: 1024 });
    assert.equal(result.code, undefined);
  });
});
