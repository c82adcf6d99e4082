/**
 * egressctl against an https API (cli/http.ts): an untrusted certificate, a certificate for
 * another name and a plain-HTTP API each end in exit 5 with a message saying what to do; a real
 * HTTPS server (certificate by openssl) gives the untrusted case, and --cacert's CA (ApiTarget.ca)
 * makes it trusted, in place of the system's CAs.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { api, CliError, EXIT, readCa, tlsHint } from '../../cli/http.ts';
import { makeCa, makeServerCert } from '../support/tls-certs.ts';

describe('egressctl over https', { timeout: 60_000 }, () => {
  let dir: string;
  let server: https.Server;
  let base: URL;
  let caFile: string;
  let otherCaFile: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-cli-tls-'));
    const ca = await makeCa(dir, 'ca');
    caFile = ca.cert;
    otherCaFile = (await makeCa(dir, 'other-ca')).cert;
    const cert = await makeServerCert(dir, ca, 'api');
    server = https.createServer({ cert: await readFile(cert.cert), key: await readFile(cert.key) }, (_req, res) =>
      res.end('{}'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  it('a certificate from a CA it does not trust: exit 5, naming NODE_EXTRA_CA_CERTS', async () => {
    await assert.rejects(api({ base, token: undefined, timeoutMs: 10_000 }, 'GET', '/healthz'), (err: Error) => {
      assert.ok(err instanceof CliError);
      assert.equal(err.code, EXIT.unavailable);
      assert.match(err.message, /^the API at https:\/\/127\.0\.0\.1:\d+ did not answer: .*NODE_EXTRA_CA_CERTS/);
      return true;
    });
  });

  it("--cacert with the API's CA: the call succeeds; with another CA: exit 5, naming --cacert", async () => {
    const ok = await api({ base, token: undefined, timeoutMs: 10_000, ca: await readCa(caFile), caFile }, 'GET', '/');
    assert.equal(ok.status, 200);
    const other = { base, token: undefined, timeoutMs: 10_000, ca: await readCa(otherCaFile), caFile: otherCaFile };
    await assert.rejects(api(other, 'GET', '/'), (err: Error) => {
      assert.ok(err instanceof CliError);
      assert.equal(err.code, EXIT.unavailable);
      assert.ok(err.message.includes(`not signed by a CA in --cacert ${otherCaFile}`), err.message);
      return true;
    });
  });

  it('--cacert naming a missing file or one without a certificate: a usage error naming the file', async () => {
    const missing = join(dir, 'missing.pem');
    await assert.rejects(
      readCa(missing),
      (err: CliError) => err.code === EXIT.usage && /--cacert .*missing\.pem/.test(err.message),
    );
    const junk = join(dir, 'junk.pem');
    await writeFile(junk, 'not a certificate\n');
    await assert.rejects(
      readCa(junk),
      (err: CliError) => err.code === EXIT.usage && /holds no PEM certificate/.test(err.message),
    );
  });

  it('the hint per TLS failure, and none for plain HTTP or other failures', () => {
    const at = new URL('https://api.example:8443');
    assert.match(tlsHint({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' }, at) ?? '', /does not name api\.example/);
    assert.match(tlsHint({ code: 'CERT_HAS_EXPIRED' }, at) ?? '', /has expired/);
    assert.match(tlsHint({ code: 'SELF_SIGNED_CERT_IN_CHAIN' }, at) ?? '', /NODE_EXTRA_CA_CERTS/);
    assert.equal(tlsHint({ code: 'ECONNREFUSED' }, at), undefined);
    assert.equal(tlsHint({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' }, new URL('http://127.0.0.1:8080')), undefined);
    assert.equal(tlsHint(new Error('x'), at), undefined);
  });
});
