import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, link, mkdir, readFile, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError, EXIT } from '../http.ts';
import { str, usage } from '../command.ts';
import type { Command, Context } from '../command.ts';

/** The checkout's root (this file is cli/commands/image-build.ts). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The image recipe (docs/image.md): one bash script and the files beside it. */
export const IMAGE_RECIPE = 'test/e2e/image/build';
/** The files a build leaves in --out. */
export const IMAGE_FILES = ['proxy.qcow2', 'proxy.qcow2.sha256', 'proxy.packages'] as const;
/** A build (debootstrap, packages, conversion) takes minutes; the bound is the recipe's own lock wait and more. */
const BUILD_BOUND_MS = 45 * 60_000;

/** What a finished build hands to the operator. */
export interface BuiltImage {
  /** The recipe's hash: names the cache directory and the suggested image key. */
  recipe: string;
  path: string;
  sha256: string;
  sizeBytes: number;
  packages: number;
  /** The suggested providers-file key (`proxy-<recipe>`): a new recipe is a new key. */
  key: string;
}

/** The providers-file lines for a built image, served at `url`. */
export function providersSnippet(img: Pick<BuiltImage, 'key' | 'sha256'>, url: string): string {
  return [
    'providers:',
    '  - name: <entry>',
    '    images:',
    `      ${img.key}:`,
    `        url: ${url}`,
    `        sha256: ${img.sha256}`,
    '        format: qcow2',
  ].join('\n');
}

export const imageBuild: Command = {
  name: 'image build',
  usage: 'image build --out DIR [--url URL] [--lock check|warn|update] [--cache DIR] [--rebuild]',
  help: `egressctl image build --out DIR [--url URL] [--lock check|warn|update] [--cache DIR] [--rebuild]
  Builds the proxy image from the recipe in the source checkout (${IMAGE_RECIPE},
  docs/image.md): Debian 12 with Squid, cloud-init (NoCloud) and qemu-guest-agent, tuned to boot
  fast, with a locked package set. Needs root (debootstrap, loop devices) and the machine's apt
  mirror; takes a few minutes, or no time when the recipe's cached image exists (--cache, default
  /var/cache/egress-proxies/images; --rebuild ignores it). Writes proxy.qcow2, its .sha256 and
  proxy.packages into DIR and prints the digest and a providers-file snippet (--url: where you
  will serve proxy.qcow2 from; default a placeholder). --lock: check (default) refuses a package
  set other than the recipe's packages.lock, warn prints the difference and builds, update
  rewrites the lock. Progress goes to stderr. Exit 1 if the build fails, 2 for bad options.`,
  options: {
    out: { type: 'string' },
    url: { type: 'string' },
    cache: { type: 'string' },
    rebuild: { type: 'boolean' },
    lock: { type: 'string' },
  },
  async run(ctx) {
    const out = str(ctx, 'out');
    if (out === undefined || out === '') throw usage('image build needs --out DIR (where the image files are written)');
    const url = str(ctx, 'url');
    if (url !== undefined && !/^https?:\/\/\S+$/.test(url)) {
      throw usage(
        `--url must be an http:// or https:// URL (where proxy.qcow2 will be served), got ${JSON.stringify(url)}`,
      );
    }
    const lock = str(ctx, 'lock') ?? 'check';
    if (!['check', 'warn', 'update'].includes(lock)) {
      throw usage(`--lock must be check, warn or update, got ${JSON.stringify(lock)}`);
    }
    const recipe = join(ROOT, IMAGE_RECIPE);
    if (!existsSync(recipe)) {
      throw new CliError(EXIT.usage, `image build needs a source checkout of egress-proxies: ${recipe} is not here`);
    }
    if (process.getuid?.() !== 0) {
      throw new CliError(
        EXIT.usage,
        'image build must run as root (debootstrap, loop devices, mounts): run it with sudo',
      );
    }
    const cache = str(ctx, 'cache');
    const built = await runRecipe(recipe, {
      ...process.env,
      CI: 'true',
      EP_IMAGE_LOCK: lock,
      ...(cache ? { EP_E2E_IMAGE_CACHE: resolve(cache) } : {}),
      ...(ctx.values['rebuild'] === true ? { EP_E2E_IMAGE_REBUILD: '1' } : {}),
    });
    const img = await collect(built, resolve(out));
    report(ctx, img, url ?? `https://<your mirror>/${img.key}.qcow2`);
    return EXIT.ok;
  },
};

/** Runs the recipe (stdin closed, stderr passed through); resolves to the image path, its last stdout line. */
export function runRecipe(recipe: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(recipe, [], { stdio: ['ignore', 'pipe', 'inherit'], env });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    const timer = setTimeout(() => child.kill('SIGTERM'), BUILD_BOUND_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      fail(new CliError(EXIT.failure, `could not run ${recipe}: ${err.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const path = stdout.trim().split('\n').pop() ?? '';
      if (code === 0 && path.endsWith('.qcow2')) return done(path);
      fail(
        new CliError(
          EXIT.failure,
          signal
            ? `${IMAGE_RECIPE} stopped by ${signal}${signal === 'SIGTERM' ? ` (over ${BUILD_BOUND_MS / 60_000} minutes?)` : ''}`
            : `${IMAGE_RECIPE} exited with ${String(code)} (its messages are above)`,
        ),
      );
    });
  });
}

/** Puts the image, its digest file and its package list into `outDir` (a hard link where it can). */
export async function collect(imagePath: string, outDir: string): Promise<BuiltImage> {
  const from = dirname(imagePath);
  await mkdir(outDir, { recursive: true });
  for (const f of IMAGE_FILES) {
    const src = join(from, f);
    const dst = join(outDir, f);
    if (resolve(src) === resolve(dst)) continue;
    await rm(dst, { force: true });
    await link(src, dst).catch(() => copyFile(src, dst));
  }
  const sha256 = (await readFile(join(outDir, 'proxy.qcow2.sha256'), 'utf8')).split(/\s+/)[0] ?? '';
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new CliError(EXIT.failure, `${from}/proxy.qcow2.sha256 holds no digest`);
  const packages = (await readFile(join(outDir, 'proxy.packages'), 'utf8')).split('\n').filter(Boolean).length;
  const { size } = await stat(join(outDir, 'proxy.qcow2'));
  const recipe = basename(from);
  return { recipe, path: join(outDir, 'proxy.qcow2'), sha256, sizeBytes: size, packages, key: `proxy-${recipe}` };
}

function report(ctx: Context, img: BuiltImage, url: string): void {
  if (ctx.json) {
    ctx.out(JSON.stringify({ ...img, url, snippet: providersSnippet(img, url) }));
    return;
  }
  ctx.out(`image    ${img.path} (${(img.sizeBytes / 2 ** 20).toFixed(0)} MiB, recipe ${img.recipe})`);
  ctx.out(`sha256   ${img.sha256}`);
  ctx.out(`packages ${img.packages} (the list: ${join(dirname(img.path), 'proxy.packages')})`);
  ctx.out('');
  ctx.out(`Serve proxy.qcow2 over HTTP(S) and add the image to an entry of the providers file:`);
  ctx.out('');
  ctx.out(providersSnippet(img, url));
}
