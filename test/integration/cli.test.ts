/**
 * The operator CLI's commands that do not need the API, as an operator runs them: hosts check over
 * the embedded default providers file (generated from the test hosts) prints one JSON line per
 * host; a bad file names the field and exits 2; --help documents every command.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCommand } from '../support/run.ts';
import type { CommandResult } from '../support/run.ts';
import { loadTestHosts, TESTHOST_STATE } from '../support/testhosts.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

const run = (args: string[], timeoutMs = 60_000): Promise<CommandResult> =>
  runCommand(process.execPath, args, { cwd: root, timeoutMs });

describe('operator CLI', { timeout: 120_000 }, () => {
  let dir: string;
  let providers: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ep-cli-'));
    providers = join(dir, 'providers.yaml');
    const made = await run(['dev/providers.ts', '--state', TESTHOST_STATE, '--out', providers]);
    assert.equal(made.code, 0, made.stderr);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('hosts check prints one JSON line per configured host, each reachable with versions and pool space', async () => {
    const { code, stdout, stderr } = await run([
      'bin/egressctl',
      'hosts',
      'check',
      '--providers',
      providers,
      '--output',
      'json',
    ]);
    assert.equal(code, 0, stderr);
    const lines = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => l.host),
      loadTestHosts().map((h) => `local/${h.name}`),
    );
    for (const l of lines) {
      assert.equal(l.reachable, true);
      assert.match(String(l.libvirtVersion), /^\d+\.\d+\.\d+$/);
      const pool = l.pool as { availableBytes: number; capacityBytes: number };
      assert.ok(pool.availableBytes > 0 && pool.availableBytes <= pool.capacityBytes);
    }
  });

  it('an unreachable host is reported as such (Transient) and the exit code is 1', async () => {
    const bad = join(dir, 'unreachable.yaml');
    const text = (await import('node:fs'))
      .readFileSync(providers, 'utf8')
      .replace(/address: 10\.231\.1\.2\n(\s+)port: 22/, 'address: 127.0.0.1\n$1port: 1');
    await writeFile(bad, text);
    const { code, stdout } = await run([
      'workers/egressctl.ts',
      'hosts',
      'check',
      '--providers',
      bad,
      '--timeout-ms',
      '5000',
      '--output',
      'json',
    ]);
    assert.equal(code, 1);
    const first = JSON.parse(stdout.trim().split('\n')[0]!) as Record<string, unknown>;
    assert.equal(first.reachable, false);
    assert.equal(first.kind, 'Transient');
  });

  it('a bad providers file exits 2 and names the field and the fix', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'providers:\n  - name: Bad_Name\n    type: kvm2\n');
    const { code, stderr, stdout } = await run(['workers/egressctl.ts', 'hosts', 'check', '--providers', bad]);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.match(stderr, /providers\[0\]\.name/);
  });

  it('--help documents every command and option', async () => {
    const { code, stdout } = await run(['bin/egressctl', '--help']);
    assert.equal(code, 0);
    for (const word of [
      'smoke',
      'hosts check',
      'proxy up',
      '--providers',
      '--entry',
      '--timeout-ms',
      'TEMPORAL_ADDRESS',
    ]) {
      assert.ok(stdout.includes(word), `--help mentions ${word}`);
    }
  });
});
