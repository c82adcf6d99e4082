/**
 * The bin/ launchers: each starts its entry point (its `--help` is the entry's own), and each
 * turns Node's compile cache on before the entry's TypeScript is loaded, so the cache directory
 * fills on the first start. The cache is found through XDG_CACHE_HOME, not NODE_COMPILE_CACHE (with
 * which Node would turn it on by itself). NODE_DISABLE_COMPILE_CACHE=1 turns it off. Run from a
 * shell with a clean environment, a launcher uses the project's Node (.local/node) over an older one
 * on PATH, and without a Node 22 or newer it exits 1 with one line that names the fix.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
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
  ['door', 'workers/door.ts', /^egress-proxies door service/],
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
      assert.match(source, /^#!\/bin\/sh\n':' \/\/; \. .*find-node\.sh.* && exec "\$EP_NODE" "\$0" "\$@"\n/);
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

  /**
   * A copy of bin/ in a scratch root whose workers/ is the checkout's, with `projectNode` (if given)
   * as its .local/node/bin/node, and a PATH of the system folders after a folder whose `node` claims
   * to be v20 and fails if run as a script.
   */
  const scratch = (projectNode: string | undefined): { root: string; env: NodeJS.ProcessEnv } => {
    const dir = cacheDir();
    cpSync(join(root, 'bin'), join(dir, 'bin'), { recursive: true });
    symlinkSync(join(root, 'workers'), join(dir, 'workers'));
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
    cpSync(join(root, 'package.json'), join(dir, 'package.json'));
    for (const f of ['lib', 'contracts', 'activities', 'workflows', 'client', 'api', 'cli', 'runtime', 'dev']) {
      symlinkSync(join(root, f), join(dir, f));
    }
    if (projectNode !== undefined) {
      mkdirSync(join(dir, '.local/node/bin'), { recursive: true });
      symlinkSync(projectNode, join(dir, '.local/node/bin/node'));
    }
    const oldNode = join(dir, 'old-node');
    mkdirSync(oldNode);
    writeFileSync(join(oldNode, 'node'), '#!/bin/sh\n[ "$1" = --version ] && { echo v20.20.2; exit 0; }\nexit 99\n');
    chmodSync(join(oldNode, 'node'), 0o755);
    return { root: dir, env: { PATH: `${oldNode}:/usr/bin:/bin`, HOME: dir, XDG_CACHE_HOME: dir } };
  };

  it('from a clean shell, a launcher runs on the project Node (.local/node), not an older node on PATH', async () => {
    const { root: dir, env: clean } = scratch(process.execPath);
    for (const [name, , help] of LAUNCHERS) {
      const { stdout } = await pexec(join(dir, 'bin', name), ['--help'], { env: clean, timeout: 30_000 });
      assert.match(stdout, help);
    }
  });

  it('without a Node 22 or newer, a launcher exits 1 with one line naming the fix', async () => {
    const { root: dir, env: clean } = scratch(undefined);
    for (const [name] of LAUNCHERS) {
      const err = await pexec(join(dir, 'bin', name), ['--help'], { env: clean, timeout: 30_000 }).then(
        () => assert.fail(`bin/${name} ran on Node 20`),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
      assert.equal(err.code, 1);
      assert.equal(err.stdout, '');
      const lines = err.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, err.stderr);
      assert.match(
        lines[0]!,
        new RegExp(
          `^${name}: needs Node\\.js 22 or newer and found v20\\.20\\.2 at .*/old-node/node: run scripts/main or scripts/test once`,
        ),
      );
      assert.ok(lines[0]!.includes(join(dir, '.local/node')), lines[0]);
    }
  });

  it('bin/ holds one launcher per entry point of workers/, and nothing else but the cache module and the Node finder', () => {
    const launchers = readdirSync(join(root, 'bin')).filter((f) => f !== 'compile-cache.mjs' && f !== 'find-node.sh');
    assert.deepEqual(launchers.sort(), LAUNCHERS.map(([name]) => name).sort());
    const entries = readdirSync(join(root, 'workers')).filter((f) => f.endsWith('.ts'));
    assert.deepEqual(entries.sort(), LAUNCHERS.map(([, entry]) => entry.replace('workers/', '')).sort());
  });

  it('package.json installs egressctl from bin/', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    assert.equal(pkg.bin['egressctl'], 'bin/egressctl');
  });
});
