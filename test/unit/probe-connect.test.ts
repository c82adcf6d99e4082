// The CONNECT probe against a scripted peer on loopback: success, refusal, garbage, an oversized
// head, a peer that closes, one that stalls (bounded by the timeout) and an abort.
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { connectProbe, PROBE_MAX_HEAD_BYTES } from '../../lib/probe/connect.ts';
import { ProbeFailedError } from '../../lib/probe/errors.ts';

type Script = (sock: net.Socket, request: string) => void;
let script: Script = () => undefined;
let lastRequest = '';
let server: net.Server;
let port = 0;

before(async () => {
  server = net.createServer((sock) => {
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      if (buf.includes('\r\n\r\n')) {
        lastRequest = buf;
        script(sock, buf);
      }
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(() => server.close());

const dial = (): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });

async function probeFails(code: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
  const sock = await dial();
  await assert.rejects(
    connectProbe(sock, { target: 'target.test:8443', timeoutMs: options.timeoutMs ?? 2000, signal: options.signal }),
    (err: unknown) => err instanceof ProbeFailedError && err.code === code && err.kind === 'Transient',
  );
  assert.equal(sock.destroyed, true, 'the stream is destroyed after a failed probe');
}

describe('connectProbe', () => {
  it('sends CONNECT with the target and resolves on 200 with a latency', async () => {
    script = (sock) => sock.write('HTTP/1.1 200 Connection established\r\n\r\n');
    const sock = await dial();
    const r = await connectProbe(sock, { target: 'target.test:8443', timeoutMs: 2000 });
    assert.equal(r.status, 200);
    assert.ok(r.latencyMs >= 0 && r.latencyMs < 2000);
    assert.match(lastRequest, /^CONNECT target\.test:8443 HTTP\/1\.1\r\nHost: target\.test:8443\r\n/);
    assert.equal(sock.destroyed, true);
  });

  it('reads a head split across many chunks', async () => {
    script = (sock) => {
      const text = 'HTTP/1.0 200 OK\r\nVia: squid\r\n\r\n';
      let i = 0;
      const t = setInterval(() => {
        if (i >= text.length) return clearInterval(t);
        sock.write(text[i++]!);
      }, 1);
    };
    const r = await connectProbe(await dial(), { target: 'target.test:8443', timeoutMs: 5000 });
    assert.equal(r.status, 200);
  });

  it('a 403 from an ACL is PROBE_REFUSED with the status', async () => {
    script = (sock) => sock.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
    const sock = await dial();
    await assert.rejects(connectProbe(sock, { target: 'target.test:8443', timeoutMs: 2000 }), (err: unknown) => {
      assert.ok(err instanceof ProbeFailedError);
      assert.equal(err.code, 'PROBE_REFUSED');
      assert.equal(err.status, 403);
      assert.match(err.message, /403 Forbidden/);
      return true;
    });
  });

  it('a non-HTTP answer is PROBE_BAD_RESPONSE', async () => {
    script = (sock) => sock.write('SSH-2.0-OpenSSH\r\n\r\n');
    await probeFails('PROBE_BAD_RESPONSE');
  });

  it(`a head over ${PROBE_MAX_HEAD_BYTES} bytes is PROBE_BAD_RESPONSE, not buffered without bound`, async () => {
    script = (sock) => sock.write('HTTP/1.1 200 OK\r\n' + 'X: '.padEnd(PROBE_MAX_HEAD_BYTES * 2, 'a'));
    await probeFails('PROBE_BAD_RESPONSE');
  });

  it('a peer that closes first is PROBE_CLOSED', async () => {
    script = (sock) => sock.end();
    await probeFails('PROBE_CLOSED');
  });

  it('a peer that never answers is PROBE_TIMEOUT at the bound', async () => {
    script = () => undefined;
    const t0 = performance.now();
    await probeFails('PROBE_TIMEOUT', { timeoutMs: 150 });
    const took = performance.now() - t0;
    assert.ok(took >= 140 && took < 2000, `took ${took} ms`);
  });

  it('an abort ends the probe with PROBE_ABORTED', async () => {
    script = () => undefined;
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('cancelled')), 50);
    await probeFails('PROBE_ABORTED', { timeoutMs: 5000, signal: ac.signal });
  });

  it('refuses a malformed target before sending anything', async () => {
    const sock = await dial();
    await assert.rejects(connectProbe(sock, { target: 'a b\r\nX: y', timeoutMs: 1000 }), RangeError);
    assert.equal(sock.destroyed, true);
  });

  it('sends Proxy-Authorization when given (a proxy that requires credentials), and none otherwise', async () => {
    script = (sock) => sock.write('HTTP/1.1 200 Connection established\r\n\r\n');
    await connectProbe(await dial(), { target: 'target.test:8443', timeoutMs: 2000 });
    assert.doesNotMatch(lastRequest, /Proxy-Authorization/i);
    await connectProbe(await dial(), {
      target: 'target.test:8443',
      timeoutMs: 2000,
      proxyAuthorization: 'Basic cHJvYmU6c2VjcmV0',
    });
    assert.match(lastRequest, /\r\nProxy-Authorization: Basic cHJvYmU6c2VjcmV0\r\n\r\n$/);
  });

  it('refuses a Proxy-Authorization with CR or LF before sending anything', async () => {
    const sock = await dial();
    await assert.rejects(
      connectProbe(sock, { target: 'target.test:8443', timeoutMs: 1000, proxyAuthorization: 'Basic x\r\nX: y' }),
      RangeError,
    );
    assert.equal(sock.destroyed, true);
  });
});
