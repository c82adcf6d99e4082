// ESLint flat config. Type-aware rules for all TypeScript; import zones that enforce the direction
// of imports between folders (the table of docs/design.md; test/unit/import-zones.test.ts
// shows each zone failing a forbidden import); workflows/ also gets the determinism override (no
// node builtins, no packages beyond @temporalio/workflow, activities as types only).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

/** The project's top-level source folders (what a zone names as "everything else"). */
const FOLDERS = ['lib', 'contracts', 'activities', 'workflows', 'client', 'api', 'cli', 'runtime', 'workers', 'dev'];
const OTHERS = ['test', 'bench', 'scripts', 'bin'];
const except = (...keep) => [...FOLDERS, ...OTHERS].filter((f) => !keep.includes(f));

/**
 * Which folder may import which (import-x/no-restricted-paths: the imported file's resolved path
 * against `from`). Type-only exceptions (workflows -> activities, client -> workflows) cannot be
 * said here: those are the @typescript-eslint/no-restricted-imports blocks below.
 */
const ZONES = [
  {
    target: 'lib',
    from: ['activities', 'workflows', 'client', 'api', 'cli', 'runtime', 'workers', 'dev', ...OTHERS],
    message: 'lib/ is the provider and its transports: it imports only lib/, contracts/ and packages.',
  },
  {
    target: 'lib/ssh',
    from: ['lib/libvirt', 'lib/hostlink', 'lib/kvm2', 'lib/config'],
    message: 'lib/ssh is SSH transport only: libvirt over SSH lives in lib/hostlink.',
  },
  {
    target: ['lib/libvirt', 'lib/xdr'],
    from: ['lib/ssh', 'lib/hostlink', 'lib/kvm2', 'lib/config'],
    message: 'The libvirt client runs on any Duplex: it knows nothing of SSH, links or the provider.',
  },
  {
    target: 'lib/hostlink',
    from: ['lib/kvm2', 'lib/config'],
    message: 'lib/hostlink is libvirt over SSH: it imports lib/ssh and lib/libvirt, not the provider.',
  },
  {
    target: 'contracts',
    from: except('contracts'),
    message: 'contracts/ is what crosses the workflow boundary: it imports only contracts/.',
  },
  {
    target: 'workflows',
    from: except('workflows', 'contracts', 'activities'),
    message: 'Workflows import only @temporalio/workflow, contracts/ and (as types) activities/.',
  },
  {
    target: 'activities',
    from: ['workflows', 'api', 'cli', 'workers', 'dev', ...OTHERS],
    message:
      'Activities import lib/, contracts/ and client/ (to signal a workflow), never workflows, the API or entry points.',
  },
  {
    target: 'client',
    from: except('client', 'contracts', 'workflows'),
    message: 'client/ imports only contracts/ and (as types) workflows/.',
  },
  {
    target: 'api',
    from: except('api', 'contracts', 'client'),
    message: 'The API imports only contracts/, client/ and its own files.',
  },
  {
    target: '!(workers|bin)/**',
    from: 'workers',
    message: 'workers/ holds entry points: nothing imports them (shared code goes to runtime/, cli/ or client/).',
  },
  {
    target: '!(dev|test|bench|workers)/**',
    from: 'dev',
    message: 'dev/ is the embedded stack for development and tests: only workers/, test/ and bench/ import it.',
  },
];

/** What workflows may import: deterministic code only. */
const WORKFLOW_IMPORTS = {
  paths: nodeBuiltins.map((name) => ({ name, message: 'Workflows are deterministic: no node builtins.' })),
  patterns: [
    {
      regex: '^(?!@temporalio/workflow$|@temporalio/common$|\\.{1,2}/)',
      message: 'Workflows may import only @temporalio/workflow, workflow-local files and the plain-JSON shared types.',
    },
  ],
};

/** The pinned long-lived workflows (contracts/versioning.ts): no patches, continue-as-new onto the current build. */
const PINNED_LONG_LIVED = ['workflows/proxy/**/*.ts', 'workflows/pool/**/*.ts', 'workflows/host-monitor.ts'];

export default tseslint.config(
  { ignores: ['node_modules/**', '.local/**', '.data/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver': { node: { extensions: ['.ts', '.js'] } },
      // Without these, import-x reads no .ts file's imports and no-cycle sees no cycle at all.
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['test', 'describe', 'it', 'suite', 'before', 'after'], package: 'node:test' },
          ],
        },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'separate-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: ZONES }],
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', WORKFLOW_IMPORTS] },
  },
  {
    files: PINNED_LONG_LIVED,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          ...WORKFLOW_IMPORTS,
          paths: [
            ...WORKFLOW_IMPORTS.paths,
            {
              name: '@temporalio/workflow',
              importNames: ['patched', 'deprecatePatch'],
              message:
                'Pinned runs never replay another build, so they need no patch (docs/temporal.md, "Upgrading workers").',
            },
            {
              name: '@temporalio/workflow',
              importNames: ['continueAsNew', 'makeContinueAsNewFunc'],
              message:
                'A pinned long-lived run continues as new onto the current build: continueOntoCurrentBuild (workflows/upgrade.ts).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+activities(/|$)',
              allowTypeImports: true,
              message: 'Workflows import activities as types only (proxyActivities<typeof activities>).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['client/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+workflows(/|$)',
              allowTypeImports: true,
              message: 'client/ imports workflows as types only (typeof proxyWorkflow), never their code.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['contracts/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!@temporalio/workflow$|\\./)',
              message: 'contracts/ imports only its own files and @temporalio/workflow (for define*).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@temporalio/*'], message: 'The API calls Temporal through client/, never the SDK itself.' },
          ],
        },
      ],
    },
  },
  {
    files: ['lib/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@temporalio/*'], message: 'lib/ never imports Temporal: the provider must run without it.' },
          ],
        },
      ],
    },
  },
  {
    // The bin/ launchers are plain JavaScript (so that nothing is type-stripped before the compile
    // cache is on): linted without type information.
    files: ['bin/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: { process: 'readonly' } },
  },
  {
    // The fleet page's script (api/fleet-page.ts) runs in the browser as written: no build step.
    files: ['api/fleet/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: Object.fromEntries(
        ['document', 'sessionStorage', 'location', 'history', 'fetch', 'setTimeout', 'clearTimeout']
          .concat(['AbortController', 'URLSearchParams'])
          .map((g) => [g, 'readonly']),
      ),
    },
  },
);
