/**
 * egressctl image build's own parts: the providers-file snippet it prints loads through the real
 * providers-file parser with the image's key, URL and digest; a recipe's last stdout line is the
 * image path and a failing recipe is a failure (1) that names it; the image, its digest file and
 * its package list land in --out; bad options are usage errors (2) naming the option.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { collect, imageBuild, providersSnippet, runRecipe } from '../../cli/commands/image-build.ts';
import type { Context } from '../../cli/command.ts';
import { CliError, EXIT } from '../../cli/http.ts';
import { parseProvidersYaml } from '../../lib/config/load.ts';

const tmp = mkdtempSync(join(tmpdir(), 'ep-image-build-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
const DIGEST = 'ab'.repeat(32);

/** A recipe's output as the real one leaves it: <cache>/<recipe hash>/proxy.{qcow2,qcow2.sha256,packages}. */
function fakeBuilt(hash: string): string {
  const dir = join(tmp, 'cache', hash);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'proxy.qcow2'), 'not really a qcow2');
  writeFileSync(join(dir, 'proxy.qcow2.sha256'), `${DIGEST}  proxy.qcow2\n`);
  writeFileSync(join(dir, 'proxy.packages'), 'squid=5.7-2+deb12u6\nqemu-guest-agent=1:7.2+dfsg-7+deb12u13\n');
  return join(dir, 'proxy.qcow2');
}

function script(name: string, body: string): string {
  const path = join(tmp, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

const ctx = (values: Context['values']): Context => ({
  args: [],
  values,
  json: false,
  timeoutMs: 30_000,
  out: () => {},
  api: () => Promise.reject(new Error('no API here')),
});

describe('egressctl image build', () => {
  it('prints a providers-file snippet that the providers-file parser accepts, with the key, URL and digest', () => {
    const snippet = providersSnippet({ key: 'proxy-04a0f154fa1960fc', sha256: DIGEST }, 'https://m.example/p.qcow2');
    const file = snippet
      .replace('<entry>', 'lab')
      .replace(
        '    images:',
        [
          '    type: kvm2',
          '    hosts:',
          '      - name: h1',
          '        address: 192.0.2.10',
          '        keyFile: /etc/ep/id_ed25519',
          '        knownHostsFile: /etc/ep/known_hosts',
          '    squid:',
          '      allowedClientCidrs: [10.0.0.0/8]',
          '    images:',
        ].join('\n'),
      );
    const cfg = parseProvidersYaml(file, 'snippet');
    const image = cfg.providers[0]!.images['proxy-04a0f154fa1960fc'];
    assert.equal(image?.url, 'https://m.example/p.qcow2');
    assert.equal(image?.sha256, DIGEST);
    assert.equal(image?.format, 'qcow2');
  });

  it("takes the recipe's last stdout line as the image path, and puts image, digest and package list into --out", async () => {
    const built = fakeBuilt('04a0f154fa1960fc');
    const recipe = script('ok-recipe', `echo progress >&2\necho some line\necho '${built}'`);
    const path = await runRecipe(recipe, process.env);
    assert.equal(path, built);
    const out = join(tmp, 'out');
    const img = await collect(path, out);
    assert.deepEqual(
      { ...img, sizeBytes: undefined },
      {
        recipe: '04a0f154fa1960fc',
        path: join(out, 'proxy.qcow2'),
        sha256: DIGEST,
        sizeBytes: undefined,
        packages: 2,
        key: 'proxy-04a0f154fa1960fc',
      },
    );
    assert.equal(readFileSync(join(out, 'proxy.qcow2'), 'utf8'), 'not really a qcow2');
    assert.match(readFileSync(join(out, 'proxy.packages'), 'utf8'), /^squid=/);
    // A second collect into the same directory replaces the files.
    await collect(path, out);
  });

  it('a recipe that fails, or prints no image path, is a failure (1) naming the recipe', async () => {
    for (const body of ['echo broken >&2; exit 3', 'echo done']) {
      await assert.rejects(runRecipe(script('bad-recipe', body), process.env), (err: unknown) => {
        assert.ok(err instanceof CliError);
        assert.equal(err.code, EXIT.failure);
        assert.match(err.message, /test\/e2e\/image\/build exited with (3|0)/);
        return true;
      });
    }
  });

  it('a digest file without a digest is a failure naming the file', async () => {
    const built = fakeBuilt('badbadbadbadbad0');
    writeFileSync(`${built}.sha256`, 'nothing\n');
    await assert.rejects(collect(built, join(tmp, 'out2')), /proxy\.qcow2\.sha256 holds no digest/);
  });

  it('without --out, with a --url that is not http(s) or an unknown --lock, is a usage error (2) naming the option', async () => {
    await assert.rejects(imageBuild.run(ctx({})), (err: unknown) => {
      assert.ok(err instanceof CliError);
      assert.equal(err.code, EXIT.usage);
      assert.match(err.message, /--out DIR/);
      return true;
    });
    await assert.rejects(imageBuild.run(ctx({ out: tmp, url: 'ftp://x/p.qcow2' })), (err: unknown) => {
      assert.ok(err instanceof CliError);
      assert.equal(err.code, EXIT.usage);
      assert.match(err.message, /--url must be an http/);
      return true;
    });
    await assert.rejects(imageBuild.run(ctx({ out: tmp, lock: 'loose' })), (err: unknown) => {
      assert.ok(err instanceof CliError);
      assert.equal(err.code, EXIT.usage);
      assert.match(err.message, /--lock must be check, warn or update, got "loose"/);
      return true;
    });
  });
});
