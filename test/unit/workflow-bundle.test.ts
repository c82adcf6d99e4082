/**
 * The worker's cached workflow bundle (runtime/workflow-bundle.ts): its key changes with every
 * file the bundle can contain and with nothing else; the real bundle holds no project file outside
 * the hashed directories (so a change elsewhere cannot make a cached bundle stale); a second load
 * reads the cache and gets the same code; a directory others may write to is never used.
 */
import assert from 'node:assert/strict';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Logger } from 'pino';
import { BUNDLE_SOURCE_DIRS, loadWorkflowBundle, workflowBundleKey } from '../../runtime/workflow-bundle.ts';
import { setupTracing } from '../../runtime/telemetry.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

function capture(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

describe('workflow bundle key', () => {
  let tree: string;
  before(() => {
    tree = mkdtempSync(join(tmpdir(), 'ep-bundle-key-'));
    for (const d of ['workflows', 'contracts', 'activities', 'lib']) mkdirSync(join(tree, d));
    writeFileSync(join(tree, 'package.json'), '{"name":"x"}');
    writeFileSync(join(tree, 'package-lock.json'), '{"lockfileVersion":3}');
    writeFileSync(join(tree, 'workflows/a.ts'), 'export const a = 1;');
    writeFileSync(join(tree, 'contracts/b.ts'), 'export const b = 1;');
    writeFileSync(join(tree, 'activities/c.ts'), 'export const c = 1;');
    writeFileSync(join(tree, 'lib/d.ts'), 'export const d = 1;');
  });
  after(() => rmSync(tree, { recursive: true, force: true }));

  const key = (inputs: unknown = { x: 1 }): Promise<string> => workflowBundleKey(tree, inputs);

  it('is the same for the same files and inputs, and differs with the inputs', async () => {
    const k = await key();
    assert.match(k, /^[0-9a-f]{32}$/);
    assert.equal(await key(), k);
    assert.notEqual(await key({ x: 2 }), k);
  });

  for (const [what, file, text] of [
    ['a workflow file changes', 'workflows/a.ts', 'export const a = 2;'],
    ['a workflow file is added', 'workflows/new.ts', 'export {};'],
    ['a contracts file changes', 'contracts/b.ts', 'export const b = 2;'],
    ['an activity file changes (types come from there)', 'activities/c.ts', 'export const c = 2;'],
    ['the lockfile changes (SDK, interceptors)', 'package-lock.json', '{"lockfileVersion":3,"x":1}'],
  ] as const) {
    it(`changes when ${what}`, async () => {
      const before = await key();
      writeFileSync(join(tree, file), text);
      assert.notEqual(await key(), before);
    });
  }

  it('a renamed file changes it even with the same content', async () => {
    const before = await key();
    cpSync(join(tree, 'contracts/b.ts'), join(tree, 'contracts/b2.ts'));
    rmSync(join(tree, 'contracts/b.ts'));
    assert.notEqual(await key(), before);
  });

  it('does not change with files the bundle cannot contain', async () => {
    const before = await key();
    writeFileSync(join(tree, 'lib/d.ts'), 'export const d = 2;');
    writeFileSync(join(tree, 'README.md'), 'x');
    assert.equal(await key(), before);
  });
});

describe('the real workflow bundle, cached', { timeout: 120_000 }, () => {
  let cache: string;
  const tracing = setupTracing(pino({ level: 'silent' }));
  before(() => {
    cache = mkdtempSync(join(tmpdir(), 'ep-bundle-cache-'));
  });
  after(async () => {
    rmSync(cache, { recursive: true, force: true });
    await tracing.shutdown();
  });
  const load = (cacheDir: string | undefined, log = capture().log) =>
    loadWorkflowBundle({
      root,
      workflowsPath: join(root, 'workflows/index.ts'),
      plugins: [tracing.plugin],
      cacheDir,
      log,
    });

  it('is built once, then read from the cache with the same code and key', async () => {
    const first = await load(cache);
    assert.equal(first.source, 'built');
    assert.deepEqual(readdirSync(cache), [`${first.key}.js`]);
    const second = await load(cache);
    assert.equal(second.source, 'cache');
    assert.equal(second.key, first.key);
    assert.equal(second.code, first.code);
    // The OpenTelemetry workflow interceptors are in it (the worker's plugin's bundler hook ran).
    assert.match(first.code, /interceptors-opentelemetry/);

    // Every project module in the bundle lies in a hashed directory; anything else there would
    // let a change outside them leave a stale bundle in the cache.
    const ids = new Set([...first.code.matchAll(/"(\.{1,2}\/[^"\n]+?\.(?:ts|js|mjs|cjs|json))"/g)].map((m) => m[1]!));
    const project = [...ids]
      .map((id) => relative(root, resolve(process.cwd(), id)))
      .filter((p) => !p.startsWith('node_modules/') && !p.includes('/node_modules/'));
    assert.ok(project.includes('workflows/proxy/index.ts'), `module ids found: ${project.slice(0, 5).join(', ')}`);
    for (const p of project) {
      assert.ok(
        BUNDLE_SOURCE_DIRS.some((d) => p.startsWith(`${d}/`)),
        `${p} is bundled but not hashed: add its directory to BUNDLE_SOURCE_DIRS`,
      );
    }
  });

  it('a cache directory others may write to is not used: built in memory, with a warning', async () => {
    const open = join(cache, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const { log, lines } = capture();
    const loaded = await load(open, log);
    assert.equal(loaded.source, 'memory');
    assert.deepEqual(readdirSync(open), []);
    assert.ok(
      lines.some((l) => l['level'] === 40 && /others may write to it/.test(String(l['msg']))),
      JSON.stringify(lines.filter((l) => Number(l['level']) >= 40)),
    );
  });
});
