// Turns on Node's compile cache for the rest of this process, before any of the project's
// TypeScript is loaded: the bin/ launchers import this first and then their entry point, and a
// benchmark child gets it with `node --import ./bin/compile-cache.mjs FILE.ts`. The cache keeps
// V8's code cache and the type-stripped source of every module, keyed by the file's content and
// Node's version, so a changed file is simply compiled again. A warm cache saves about 0.1 s and
// 30 MiB per process start (no TypeScript stripper is loaded); docs/benchmarks.md has the figures.
//
// Where: $NODE_COMPILE_CACHE if set, else $XDG_CACHE_HOME/egress-proxies/node-compile-cache
// (~/.cache/... by default), created private to this user. Off: NODE_DISABLE_COMPILE_CACHE=1.
// Plain JavaScript on purpose: a .ts launcher would load the stripper before the cache is on.
import { mkdirSync } from 'node:fs';
import module from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

function cacheDir() {
  const fromEnv = process.env.NODE_COMPILE_CACHE;
  if (fromEnv) return fromEnv;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'egress-proxies', 'node-compile-cache');
}

if (!process.env.NODE_DISABLE_COMPILE_CACHE && typeof module.enableCompileCache === 'function') {
  try {
    const dir = cacheDir();
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // A cache that cannot be used is not an error: the process only starts more slowly.
    module.enableCompileCache(dir);
  } catch {
    // e.g. a read-only home: run without the cache
  }
}
