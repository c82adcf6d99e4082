/**
 * import-x/no-cycle in eslint.config.js sees value cycles between TypeScript files: the proxy
 * workflow's way out (workflows/proxy/cleanup.ts) importing a value from its Running loop
 * (monitor-loop.ts, which reaches cleanup.ts again through running.ts) fails lint, while the same
 * import as a type passes. Each case lints cleanup.ts's own text with one import added; the rest of
 * the graph is read from disk.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

const root = fileURLToPath(new URL('../../', import.meta.url));
const FILE = join(root, 'workflows/proxy/cleanup.ts');

let eslint: ESLint;

async function cycleMessages(extraImport: string): Promise<string[]> {
  const code = `${extraImport}\n${readFileSync(FILE, 'utf8')}\nexport { _probe };\n`;
  const [result] = await eslint.lintText(code, { filePath: FILE });
  assert.ok(result, 'a lint result');
  assert.deepEqual(
    result.messages.filter((m) => m.fatal === true),
    [],
    'the source text parses',
  );
  return result.messages.filter((m) => m.ruleId === 'import-x/no-cycle').map((m) => m.message);
}

describe('ESLint import-x/no-cycle on workflows/', () => {
  before(() => {
    eslint = new ESLint({ cwd: root, overrideConfig: tseslint.configs.disableTypeChecked });
  });

  it('the files as they are have no cycle', async () => {
    const [result] = await eslint.lintFiles([FILE]);
    assert.deepEqual(
      result!.messages.filter((m) => m.ruleId === 'import-x/no-cycle'),
      [],
    );
  });

  it('a value import that closes a cycle fails lint', async () => {
    const messages = await cycleMessages(`import { monitorLoop as _probe } from './monitor-loop.ts';`);
    assert.equal(messages.length, 1, messages.join('; '));
    assert.match(messages[0]!, /^Dependency cycle via "\.\/[a-z-]+\.ts:\d+"/);
  });

  it('the same import as a type passes', async () => {
    const messages = await cycleMessages(
      `import type { monitorLoop } from './monitor-loop.ts';\nconst _probe: typeof monitorLoop | undefined = undefined;`,
    );
    assert.deepEqual(messages, []);
  });
});
