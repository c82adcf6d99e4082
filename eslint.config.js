// ESLint flat config. Type-aware rules for all TypeScript; workflows/ gets the determinism
// override (no node builtins, no imports beyond @temporalio/workflow, type-only activities and
// the plain-JSON shared types).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['node_modules/**', '.local/**', '.data/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver': { node: { extensions: ['.ts', '.js'] } } },
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
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({ name, message: 'Workflows are deterministic: no node builtins.' })),
          patterns: [
            {
              regex: '^(?!@temporalio/workflow$|@temporalio/common$|\\.{1,2}/)',
              message:
                'Workflows may import only @temporalio/workflow, workflow-local files and the plain-JSON shared types.',
            },
            {
              regex: '^\\.\\./(lib|workers|api)/',
              message: 'Workflows must not import lib/, workers/ or api/ (I/O lives in activities).',
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
              group: ['../activities', '../activities/*'],
              allowTypeImports: true,
              message: 'Workflows import activities as types only (proxyActivities<typeof activities>).',
            },
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
);
