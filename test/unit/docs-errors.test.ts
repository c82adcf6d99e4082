/**
 * docs/errors.md lists every error code the library defines (each `code = '...'` in lib/ and each
 * string literal of a `...Code` union type) and every code of contracts/errors.ts CODES.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CODES } from '../../contracts/errors.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

it('every error code in lib/ is documented in docs/errors.md', () => {
  const doc = readFileSync(join(root, 'docs/errors.md'), 'utf8');
  const codes = new Set<string>();
  for (const file of tsFiles(join(root, 'lib'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/\bcode(?::\s*\w+)?\s*=\s*'([A-Z][A-Z0-9_]+)'/g)) codes.add(m[1]!);
    for (const m of text.matchAll(/type \w*Code\s*=\s*([^;]+);/g)) {
      for (const lit of m[1]!.matchAll(/'([A-Z][A-Z0-9_]+)'/g)) codes.add(lit[1]!);
    }
    for (const m of text.matchAll(/code: '([A-Z][A-Z0-9_]+)'/g)) codes.add(m[1]!);
  }
  assert.ok(codes.size >= 20, `found only ${codes.size} codes: the scan is broken`);
  const missing = [...codes].filter((c) => !doc.includes(`\`${c}\``)).sort();
  assert.deepEqual(missing, [], `undocumented error codes: ${missing.join(', ')}`);
});

it('every code of contracts/errors.ts CODES is documented in docs/errors.md', () => {
  const doc = readFileSync(join(root, 'docs/errors.md'), 'utf8');
  const codes = Object.values(CODES);
  assert.ok(codes.length >= 10, `found only ${codes.length} codes`);
  const missing = codes.filter((c) => !doc.includes(`| \`${c}\` |`)).sort();
  assert.deepEqual(missing, [], `undocumented error codes: ${missing.join(', ')}`);
});
