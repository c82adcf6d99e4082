/**
 * lib/ssh/ssh2-parts.ts loads ssh2's client and key parser from their own files. These tests fail
 * if an ssh2 upgrade moves those files or makes them differ from what the package entry exports,
 * and if any module on the dial path goes back to loading the whole package (its server, SFTP and
 * key generation), which costs every dialling process its start-up time.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import type * as Ssh2 from 'ssh2';
import { Client, parseKey } from '../../lib/ssh/ssh2-parts.ts';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('../../', import.meta.url));

describe('ssh2 parts', () => {
  it('are the very objects the ssh2 package exports', () => {
    const ssh2 = require('ssh2') as typeof Ssh2;
    assert.equal(Client, ssh2.Client);
    assert.equal(parseKey, ssh2.utils.parseKey);
  });

  it('the dial path loads no ssh2 file outside the client and what it needs', { timeout: 30_000 }, async () => {
    // A fresh process, so that nothing this test runner loaded counts.
    const script = `
      import { createRequire } from 'node:module';
      await import('./lib/hostlink/pool.ts');
      const cache = createRequire(import.meta.url).cache;
      process.stdout.write(JSON.stringify(Object.keys(cache)));
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      timeout: 20_000,
    });
    const loaded = (JSON.parse(stdout) as string[]).map((f) => f.replace(/.*\/node_modules\//, ''));
    assert.ok(loaded.includes('ssh2/lib/client.js'), `ssh2's client is loaded: ${loaded.join(' ')}`);
    for (const unwanted of [
      'ssh2/lib/index.js',
      'ssh2/lib/server.js',
      'ssh2/lib/keygen.js',
      'ssh2/lib/http-agents.js',
    ]) {
      assert.ok(!loaded.includes(unwanted), `${unwanted} is not loaded by the dial path`);
    }
  });
});
