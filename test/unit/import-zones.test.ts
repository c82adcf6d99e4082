/**
 * The import zones of eslint.config.js: for each folder, an import across a forbidden line fails
 * lint with the zone's rule, and an allowed one passes. Each case lints a two-line source text as
 * if it were a file in that folder (the file need not exist; the imported one must, since the
 * zones judge resolved paths). Type-aware rules are off here: the zones need no type information,
 * and a file the TypeScript project does not know could not be type-checked.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

const root = fileURLToPath(new URL('../../', import.meta.url));
const ZONE_RULES = new Set([
  'import-x/no-restricted-paths',
  'no-restricted-imports',
  '@typescript-eslint/no-restricted-imports',
]);

/** Some existing .ts file of `folder` (the zones judge folders, not files, so any one will do). */
function someFile(folder: string): string {
  const dir = join(root, folder);
  const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  const file = entries.find((e) => e.isFile() && e.name.endsWith('.ts'));
  if (file) return `${folder}/${file.name}`;
  for (const e of entries.filter((d) => d.isDirectory())) {
    try {
      return someFile(`${folder}/${e.name}`);
    } catch {
      // no .ts file below this one; try the next
    }
  }
  throw new Error(`no .ts file in ${folder}/`);
}

interface Case {
  /** The file linted, relative to the repository (it need not exist). */
  file: string;
  /** A package name, or a repository-relative path (a folder: any of its files). */
  imports: string;
  /** `import type` instead of a value import. */
  typeOnly?: boolean;
}

/** The specifier `c.file` would write for `c.imports` (a name that is no path here is a package). */
function specifier(c: Case): string {
  if (c.imports.startsWith('node:') || !existsSync(join(root, c.imports))) return c.imports;
  const rel = relative(dirname(c.file), c.imports.endsWith('.ts') ? c.imports : someFile(c.imports));
  return rel.startsWith('.') ? rel : `./${rel}`;
}

let eslint: ESLint;

/** The zone rules' messages for `c`'s import. */
async function zoneMessages(c: Case): Promise<string[]> {
  const spec = specifier(c);
  const code = c.typeOnly
    ? `import type * as m from '${spec}';\nexport type M = typeof m;\n`
    : `import * as m from '${spec}';\nexport { m };\n`;
  const [result] = await eslint.lintText(code, { filePath: join(root, c.file) });
  assert.ok(result, 'a lint result');
  const fatal = result.messages.filter((m) => m.fatal === true);
  assert.deepEqual(fatal, [], `${c.file}: the source text parses`);
  return result.messages.filter((m) => m.ruleId !== null && ZONE_RULES.has(m.ruleId)).map((m) => m.message);
}

function label(c: Case): string {
  return `${c.file} ${c.typeOnly ? 'import type ' : 'imports '}${c.imports}`;
}

/** Lint fails: a zone rule fires on the import, with the zone's message (`because`). */
function forbidden(because: RegExp, ...cases: Case[]): void {
  for (const c of cases) {
    it(`forbidden: ${label(c)}`, async () => {
      const messages = await zoneMessages(c);
      assert.ok(messages.length > 0, `${label(c)} passed lint`);
      assert.ok(
        messages.some((m) => because.test(m)),
        `${label(c)}: expected ${String(because)}, got ${messages.join('; ')}`,
      );
    });
  }
}

/** Lint passes: no zone rule fires. */
function allowed(...cases: Case[]): void {
  for (const c of cases) {
    it(`allowed: ${label(c)}`, async () => {
      assert.deepEqual(await zoneMessages(c), []);
    });
  }
}

describe('ESLint import zones', () => {
  before(() => {
    eslint = new ESLint({ cwd: root, overrideConfig: tseslint.configs.disableTypeChecked });
  });

  describe('lib/ imports only lib/, contracts/ and packages, never Temporal', () => {
    const file = 'lib/kvm2/zone-probe.ts';
    forbidden(
      /lib\/ (is the provider|never imports Temporal)/,
      ...['activities', 'workflows', 'client', 'api', 'cli', 'runtime', 'workers', 'dev'].map((imports) => ({
        file,
        imports,
      })),
      { file, imports: '@temporalio/client' },
    );
    allowed({ file, imports: 'contracts' }, { file, imports: 'lib/hostlink/pool.ts' });
  });

  describe('lib/ssh is SSH transport only', () => {
    const file = 'lib/ssh/zone-probe.ts';
    forbidden(
      /lib\/ssh is SSH transport only/,
      { file, imports: 'lib/libvirt/client.ts' },
      { file, imports: 'lib/hostlink/link.ts' },
      { file, imports: 'lib/kvm2/index.ts' },
      { file, imports: 'lib/libvirt/observe.ts', typeOnly: true },
    );
    allowed({ file, imports: 'lib/rules.ts' }, { file, imports: 'lib/log/line-logger.ts', typeOnly: true });
  });

  describe('lib/libvirt and lib/xdr know nothing of SSH, links or the provider', () => {
    forbidden(
      /The libvirt client runs on any Duplex/,
      { file: 'lib/libvirt/zone-probe.ts', imports: 'lib/ssh/session.ts' },
      { file: 'lib/libvirt/zone-probe.ts', imports: 'lib/hostlink/pool.ts' },
      { file: 'lib/libvirt/zone-probe.ts', imports: 'lib/kvm2/index.ts' },
      { file: 'lib/xdr/zone-probe.ts', imports: 'lib/ssh/dial.ts' },
    );
    allowed({ file: 'lib/libvirt/zone-probe.ts', imports: 'lib/xdr/index.ts' });
  });

  describe('lib/hostlink is libvirt over SSH, below the provider', () => {
    const file = 'lib/hostlink/zone-probe.ts';
    forbidden(/lib\/hostlink is libvirt over SSH/, { file, imports: 'lib/kvm2/index.ts' });
    allowed({ file, imports: 'lib/ssh/dial.ts' }, { file, imports: 'lib/libvirt/client.ts' });
  });

  describe('contracts/ imports only contracts/ and @temporalio/workflow', () => {
    const file = 'contracts/zone-probe.ts';
    forbidden(
      /contracts\/ (is what crosses|imports only its own)/,
      { file, imports: 'lib/rules.ts' },
      { file, imports: 'activities' },
      { file, imports: 'workflows', typeOnly: true },
      { file, imports: 'pino' },
    );
    allowed({ file, imports: '@temporalio/workflow' }, { file, imports: someFile('contracts') });
  });

  describe('workflows/ import only @temporalio/workflow, contracts/ and activities as types', () => {
    // Outside the pinned workflows' folders, which refuse some of @temporalio/workflow's names
    // (test/unit/lint-versioning.test.ts).
    const file = 'workflows/zone-probe.ts';
    forbidden(
      /Workflows/,
      { file, imports: 'activities' },
      ...['lib', 'client', 'api', 'workers', 'dev'].map((imports) => ({ file, imports })),
      { file, imports: 'node:crypto' },
      { file, imports: 'pino' },
    );
    allowed(
      { file, imports: 'activities', typeOnly: true },
      { file, imports: '@temporalio/workflow' },
      { file, imports: 'contracts' },
    );
  });

  describe('api/ imports only contracts/, client/ and its own files', () => {
    const file = 'api/zone-probe.ts';
    forbidden(
      /The API (imports only|calls Temporal through client)/,
      ...['lib', 'activities', 'workflows', 'workers', 'dev'].map((imports) => ({ file, imports })),
      { file, imports: '@temporalio/client' },
    );
    allowed({ file, imports: 'contracts' }, { file, imports: 'client' }, { file, imports: someFile('api') });
  });

  describe('client/ imports only contracts/ and workflows as types', () => {
    const file = 'client/zone-probe.ts';
    forbidden(
      /client\/ imports/,
      { file, imports: 'workflows' },
      ...['lib', 'activities', 'api', 'workers', 'dev'].map((imports) => ({ file, imports })),
    );
    allowed(
      { file, imports: 'workflows', typeOnly: true },
      { file, imports: 'contracts' },
      { file, imports: '@temporalio/client' },
    );
  });

  describe('activities/ never import workflows, the API or entry points', () => {
    const file = 'activities/zone-probe.ts';
    forbidden(/Activities import/, ...['workflows', 'api', 'workers', 'dev'].map((imports) => ({ file, imports })));
    allowed({ file, imports: 'client' }, { file, imports: 'lib/kvm2/index.ts' }, { file, imports: 'contracts' });
  });

  describe('nothing imports workers/', () => {
    forbidden(
      /workers\/ holds entry points/,
      { file: 'cli/zone-probe.ts', imports: 'workers' },
      { file: 'runtime/zone-probe.ts', imports: 'workers' },
      { file: 'test/unit/zone-probe.ts', imports: 'workers' },
    );
    allowed({ file: 'workers/zone-probe.ts', imports: 'workers' });
  });

  describe('only workers/, test/ and bench/ import dev/', () => {
    forbidden(
      /dev\/ is the embedded stack/,
      { file: 'cli/zone-probe.ts', imports: 'dev' },
      { file: 'runtime/zone-probe.ts', imports: 'dev' },
    );
    allowed(
      { file: 'workers/zone-probe.ts', imports: 'dev' },
      { file: 'test/unit/zone-probe.ts', imports: 'dev' },
      { file: 'bench/zone-probe.ts', imports: 'dev' },
    );
  });
});
