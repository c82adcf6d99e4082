/**
 * The API process (bin/api, workers/api.ts) over TLS against the dev server, with real clients:
 * certificates made here by openssl (a CA, two server certificates for 127.0.0.1/::1/localhost,
 * and another CA); curl --cacert over HTTP/1.1 and HTTP/2 (a route that asks Temporal answers
 * 200); a client trusting another CA refused; SIGHUP after the certificate, key and token files
 * are replaced serves the new certificate (its serial, read with openssl s_client) and the new
 * tokens, over HTTP/2 still, while a bad pair on SIGHUP keeps the served one; egressctl with the CA
 * in NODE_EXTRA_CA_CERTS; EP_API_TLS_CERT/KEY in place of the flags; and plain HTTP on a
 * non-loopback --listen refused (exit 2, naming --insecure-listen and the fix) before it binds.
 *
 * Needs: the dev server (scripts/temporal up), openssl and curl (with HTTP/2: Debian's has nghttp2).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { writeTokens } from '../support/api.ts';
import type { TestTokens } from '../support/api.ts';
import { runCommand } from '../support/run.ts';
import { PROJECT_ROOT, pollUntil, uniqueId, withTimeout } from '../support/temporal.ts';
import { makeCa, makeServerCert } from '../support/tls-certs.ts';
import type { TestCa, TestServerCert } from '../support/tls-certs.ts';
import { needTool } from '../support/tools.ts';

const API = join(PROJECT_ROOT, 'bin/api');
const EGRESSCTL = join(PROJECT_ROOT, 'bin/egressctl');

interface ApiProcess {
  child: ChildProcess;
  lines: string[];
  url: string;
  stop(): Promise<void>;
}

/** Starts bin/api with `args` and `env`; resolves once it logs "api listening" with an https URL. */
async function startApi(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ApiProcess> {
  const child = spawn(process.execPath, [API, '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
  });
  const lines: string[] = [];
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      const m = /"url":"(https:\/\/127\.0\.0\.1:\d+)"/.exec(line);
      if (m && line.includes('"api listening"')) resolve(m[1]!);
    });
    createInterface({ input: child.stderr }).on('line', (line) => lines.push(`stderr: ${line}`));
    child.once('exit', (code) => reject(new Error(`the API exited (${code}):\n${lines.join('\n')}`)));
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await withTimeout(exited, 15_000, 'the API process to stop').catch(() => child.kill('SIGKILL'));
  };
  try {
    return { child, lines, url: await withTimeout(listening, 60_000, 'the API process to listen'), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** curl with `args`; stdout's last line is `%{http_code} %{http_version}` after the body. */
async function curl(
  args: string[],
): Promise<{ code: number; status: number; version: string; body: string; stderr: string }> {
  const r = await runCommand('curl', ['-sS', '--max-time', '20', '-w', '\\n%{http_code} %{http_version}', ...args], {
    timeoutMs: 30_000,
  });
  const lines = r.stdout.split('\n');
  const [status = '0', version = ''] = (lines.pop() ?? '').split(' ');
  return { code: r.code, status: Number(status), version, body: lines.join('\n'), stderr: r.stderr };
}

/** The serial of the certificate the server at `port` presents, read with openssl s_client offering h2. */
async function servedSerial(port: number, ca: string): Promise<string> {
  const r = await runCommand(
    'sh',
    [
      '-c',
      `openssl s_client -connect 127.0.0.1:${port} -CAfile "$1" -alpn h2 -verify_return_error </dev/null 2>/dev/null | openssl x509 -noout -serial`,
      'sh',
      ca,
    ],
    { timeoutMs: 20_000 },
  );
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim().replace(/^serial=/, '');
}

describe('the API process over TLS (curl, openssl s_client, egressctl)', { timeout: 300_000 }, () => {
  let dir: string;
  let ca: TestCa;
  let otherCa: TestCa;
  let otherCaPem: Buffer;
  let first: TestServerCert;
  let second: TestServerCert;
  let tokens: TestTokens;
  /** The files the API serves from (first's at start; replaced before SIGHUP). */
  let certFile: string;
  let keyFile: string;
  let api: ApiProcess | undefined;
  let port = 0;
  const taskQueue = uniqueId('api-tls');
  /** Waits (bounded) for a log line after index `from` that includes `text`. */
  const logged = (from: number, text: string): Promise<true> =>
    pollUntil(() => Promise.resolve(api!.lines.slice(from).some((l) => l.includes(text)) || undefined), {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: `the API to log ${text}`,
    });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-api-tls-'));
    ca = await makeCa(dir, 'ca');
    otherCa = await makeCa(dir, 'other-ca');
    otherCaPem = await readFile(otherCa.cert);
    first = await makeServerCert(dir, ca, 'first');
    second = await makeServerCert(dir, ca, 'second');
    certFile = join(dir, 'served.pem');
    keyFile = join(dir, 'served.key');
    await copyFile(first.cert, certFile);
    await copyFile(first.key, keyFile);
    tokens = await writeTokens(dir);
    api = await startApi([
      '--token-file',
      tokens.file,
      '--tls-cert',
      certFile,
      '--tls-key',
      keyFile,
      '--task-queue',
      taskQueue,
    ]);
    port = Number(new URL(api.url).port);
  });

  after(async () => {
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('logs that it serves TLS with the certificate given', () => {
    const line = api!.lines.find((l) => l.includes('"api listening"'))!;
    const logged = JSON.parse(line) as { tls: boolean; cert: { serial: string; fingerprint256: string } };
    assert.equal(logged.tls, true);
    assert.equal(logged.cert.serial, first.serial);
    assert.equal(logged.cert.fingerprint256, first.fingerprint256);
  });

  it('curl --cacert over HTTP/1.1 and over HTTP/2; a route that asks Temporal answers 200', async (t) => {
    if (!(await needTool(t, 'curl', 'curl'))) return;
    const h1 = await curl(['--http1.1', '--cacert', ca.cert, `${api!.url}/healthz`]);
    assert.equal(h1.code, 0, h1.stderr);
    assert.deepEqual([h1.status, h1.version], [200, '1.1']);
    assert.deepEqual(JSON.parse(h1.body), { status: 'ok' });
    const auth = ['-H', `authorization: Bearer ${tokens.reader}`];
    // The list asks the dev server's visibility: 200 shows the request went through to Temporal.
    const h2 = await curl(['--http2', '--cacert', ca.cert, ...auth, `https://localhost:${port}/v1/proxies`]);
    assert.equal(h2.code, 0, h2.stderr);
    assert.deepEqual([h2.status, h2.version], [200, '2'], h2.body);
    assert.ok(Array.isArray((JSON.parse(h2.body) as { proxies?: unknown }).proxies), h2.body);
    const anonymous = await curl(['--http2', '--cacert', ca.cert, `${api!.url}/v1/proxies`]);
    assert.equal(anonymous.status, 401);
  });

  it('a client that trusts another CA is refused, and plain HTTP to the TLS port gets no answer', async (t) => {
    if (!(await needTool(t, 'curl', 'curl'))) return;
    const wrong = await curl(['--cacert', otherCa.cert, `${api!.url}/healthz`]);
    assert.equal(wrong.code, 60, `curl exit 60 is "peer certificate cannot be authenticated": ${wrong.stderr}`);
    assert.match(wrong.stderr, /SSL certificate problem/);
    const node = await new Promise<Error | undefined>((resolve) => {
      const s = connect({ host: '127.0.0.1', port, ca: otherCaPem, timeout: 10_000 });
      s.once('secureConnect', () => (s.destroy(), resolve(undefined)));
      s.once('error', (err: Error) => resolve(err));
      s.once('timeout', () => (s.destroy(), resolve(new Error('timed out'))));
    });
    assert.equal((node as { code?: string } | undefined)?.code, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    const plain = await curl([`http://127.0.0.1:${port}/healthz`]);
    assert.notEqual(plain.status, 200);
  });

  it('egressctl talks to it with the CA in NODE_EXTRA_CA_CERTS or --cacert, and with another CA says which (exit 5)', async () => {
    const args = ['proxy', 'list', '--api', api!.url, '--token-file', tokens.file, '--output', 'json'];
    const ok = await runCommand(EGRESSCTL, args, {
      cwd: PROJECT_ROOT,
      env: { ...process.env, NODE_EXTRA_CA_CERTS: ca.cert },
      timeoutMs: 60_000,
    });
    assert.equal(ok.code, 0, ok.stderr);
    const untrusted = await runCommand(EGRESSCTL, args, {
      cwd: PROJECT_ROOT,
      env: { ...process.env, NODE_EXTRA_CA_CERTS: otherCa.cert },
      timeoutMs: 60_000,
    });
    assert.equal(untrusted.code, 5, untrusted.stderr);
    assert.match(untrusted.stderr, /not signed by a CA in NODE_EXTRA_CA_CERTS/);
    const noExtra = { ...process.env };
    delete noExtra['NODE_EXTRA_CA_CERTS'];
    const withFlag = await runCommand(EGRESSCTL, [...args, '--cacert', ca.cert], {
      cwd: PROJECT_ROOT,
      env: noExtra,
      timeoutMs: 60_000,
    });
    assert.equal(withFlag.code, 0, withFlag.stderr);
    const wrongFlag = await runCommand(EGRESSCTL, args, {
      cwd: PROJECT_ROOT,
      env: { ...noExtra, EGRESSCTL_CACERT: otherCa.cert },
      timeoutMs: 60_000,
    });
    assert.equal(wrongFlag.code, 5, wrongFlag.stderr);
    assert.ok(wrongFlag.stderr.includes(`not signed by a CA in --cacert ${otherCa.cert}`), wrongFlag.stderr);
  });

  it('SIGHUP after the files are replaced serves the new certificate and the new tokens; a bad pair keeps it', async (t) => {
    if (!(await needTool(t, 'curl', 'curl'))) return;
    assert.equal(await servedSerial(port, ca.cert), first.serial);
    const oldReader = tokens.reader;
    const newToken = `${'n'.repeat(8)}${Date.now().toString(36)}${'0'.repeat(16)}`;
    await writeFile(tokens.file, `${tokens.admin} admin\n${newToken} read\n`);
    await copyFile(second.cert, certFile);
    await copyFile(second.key, keyFile);
    const before = api!.lines.length;
    api!.child.kill('SIGHUP');
    await logged(before, '"TLS certificate re-read"');
    const reread = JSON.parse(api!.lines.slice(before).find((l) => l.includes('"TLS certificate re-read"'))!) as {
      serial: string;
    };
    assert.equal(reread.serial, second.serial);
    assert.equal(await servedSerial(port, ca.cert), second.serial);
    const h2 = await curl([
      '--http2',
      '--cacert',
      ca.cert,
      '-H',
      `authorization: Bearer ${newToken}`,
      `${api!.url}/v1/proxies`,
    ]);
    assert.deepEqual([h2.status, h2.version], [200, '2'], h2.body + h2.stderr);
    const old = await curl([
      '--http1.1',
      '--cacert',
      ca.cert,
      '-H',
      `authorization: Bearer ${oldReader}`,
      `${api!.url}/v1/proxies`,
    ]);
    assert.equal(old.status, 401, 'the token removed from the file is refused after SIGHUP');

    // A key that is not the certificate's: the re-read fails, the served certificate stays.
    await copyFile(first.key, keyFile);
    const mark = api!.lines.length;
    api!.child.kill('SIGHUP');
    await logged(mark, '"TLS certificate kept: re-read failed"');
    const failed = api!.lines.slice(mark).find((l) => l.includes('re-read failed'))!;
    assert.match(failed, /is not the key of the certificate in --tls-cert/);
    assert.equal(await servedSerial(port, ca.cert), second.serial);
    assert.equal(api!.child.exitCode, null, 'the API still runs');
  });

  it('EP_API_TLS_CERT and EP_API_TLS_KEY serve TLS without the flags', async () => {
    const byEnv = await startApi(['--token-file', tokens.file, '--task-queue', taskQueue], {
      EP_API_TLS_CERT: first.cert,
      EP_API_TLS_KEY: first.key,
    });
    try {
      assert.equal(await servedSerial(Number(new URL(byEnv.url).port), ca.cert), first.serial);
    } finally {
      await byEnv.stop();
    }
  });

  it('plain HTTP on a non-loopback address is refused before it listens: exit 2 naming --insecure-listen', async () => {
    for (const listen of ['0.0.0.0', '::']) {
      const r = await runCommand(
        process.execPath,
        [API, '--token-file', tokens.file, '--listen', listen, '--port', '0'],
        {
          cwd: PROJECT_ROOT,
          env: { ...process.env, EP_API_TLS_CERT: '', EP_API_TLS_KEY: '', EP_API_INSECURE_LISTEN: '' },
          timeoutMs: 60_000,
        },
      );
      assert.equal(r.code, 2, `${listen}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, new RegExp(`^--listen ${listen.replaceAll('.', '\\.')} is not a loopback address`));
      assert.match(r.stderr, /--tls-cert FILE and --tls-key FILE/);
      assert.match(r.stderr, /--insecure-listen \(env EP_API_INSECURE_LISTEN=true\)/);
      assert.equal(r.stdout, '', 'nothing was logged: it never listened');
    }
  });
});
