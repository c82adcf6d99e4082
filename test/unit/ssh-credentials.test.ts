/**
 * Credential loading against key files made by the real ssh-keygen: formats, passphrases, the
 * error messages (file named, fix given, no secret leaked), and re-reading on every call.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadCredentials, loadPrivateKey } from '../../lib/ssh/credentials.ts';
import { SshCredentialsError } from '../../lib/ssh/errors.ts';
import { fingerprintSha256 } from '../../lib/ssh/known-hosts.ts';
import type { SshTarget } from '../../lib/ssh/target.ts';
import { generateKey, run, sshKeygenFingerprint } from '../support/sshd.ts';

const PASSPHRASE = 'correct horse battery staple';

async function rejectsCredentials(p: Promise<unknown>, ...patterns: RegExp[]): Promise<SshCredentialsError> {
  const err = await p.then(
    () => assert.fail('expected SshCredentialsError'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SshCredentialsError, `not an SshCredentialsError: ${String(err)}`);
  assert.equal(err.code, 'SSH_CREDENTIALS');
  assert.equal(err.kind, 'Permanent');
  for (const re of patterns) assert.match(err.message, re);
  assert.ok(!err.message.includes(PASSPHRASE), 'message leaks the passphrase');
  assert.ok(!/PRIVATE KEY/.test(err.message), 'message leaks key material');
  return err;
}

describe('loadPrivateKey', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-creds-'));
    await writeFile(join(dir, 'pass'), `${PASSPHRASE}\n`);
    await writeFile(join(dir, 'wrongpass'), 'not it\n');
    await writeFile(join(dir, 'emptypass'), '\n');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const [type, pem] of [
    ['ed25519', false],
    ['ecdsa', false],
    ['rsa', false],
    ['ecdsa', true],
    ['rsa', true],
  ] as const) {
    it(`loads an unencrypted ${type} key in ${pem ? 'PEM' : 'OpenSSH'} format`, async () => {
      const key = await generateKey(join(dir, `plain-${type}-${pem}`), type, { pem });
      const parsed = await loadPrivateKey(key.privatePath);
      assert.ok(parsed.isPrivateKey());
      assert.equal(fingerprintSha256(parsed.getPublicSSH()), await sshKeygenFingerprint(key.publicPath));
    });
  }

  for (const [type, pem] of [
    ['ed25519', false],
    ['rsa', true],
  ] as const) {
    it(`decrypts an encrypted ${type} ${pem ? 'PEM' : 'OpenSSH'} key with the passphrase file`, async () => {
      const key = await generateKey(join(dir, `enc-${type}-${pem}`), type, { passphrase: PASSPHRASE, pem });
      const parsed = await loadPrivateKey(key.privatePath, join(dir, 'pass'));
      assert.equal(fingerprintSha256(parsed.getPublicSSH()), await sshKeygenFingerprint(key.publicPath));
      await rejectsCredentials(
        loadPrivateKey(key.privatePath),
        /is encrypted but no passphrase/,
        /passphrasePath/,
        new RegExp(key.privatePath),
      );
      await rejectsCredentials(loadPrivateKey(key.privatePath, join(dir, 'wrongpass')), /bad passphrase/, /wrongpass/);
      await rejectsCredentials(loadPrivateKey(key.privatePath, join(dir, 'emptypass')), /emptypass is empty/);
    });
  }

  it('names a missing key file and the field to fix', async () => {
    await rejectsCredentials(
      loadPrivateKey(join(dir, 'nope')),
      /SSH private key file .*nope does not exist/,
      /keyPath/,
    );
  });

  it('names a missing passphrase file', async () => {
    const key = await generateKey(join(dir, 'for-missing-pass'));
    await rejectsCredentials(
      loadPrivateKey(key.privatePath, join(dir, 'nopass')),
      /passphrase file .*nopass does not exist/,
      /passphrasePath/,
    );
  });

  it('refuses a directory, a public key, a PKCS#8 key and garbage with a fix', async () => {
    await rejectsCredentials(loadPrivateKey(dir), /is a directory/);
    const key = await generateKey(join(dir, 'pub-only'));
    await rejectsCredentials(loadPrivateKey(key.publicPath), /public key, not a private key/);
    const p8 = join(dir, 'pkcs8');
    await run('ssh-keygen', ['-q', '-t', 'rsa', '-b', '2048', '-m', 'PKCS8', '-N', '', '-f', p8]);
    await rejectsCredentials(loadPrivateKey(p8), /PKCS#8/, /ssh-keygen -p -f/);
    await writeFile(join(dir, 'garbage'), 'hello\n');
    await rejectsCredentials(loadPrivateKey(join(dir, 'garbage')), /cannot be used/);
  });

  it('names an unreadable key file (as root, checked in a child running as nobody)', async (t) => {
    const key = await generateKey(join(dir, 'unreadable'));
    await chmod(key.privatePath, 0o000);
    if (process.getuid?.() !== 0) {
      await rejectsCredentials(loadPrivateKey(key.privatePath), /is not readable by this process/);
      return;
    }
    // Root reads anything: ask the same question from an unprivileged child.
    await chmod(dir, 0o711);
    const module = new URL('../../lib/ssh/credentials.ts', import.meta.url).href;
    const asNobody = ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath];
    try {
      await run('setpriv', [
        ...asNobody,
        '-e',
        `require('fs').accessSync(${JSON.stringify(new URL(module).pathname)})`,
      ]);
    } catch {
      t.skip('this checkout is not readable by nobody, so the unprivileged child cannot load the module');
      return;
    }
    const script = `import(${JSON.stringify(module)}).then((m) => m.loadPrivateKey(${JSON.stringify(key.privatePath)})).then(() => console.log('READ'), (e) => console.log(e.code + ' ' + e.message));`;
    const out = await run('setpriv', [...asNobody, '--input-type=module', '-e', script], 20_000);
    assert.match(out, /^SSH_CREDENTIALS /);
    assert.match(out, /is not readable by this process/);
  });
});

describe('loadCredentials', () => {
  let dir = '';
  let target: SshTarget;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-creds2-'));
    await generateKey(join(dir, 'id'));
    await writeFile(join(dir, 'known_hosts'), '# empty\n');
    target = {
      host: '127.0.0.1',
      port: 2222,
      user: 'u',
      keyPath: join(dir, 'id'),
      knownHostsPath: join(dir, 'known_hosts'),
    };
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('re-reads the key file on every call (a rotated key is picked up)', async () => {
    const first = await loadCredentials(target);
    const rotated = await generateKey(join(dir, 'id'));
    const second = await loadCredentials(target);
    assert.ok(first.privateKey !== undefined && second.privateKey !== undefined);
    assert.notEqual(
      fingerprintSha256(first.privateKey.getPublicSSH()),
      fingerprintSha256(second.privateKey.getPublicSSH()),
    );
    assert.equal(fingerprintSha256(second.privateKey.getPublicSSH()), fingerprintSha256(rotated.blob));
  });

  it('re-reads known_hosts on every call', async () => {
    assert.equal((await loadCredentials(target)).knownHosts.entries.length, 0);
    const key = await generateKey(join(dir, 'hostkey'));
    await writeFile(target.knownHostsPath, `[127.0.0.1]:2222 ${key.publicLine}\n`);
    assert.equal((await loadCredentials(target)).knownHosts.entries.length, 1);
  });

  it('requires a key or an agent', async () => {
    await rejectsCredentials(loadCredentials({ ...target, keyPath: undefined }), /set keyPath .* or agentSocket/);
  });

  it('names a missing known_hosts file and how to fill it, unless new host keys are accepted', async () => {
    const missing = { ...target, knownHostsPath: join(dir, 'missing_known_hosts') };
    await rejectsCredentials(
      loadCredentials(missing),
      /known_hosts file .*missing_known_hosts does not exist/,
      /ssh-keyscan -p 2222 127\.0\.0\.1 >>/,
    );
    const creds = await loadCredentials({ ...missing, acceptNewHostKeys: true });
    assert.equal(creds.knownHostsMissing, true);
    assert.deepEqual(creds.knownHosts.entries, []);
  });

  it('resolves the agent socket from SSH_AUTH_SOCK at call time, and checks it is a socket', async () => {
    await rejectsCredentials(loadCredentials({ ...target, agentSocket: true }, {}), /SSH_AUTH_SOCK is not set/);
    await rejectsCredentials(
      loadCredentials({ ...target, agentSocket: true }, { SSH_AUTH_SOCK: join(dir, 'nosock') }),
      /from SSH_AUTH_SOCK.*ENOENT/,
    );
    await rejectsCredentials(
      loadCredentials({ ...target, agentSocket: target.knownHostsPath }),
      /is not a unix socket/,
    );
    const sockPath = join(dir, 'agent.sock');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(sockPath, resolve));
    try {
      const creds = await loadCredentials(
        { ...target, keyPath: undefined, agentSocket: true },
        { SSH_AUTH_SOCK: sockPath },
      );
      assert.equal(creds.agentSocket, sockPath);
      assert.equal(creds.privateKey, undefined);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
