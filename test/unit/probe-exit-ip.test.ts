// The exit-IP read (lib/probe/exit-ip.ts) through a small CONNECT proxy on loopback to a real
// HTTP server that answers the caller's address: the address the server saw comes back; the
// proxy's refusal, a non-200 answer, a body without an address, an oversized body, a server that
// stalls and an abort each fail with their code; a bad URL is refused before anything is sent.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { EXIT_IP_MAX_BODY_BYTES, exitIpUrlProblem, parseExitIp, readExitIp } from '../../lib/probe/exit-ip.ts';
import { ProbeFailedError } from '../../lib/probe/errors.ts';

/**
 * A minimal CONNECT proxy: tunnels to the asked host:port from its own exit address (127.0.0.2,
 * not the client's 127.0.0.1), or answers 403 for ports in `deny`.
 */
const EXIT = '127.0.0.2';
function startProxy(deny: Set<number>): Promise<{ server: net.Server; port: number; requests: string[] }> {
  const requests: string[] = [];
  const server = net.createServer((client) => {
    client.on('error', () => undefined);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const text = head.subarray(0, end).toString('latin1');
      requests.push(text);
      const m = /^CONNECT ([^ ]+):(\d+) HTTP\/1\.1\r\n/.exec(text);
      if (!m || deny.has(Number(m[2]))) {
        client.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const upstream = net.connect({ port: Number(m[2]), host: m[1]!, localAddress: EXIT }, () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        const rest = head.subarray(end + 4);
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream).pipe(client);
      });
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    };
    client.on('data', onData);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as AddressInfo).port, requests })),
  );
}

let proxy: Awaited<ReturnType<typeof startProxy>>;
let target: http.Server;
let targetPort = 0;
const seen: { remote: string; url: string; headers: http.IncomingHttpHeaders }[] = [];
const sockets = new Set<net.Socket>();

before(async () => {
  target = http.createServer((req, res) => {
    const remote = req.socket.remoteAddress ?? '?';
    seen.push({ remote, url: req.url ?? '', headers: req.headers });
    if (req.url === '/ip')
      res.end(`${remote}\n`); // chunked: no content-length
    else if (req.url === '/json') res.end(JSON.stringify({ ip: remote }));
    else if (req.url === '/missing') res.writeHead(404).end('not here\n');
    else if (req.url === '/words') res.end('hello, you came from somewhere\n');
    else if (req.url === '/big') res.end('1'.repeat(EXIT_IP_MAX_BODY_BYTES + 100));
    else if (req.url === '/stall')
      res.writeHead(200).write('12'); // never ends
    else res.writeHead(500).end();
  });
  target.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  targetPort = (target.address() as AddressInfo).port;
  proxy = await startProxy(new Set([1]));
});
after(() => {
  for (const s of sockets) s.destroy();
  target.close();
  proxy.server.close();
});

const dial = (): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const s = net.connect(proxy.port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });

const url = (path: string, port = targetPort): string => `http://127.0.0.1:${port}${path}`;

async function readFails(
  path: string,
  code: string,
  o: { timeoutMs?: number; signal?: AbortSignal; port?: number } = {},
) {
  const sock = await dial();
  await assert.rejects(
    readExitIp(sock, { url: url(path, o.port), timeoutMs: o.timeoutMs ?? 3000, signal: o.signal }),
    (err: unknown) => {
      assert.ok(err instanceof ProbeFailedError, `a ProbeFailedError, got ${String(err)}`);
      assert.equal(err.code, code, err.message);
      return true;
    },
  );
  assert.equal(sock.destroyed, true, 'the stream is destroyed after a failed read');
}

describe('readExitIp', () => {
  it('returns the address the server saw, through the CONNECT tunnel (plain text, chunked)', async () => {
    const before = seen.length;
    const sock = await dial();
    const from = sock.localAddress;
    const r = await readExitIp(sock, { url: url('/ip'), timeoutMs: 3000, proxyAuthorization: 'Basic cHJvYmU6eA==' });
    // The server saw the proxy's connection, from the proxy's exit address, not the prober's.
    assert.equal(seen.length, before + 1);
    assert.equal(seen.at(-1)!.remote, EXIT);
    assert.equal(r.ip, EXIT);
    assert.equal(from, '127.0.0.1');
    assert.ok(r.latencyMs >= 0 && r.latencyMs < 3000);
    assert.equal(seen.at(-1)!.url, '/ip');
    assert.equal(seen.at(-1)!.headers['proxy-authorization'], undefined, 'credentials go to the proxy only');
    const connect = proxy.requests.at(-1)!;
    assert.match(connect, new RegExp(`^CONNECT 127\\.0\\.0\\.1:${targetPort} HTTP/1\\.1\\r\\n`));
    assert.match(connect, /\r\nProxy-Authorization: Basic cHJvYmU6eA==/);
    assert.equal(sock.destroyed, true);
  });

  it('reads a JSON {"ip": ...} body', async () => {
    const r = await readExitIp(await dial(), { url: url('/json'), timeoutMs: 3000 });
    assert.equal(r.ip, EXIT);
  });

  it('a proxy that refuses the CONNECT is PROBE_REFUSED', async () => {
    await readFails('/ip', 'PROBE_REFUSED', { port: 1 });
  });

  it('a non-200 answer is EXIT_IP_HTTP_STATUS with the status', async () => {
    await readFails('/missing', 'EXIT_IP_HTTP_STATUS');
  });

  it('a body without an address is EXIT_IP_BAD_ANSWER', async () => {
    await readFails('/words', 'EXIT_IP_BAD_ANSWER');
  });

  it(`a body over ${EXIT_IP_MAX_BODY_BYTES} bytes is EXIT_IP_BAD_ANSWER, not buffered without bound`, async () => {
    await readFails('/big', 'EXIT_IP_BAD_ANSWER');
  });

  it('a server that stalls mid-body is PROBE_TIMEOUT at the bound', async () => {
    const t0 = performance.now();
    await readFails('/stall', 'PROBE_TIMEOUT', { timeoutMs: 300 });
    const took = performance.now() - t0;
    assert.ok(took >= 250 && took < 3000, `took ${took} ms`);
  });

  it('an abort ends the read with PROBE_ABORTED', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('cancelled')), 100);
    await readFails('/stall', 'PROBE_ABORTED', { timeoutMs: 5000, signal: ac.signal });
  });

  it('refuses an https://, a credentialed or a malformed URL before sending anything', async () => {
    for (const bad of ['https://127.0.0.1/ip', 'http://u:p@127.0.0.1/ip', 'not a url']) {
      const sock = await dial();
      const count = proxy.requests.length;
      await assert.rejects(readExitIp(sock, { url: bad, timeoutMs: 1000 }), RangeError);
      assert.equal(sock.destroyed, true);
      assert.equal(proxy.requests.length, count, `nothing sent for ${bad}`);
    }
  });
});

describe('exit-IP answers and URLs', () => {
  it('parses plain and JSON addresses, v4 and v6, and nothing else', () => {
    assert.equal(parseExitIp('203.0.113.7\n'), '203.0.113.7');
    assert.equal(parseExitIp(' 2001:db8::1 '), '2001:db8::1');
    assert.equal(parseExitIp('{"ip":"198.51.100.2"}'), '198.51.100.2');
    assert.equal(parseExitIp('{"ip":"nope"}'), undefined);
    assert.equal(parseExitIp('{"origin":"198.51.100.2"}'), undefined);
    assert.equal(parseExitIp('you came from 203.0.113.7'), undefined);
    assert.equal(parseExitIp('{broken'), undefined);
  });

  it('names the problem of a URL that cannot be read', () => {
    assert.equal(exitIpUrlProblem('http://198.51.100.7:8481/ip'), undefined);
    assert.match(exitIpUrlProblem('https://api.example/ip')!, /http:\/\//);
    assert.match(exitIpUrlProblem('ftp://x/ip')!, /http:\/\//);
    assert.match(exitIpUrlProblem('http://u:p@x/ip')!, /credentials/);
    assert.match(exitIpUrlProblem('::')!, /URL/);
  });
});
