/**
 * The versioning rule in eslint.config.js: the pinned long-lived workflows (proxy, pool, host
 * monitor) import neither patched() nor deprecatePatch() (a pinned run never replays another
 * build's code) and continue as new only through workflows/upgrade.ts (onto the current build);
 * the auto-upgrading host workflow may still ask a patch. Each case lints a two-line source text as
 * a file of that folder.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

const root = fileURLToPath(new URL('../../', import.meta.url));
let eslint: ESLint;

async function refusals(file: string, name: string): Promise<string[]> {
  const code = `import { ${name} } from '@temporalio/workflow';\nexport const probe = ${name};\n`;
  const [result] = await eslint.lintText(code, { filePath: join(root, file) });
  assert.ok(result);
  return result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('ESLint: the versioning rule of the pinned long-lived workflows', () => {
  before(() => {
    eslint = new ESLint({ cwd: root, overrideConfig: tseslint.configs.disableTypeChecked });
  });
  for (const file of ['workflows/proxy/lint-probe.ts', 'workflows/pool/lint-probe.ts', 'workflows/host-monitor.ts']) {
    for (const name of ['patched', 'deprecatePatch']) {
      it(`${file} may not import ${name}`, async () => {
        const m = await refusals(file, name);
        assert.equal(m.length, 1, m.join('; '));
        assert.match(m[0]!, /Pinned runs never replay another build, so they need no patch/);
      });
    }
    for (const name of ['continueAsNew', 'makeContinueAsNewFunc']) {
      it(`${file} may not import ${name}`, async () => {
        const m = await refusals(file, name);
        assert.equal(m.length, 1, m.join('; '));
        assert.match(m[0]!, /continueOntoCurrentBuild \(workflows\/upgrade\.ts\)/);
      });
    }
  }
  it('the auto-upgrading host workflow may ask a patch and continue as new itself', async () => {
    assert.deepEqual(await refusals('workflows/host.ts', 'patched'), []);
    assert.deepEqual(await refusals('workflows/host.ts', 'continueAsNew'), []);
  });
});
