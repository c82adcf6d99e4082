/**
 * docs/api.md lists every error code of api/errors.ts API_ERRORS with its status, and no code the
 * API does not have; the API's routes construct errors only from that table (ApiError's type).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { API_ERRORS } from '../../api/errors.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const doc = readFileSync(join(root, 'docs/api.md'), 'utf8');

/** `| 404 | \`NOT_FOUND\` |` rows of the document. */
const documented = new Map<string, number>(
  [...doc.matchAll(/^\| (\d{3}) \| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => [m[2]!, Number(m[1])]),
);

it('every code of API_ERRORS is in docs/api.md with its status', () => {
  const codes = Object.entries(API_ERRORS);
  assert.ok(codes.length >= 20, `only ${codes.length} codes: the table is broken`);
  const wrong = codes.filter(([code, status]) => documented.get(code) !== status).map(([c, s]) => `${s} ${c}`);
  assert.deepEqual(wrong, [], `undocumented, or documented with another status: ${wrong.join(', ')}`);
});

it('docs/api.md lists no code the API does not answer with', () => {
  const extra = [...documented.keys()].filter((c) => !(c in API_ERRORS));
  assert.deepEqual(extra, []);
});

it("no code in api/ is written outside the table (every ApiError takes the table's key)", () => {
  const files = readdirSync(join(root, 'api')).filter((f) => f.endsWith('.ts'));
  const literal: string[] = [];
  for (const f of files) {
    const text = readFileSync(join(root, 'api', f), 'utf8');
    for (const m of text.matchAll(/new ApiError\(\s*'([A-Z_]+)'/g)) if (!(m[1]! in API_ERRORS)) literal.push(m[1]!);
    if (/new ApiError\(\s*\d{3}/.test(text)) literal.push(`${f}: a status written by hand`);
  }
  assert.deepEqual(literal, []);
});
