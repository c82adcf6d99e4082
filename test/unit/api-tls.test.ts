/**
 * api/tls.ts and the TLS side of api/server.ts: the settings (flags over EP_API_TLS_*), which
 * listen addresses are loopback, the refusal of plain HTTP elsewhere, the checks of the
 * certificate and key files (certificates made by openssl here), and buildApi serving HTTP/1.1
 * and HTTP/2 by ALPN, whose certificate setSecureContext replaces for new connections.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionOptions, TLSSocket } from 'node:tls';
import { connect, Server as TlsServer } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { ApiTlsError, apiTlsSettings, checkListen, isLoopbackHost, loadTlsFiles } from '../../api/tls.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeStore } from '../support/fake-store.ts';
import { makeCa, makeServerCert } from '../support/tls-certs.ts';
import type { TestCa, TestServerCert } from '../support/tls-certs.ts';

describe('apiTlsSettings', () => {
  it('takes the flags, or EP_API_TLS_CERT and EP_API_TLS_KEY; a flag wins', () => {
    const env = { EP_API_TLS_CERT: '/env/c.pem', EP_API_TLS_KEY: '/env/k.pem' };
    assert.deepEqual(apiTlsSettings({}, env), {
      files: { cert: '/env/c.pem', key: '/env/k.pem' },
      insecureListen: false,
    });
    assert.deepEqual(apiTlsSettings({ 'tls-cert': '/f/c.pem' }, env).files, { cert: '/f/c.pem', key: '/env/k.pem' });
    assert.deepEqual(apiTlsSettings({}, {}), { insecureListen: false });
  });

  it('a certificate without its key (or the reverse) names both flags', () => {
    assert.throws(() => apiTlsSettings({ 'tls-cert': 'c.pem' }, {}), {
      name: 'ApiTlsError',
      message: /--tls-cert needs --tls-key .*EP_API_TLS_CERT and EP_API_TLS_KEY/,
    });
    assert.throws(() => apiTlsSettings({}, { EP_API_TLS_KEY: 'k.pem' }), { message: /--tls-key needs --tls-cert/ });
    assert.throws(() => apiTlsSettings({ 'tls-key': '' }, {}), { message: /--tls-key must not be empty/ });
  });

  it('--insecure-listen, or EP_API_INSECURE_LISTEN true/1; another value is refused', () => {
    assert.equal(apiTlsSettings({ 'insecure-listen': true }, {}).insecureListen, true);
    assert.equal(apiTlsSettings({}, { EP_API_INSECURE_LISTEN: 'true' }).insecureListen, true);
    assert.equal(apiTlsSettings({}, { EP_API_INSECURE_LISTEN: '1' }).insecureListen, true);
    assert.equal(apiTlsSettings({}, { EP_API_INSECURE_LISTEN: 'false' }).insecureListen, false);
    assert.throws(() => apiTlsSettings({}, { EP_API_INSECURE_LISTEN: 'yes' }), {
      message: /EP_API_INSECURE_LISTEN must be true or false, got "yes"/,
    });
  });
});

describe('isLoopbackHost and checkListen', () => {
  const loopback = ['127.0.0.1', '127.1.2.3', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', 'localhost'];
  const other = ['0.0.0.0', '::', '10.0.0.1', '192.0.2.1', '::2', 'fe80::1', 'example.com', 'localhost.example'];
  for (const h of loopback) it(`${h} is loopback`, () => assert.equal(isLoopbackHost(h), true));
  for (const h of other) it(`${h} is not loopback`, () => assert.equal(isLoopbackHost(h), false));

  it('plain HTTP on a non-loopback address is refused, naming --insecure-listen and --tls-cert', () => {
    assert.throws(
      () => checkListen('0.0.0.0', { insecureListen: false }),
      (err: Error) => {
        assert.ok(err instanceof ApiTlsError);
        assert.match(err.message, /^--listen 0\.0\.0\.0 is not a loopback address/);
        assert.match(err.message, /--tls-cert FILE and --tls-key FILE/);
        assert.match(err.message, /--insecure-listen \(env EP_API_INSECURE_LISTEN=true\)/);
        return true;
      },
    );
    assert.throws(() => checkListen('api.example', { insecureListen: false }), {
      message: /^--listen api\.example is a name other than localhost/,
    });
  });

  it('loopback without TLS, anywhere with TLS, and anywhere with --insecure-listen are allowed', () => {
    checkListen('127.0.0.1', { insecureListen: false });
    checkListen('::1', { insecureListen: false });
    checkListen('0.0.0.0', { insecureListen: false, files: { cert: 'c', key: 'k' } });
    checkListen('::', { insecureListen: true });
  });
});

describe('loadTlsFiles and buildApi over TLS', { timeout: 60_000 }, () => {
  let dir: string;
  let ca: TestCa;
  let first: TestServerCert;
  let second: TestServerCert;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-api-tls-'));
    ca = await makeCa(dir, 'ca');
    first = await makeServerCert(dir, ca, 'first');
    second = await makeServerCert(dir, ca, 'second');
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('reads a matching pair and says its serial and fingerprint', async () => {
    const m = await loadTlsFiles({ cert: first.cert, key: first.key });
    assert.equal(m.serial, first.serial);
    assert.equal(m.fingerprint256, first.fingerprint256);
    assert.equal(m.subject, 'CN=localhost');
    assert.match(m.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    assert.equal(m.expired, false);
    assert.equal((await loadTlsFiles(first, new Date(Date.now() + 3 * 86_400_000))).expired, true);
  });

  it('a key of another certificate is refused, naming both files and the serial', async () => {
    await assert.rejects(loadTlsFiles({ cert: first.cert, key: second.key }), (err: Error) => {
      assert.ok(err instanceof ApiTlsError);
      assert.ok(err.message.includes(`--tls-key ${second.key} is not the key of the certificate in --tls-cert`));
      assert.ok(err.message.includes(first.serial));
      return true;
    });
  });

  it('a missing file, a file that is not PEM, and a key in the certificate flag each name the flag', async () => {
    await assert.rejects(loadTlsFiles({ cert: join(dir, 'absent.pem'), key: first.key }), {
      message: /^cannot read --tls-cert .*absent\.pem: ENOENT/,
    });
    const junk = join(dir, 'junk.pem');
    await writeFile(junk, 'not a certificate\n');
    await assert.rejects(loadTlsFiles({ cert: junk, key: first.key }), {
      message: /^--tls-cert .*junk\.pem holds no PEM certificate/,
    });
    await assert.rejects(loadTlsFiles({ cert: first.key, key: first.key }), { message: /holds no PEM certificate/ });
    await assert.rejects(loadTlsFiles({ cert: first.cert, key: junk }), {
      message: /^--tls-key .*junk\.pem holds no unencrypted PEM private key/,
    });
  });

  describe('buildApi with tls', () => {
    let app: FastifyInstance;
    let port: number;
    const caPem = (): Promise<Buffer> => readFile(ca.cert);

    before(async () => {
      const m = await loadTlsFiles(first);
      app = await buildApi({
        store: new FakeStore(),
        log: createLogger({ name: 'api-tls-test', stream: 'stderr', level: 'warn' }),
        auth: new TokenAuth([{ token: '0123456789abcdef0123', role: 'admin' }]),
        taskQueue: 'tq',
        tls: m,
      });
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/);
      port = Number(new URL(url).port);
    });
    after(() => app?.close());

    /** One HTTPS/1.1 GET: status, the negotiated protocol and the served certificate's serial. */
    const get11 = async (path: string, ca?: Buffer): Promise<{ status: number; alpn: string; serial: string }> => {
      const ca2 = ca ?? (await caPem());
      return new Promise((resolve, reject) => {
        const opts: https.RequestOptions & ConnectionOptions = {
          ...{
            host: '127.0.0.1',
            port,
            path,
            ca: ca2,
            ALPNProtocols: ['http/1.1'],
            agent: false,
            timeout: 10_000,
          },
        };
        const req = https.get(opts, (res) => {
          const s = res.socket as TLSSocket;
          const out = {
            status: res.statusCode ?? 0,
            alpn: String(s.alpnProtocol),
            serial: s.getPeerCertificate().serialNumber,
          };
          res.resume();
          res.on('end', () => resolve(out));
        });
        req.on('timeout', () => req.destroy(new Error('timed out')));
        req.on('error', reject);
      });
    };

    it('answers HTTP/1.1 when the client offers only http/1.1', async () => {
      const r = await get11('/healthz');
      assert.deepEqual(r, { status: 200, alpn: 'http/1.1', serial: first.serial });
    });

    it('answers HTTP/1.1 to a client that offers no ALPN', async () => {
      const ca = await caPem();
      const answer = await new Promise<{ alpn: unknown; head: string }>((resolve, reject) => {
        const sock = connect({ host: '127.0.0.1', port, ca, servername: 'localhost', timeout: 10_000 }, () =>
          sock.end('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'),
        );
        let text = '';
        sock.setEncoding('utf8');
        sock.on('data', (d: string) => (text += d));
        sock.on('end', () => resolve({ alpn: sock.alpnProtocol, head: text.split('\r\n')[0] ?? '' }));
        sock.on('timeout', () => sock.destroy(new Error('timed out')));
        sock.on('error', reject);
      });
      assert.deepEqual(answer, { alpn: false, head: 'HTTP/1.1 200 OK' });
    });

    it('answers HTTP/2, with the bearer-token check as over HTTP/1.1', async () => {
      const session = http2.connect(`https://127.0.0.1:${port}`, { ca: await caPem() });
      try {
        const ask = (headers: http2.OutgoingHttpHeaders): Promise<number> =>
          new Promise((resolve, reject) => {
            const req = session.request(headers);
            req.setTimeout(10_000, () => req.close());
            req.on('response', (h) => resolve(Number(h[':status'])));
            req.on('error', reject);
            req.resume();
            req.end();
          });
        assert.equal(await ask({ ':path': '/healthz' }), 200);
        assert.equal(await ask({ ':path': '/v1/proxies' }), 401);
        assert.equal(await ask({ ':path': '/v1/proxies', authorization: 'Bearer 0123456789abcdef0123' }), 200);
        assert.equal((session.socket as TLSSocket).alpnProtocol, 'h2');
      } finally {
        session.close();
      }
    });

    it('a client that trusts another CA is refused', async () => {
      const other = await makeCa(dir, 'other-ca');
      await assert.rejects(get11('/healthz', await readFile(other.cert)), {
        code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      });
    });

    it('setSecureContext with a new pair serves it to new connections, over HTTP/1.1 and HTTP/2', async () => {
      assert.ok(app.server instanceof TlsServer);
      const m = await loadTlsFiles(second);
      app.server.setSecureContext({ cert: m.cert, key: m.key });
      assert.equal((await get11('/healthz')).serial, second.serial);
      const session = http2.connect(`https://127.0.0.1:${port}`, { ca: await caPem() });
      try {
        await new Promise<void>((resolve, reject) => session.once('connect', () => resolve()).once('error', reject));
        const s = session.socket as TLSSocket;
        assert.equal(s.alpnProtocol, 'h2');
        assert.equal(s.getPeerCertificate().serialNumber, second.serial);
      } finally {
        session.close();
      }
    });
  });
});
