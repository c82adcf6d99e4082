// The worker's workflow bundle, built once per version of the workflow code and kept on disk.
//
// `Worker.create({ workflowsPath })` runs webpack at every start: about 0.85 s and 140 MiB that
// the worker keeps for a while (docs/benchmarks.md, footprint). Here the bundle is built with the
// same plugins (the OpenTelemetry workflow interceptors) and stored under a key that hashes
// everything that goes into it: the files of the directories workflows may import from
// (workflows/, contracts/, and activities/ for its types; eslint refuses any other project import in
// workflows/, and test/unit/workflow-bundle.test.ts checks the bundle holds nothing else), the
// lockfile (SDK, interceptors), the SDK's version and the bundler's inputs. A changed file gives
// a new key, so a stale bundle is never used; a run with no usable cache builds in memory, as before.
//
// The cache directory must be a real directory owned by this user and writable by nobody else
// (the bundle is code the worker runs); otherwise it is ignored with a warning.
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join, relative, sep } from 'node:path';
import type { BundleOptions, BundlerPlugin } from '@temporalio/worker';
import type { Logger } from 'pino';

/** The project directories whose files the workflow bundle may contain. */
export const BUNDLE_SOURCE_DIRS = ['workflows', 'contracts', 'activities'] as const;
/** Bundles kept in the cache directory (newest first); older ones are removed. */
const KEEP = 4;
const FORMAT = 'egress-proxies workflow bundle v1';

/** The default cache directory: $XDG_CACHE_HOME (or ~/.cache)/egress-proxies/workflow-bundles. */
export function defaultBundleCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env['XDG_CACHE_HOME'] || join(homedir(), '.cache'), 'egress-proxies', 'workflow-bundles');
}

async function filesUnder(dir: string): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true, recursive: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

/**
 * The cache key of the bundle for the project at `root`: a hash of the bundle's source files
 * (path and content), the lockfile, the SDK's version and `inputs` (the bundler options).
 */
export async function workflowBundleKey(root: string, inputs: unknown): Promise<string> {
  const h = createHash('sha256');
  // The SDK that bundles is the one this module imports.
  const sdk = createRequire(import.meta.url)('@temporalio/worker/package.json') as { version: string };
  h.update(`${FORMAT}\0${sdk.version}\0${JSON.stringify(inputs)}\0`);
  for (const name of ['package-lock.json', 'package.json']) {
    h.update(`${name}\0`);
    h.update(await readFile(join(root, name)).catch(() => Buffer.alloc(0)));
  }
  const files = (await Promise.all(BUNDLE_SOURCE_DIRS.map((d) => filesUnder(join(root, d))))).flat();
  for (const file of files.map((f) => relative(root, f).split(sep).join('/')).sort()) {
    const content = await readFile(join(root, file));
    h.update(`${file}\0${content.length}\0`);
    h.update(content);
  }
  return h.digest('hex').slice(0, 32);
}

/** Why `dir` may not hold code this process runs, or undefined if it may. */
async function unsafeDir(dir: string): Promise<string | undefined> {
  const st = await lstat(dir);
  if (!st.isDirectory()) return 'it is not a directory (or is a symbolic link)';
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) return `it is owned by uid ${st.uid}, not by this user (${uid})`;
  if ((st.mode & 0o022) !== 0) return `others may write to it (mode ${(st.mode & 0o777).toString(8)}; chmod go-w)`;
  return undefined;
}

export interface WorkflowBundleOptions {
  /** The project's root (holds workflows/, package-lock.json). */
  root: string;
  /** The bundle's entry (workflows/index.ts). */
  workflowsPath: string;
  /** The worker's plugins: their bundler hooks add the workflow interceptor modules. */
  plugins: BundlerPlugin[];
  /** Where bundles are kept; undefined: build in memory at every start. */
  cacheDir: string | undefined;
  log: Logger;
}

export interface LoadedBundle {
  code: string;
  key: string;
  /** `cache`: read from the cache; `built`: built and stored; `memory`: built, not stored. */
  source: 'cache' | 'built' | 'memory';
  ms: number;
}

/** The worker's workflow bundle: from the cache when its key is there, else built (and stored). */
export async function loadWorkflowBundle(o: WorkflowBundleOptions): Promise<LoadedBundle> {
  const started = performance.now();
  let resolved: BundleOptions = { workflowsPath: o.workflowsPath };
  for (const p of o.plugins) resolved = p.configureBundler?.(resolved) ?? resolved;
  const inputs = {
    workflowsPath: relative(o.root, o.workflowsPath),
    interceptors: (resolved.workflowInterceptorModules ?? []).map((m) => relative(o.root, m)),
  };
  const key = await workflowBundleKey(o.root, inputs);
  const done = (code: string, source: LoadedBundle['source']): LoadedBundle => {
    const loaded = { code, key, source, ms: Math.round(performance.now() - started) };
    o.log.info({ key, source, ms: loaded.ms, bytes: code.length, cacheDir: o.cacheDir }, 'workflow bundle ready');
    return loaded;
  };
  let dir = o.cacheDir;
  if (dir !== undefined) {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const why = await unsafeDir(dir);
      if (why !== undefined) {
        o.log.warn({ cacheDir: dir }, `workflow bundle cache not used: ${why}`);
        dir = undefined;
      }
    } catch (err) {
      o.log.warn({ err, cacheDir: dir }, 'workflow bundle cache not usable; building in memory');
      dir = undefined;
    }
  }
  const file = dir === undefined ? undefined : join(dir, `${key}.js`);
  if (file !== undefined) {
    const code = await readFile(file, 'utf8').catch(() => undefined);
    if (code !== undefined && code.length > 0) return done(code, 'cache');
  }
  // Loaded here, not at the top: the worker imports this module for its --help default, before it
  // knows it will start, and the SDK's bundler (webpack) takes a noticeable part of a second to load.
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { code } = await bundleWorkflowCode({
    workflowsPath: o.workflowsPath,
    plugins: o.plugins,
    logger: {
      log: () => {},
      trace: () => {},
      debug: (m, meta) => o.log.debug(meta ?? {}, m),
      info: (m, meta) => o.log.debug(meta ?? {}, m),
      warn: (m, meta) => o.log.warn(meta ?? {}, m),
      error: (m, meta) => o.log.error(meta ?? {}, m),
    },
  });
  if (dir === undefined || file === undefined) return done(code, 'memory');
  try {
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, code, { mode: 0o600 });
    await rename(tmp, file); // atomic: a concurrent worker reads the old file or the whole new one
    await prune(dir, file);
  } catch (err) {
    o.log.warn({ err, cacheDir: dir }, 'workflow bundle not stored; the next start builds it again');
    return done(code, 'memory');
  }
  return done(code, 'built');
}

/** Keeps the KEEP most recently written bundles (the current one always). */
async function prune(dir: string, current: string): Promise<void> {
  const names = (await readdir(dir)).filter((n) => /^[0-9a-f]{32}\.js$/.test(n));
  const aged = await Promise.all(names.map(async (n) => ({ n, t: (await stat(join(dir, n))).mtimeMs })));
  aged.sort((a, b) => b.t - a.t);
  for (const { n } of aged.slice(KEEP)) {
    if (join(dir, n) !== current) await rm(join(dir, n), { force: true });
  }
}
