/**
 * The bin/ launchers: each starts its entry point (its `--help` is the entry's own), and each
 * turns Node's compile cache on before the entry's TypeScript is loaded, so the cache directory
 * fills on the first start. The cache is found through XDG_CACHE_HOME, not NODE_COMPILE_CACHE (with
 * which Node would turn it on by itself). NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';

const pexec = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const LAUNCHERS: [string, string, RegExp][] = [
  ['egressctl', 'workers/egressctl.ts', /^egressctl: start, inspect and delete egress proxies/],
  ['worker', 'workers/worker.ts', /^egress-proxies worker:/],
  ['api', 'workers/api.ts', /--token-file/],
];

describe('bin/ launchers', { timeout: 60_000 }, () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const cacheDir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'ep-ncc-'));
    dirs.push(d);
    return d;
  };
  const entries = (dir: string): string[] => readdirSync(dir, { recursive: true }).map(String);
  const env = (xdg: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
    const e: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: xdg, ...extra };
    delete e['NODE_COMPILE_CACHE'];
    return e;
  };

  for (const [name, entry, help] of LAUNCHERS) {
    it(`bin/${name} runs ${entry} with the compile cache on`, async () => {
      const source = readFileSync(join(root, 'bin', name), 'utf8');
      assert.match(source, /^#!\/usr\/bin\/env node\n/);
      assert.ok(source.indexOf("import './compile-cache.mjs'") < source.indexOf(`import('../${entry}')`));
      const dir = cacheDir();
      const { stdout } = await pexec(join(root, 'bin', name), ['--help'], {
        env: env(dir),
        timeout: 30_000,
      });
      assert.match(stdout, help);
      const cache = join(dir, 'egress-proxies/node-compile-cache');
      assert.ok(entries(cache).length > 0, `the compile cache in ${cache} stays empty`);
    });
  }

  it('NODE_DISABLE_COMPILE_CACHE=1 turns the cache off', async () => {
    const dir = cacheDir();
    await pexec(join(root, 'bin/egressctl'), ['--help'], {
      env: env(dir, { NODE_DISABLE_COMPILE_CACHE: '1' }),
      timeout: 30_000,
    });
    assert.deepEqual(entries(dir), []);
  });

  it('bin/ holds one launcher per entry point of workers/, and nothing else but the cache module', () => {
    const launchers = readdirSync(join(root, 'bin')).filter((f) => f !== 'compile-cache.mjs');
    assert.deepEqual(launchers.sort(), LAUNCHERS.map(([name]) => name).sort());
    const entries = readdirSync(join(root, 'workers')).filter((f) => f.endsWith('.ts'));
    assert.deepEqual(entries.sort(), LAUNCHERS.map(([, entry]) => entry.replace('workers/', '')).sort());
  });

  it('package.json installs egressctl from bin/', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    assert.equal(pkg.bin['egressctl'], 'bin/egressctl');
  });
});
