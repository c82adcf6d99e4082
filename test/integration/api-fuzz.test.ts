/**
 * A schema-driven fuzz of the HTTP API from its own OpenAPI document, against the dev server
 * (no worker polls the API's task queue, so nothing could run anyway): for every operation,
 * fast-check builds query strings, path parameters and bodies from the document's schemas and
 * then breaks them (unknown fields, wrong types, values out of range, arbitrary JSON, raw text
 * under random content types). No answer is a 5xx; every body the schema refuses is a 400/413
 * (a pool's action on a pool that is not there, a 404);
 * no workflow start is ever attempted and none appears on the task queue. Bounded in runs and time.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { http, startTestApi, writeTokens } from '../support/api.ts';
import type { TestApi, TestTokens } from '../support/api.ts';
import { connectClient, onTaskQueues, uniqueId } from '../support/temporal.ts';

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  maxLength?: number;
};
interface Operation {
  method: string;
  path: string;
  query: Record<string, Schema>;
  pathParams: string[];
  body?: Schema;
}

const RUNS_PER_OPERATION = 120;
const TIME_PER_OPERATION_MS = 25_000;
const run = Date.now().toString(36);

/** Values the schema accepts (the subset of JSON Schema the API uses). */
function valid(s: Schema): fc.Arbitrary<unknown> {
  if (s.enum) return fc.constantFrom(...s.enum);
  switch (s.type) {
    case 'string':
      return s.pattern
        ? fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length <= (s.maxLength ?? 1e9))
        : fc.string({ maxLength: 20 });
    case 'integer':
      return fc.integer({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6 });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valid(s.items ?? {}), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 4, 4) });
    case 'object': {
      const props = s.properties ?? {};
      const required = new Set(s.required ?? []);
      return fc.record(Object.fromEntries(Object.entries(props).map(([k, v]) => [k, valid(v)])), {
        requiredKeys: Object.keys(props).filter((k) => required.has(k)),
      });
    }
    default:
      return fc.jsonValue();
  }
}

/** Values that are probably not accepted: a valid value broken in one place, or anything at all. */
function broken(s: Schema): fc.Arbitrary<unknown> {
  const anything = fc.oneof(fc.jsonValue(), fc.string(), fc.integer(), fc.double(), fc.constant(null));
  if (s.type !== 'object' || !s.properties) return anything;
  const props = s.properties;
  const keys = Object.keys(props);
  return fc.oneof(
    anything,
    fc.tuple(valid(s), fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue()).map(([v, k, x]) => ({
      ...(v as object),
      [k]: x,
    })),
    fc.tuple(valid(s), fc.constantFrom(...keys), anything).map(([v, k, x]) => ({ ...(v as object), [k]: x })),
    fc
      .tuple(valid(s), fc.constantFrom(...keys))
      .chain(([v, k]) => broken(props[k]!).map((x) => ({ ...(v as object), [k]: x }))),
    valid(s).map((v) => {
      const o = { ...(v as Record<string, unknown>) };
      delete o[keys[0]!];
      return o;
    }),
  );
}

function operations(doc: { paths: Record<string, Record<string, unknown>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(methods)) {
      const op = raw as {
        parameters?: { in: string; name: string; schema: Schema }[];
        requestBody?: { content: Record<string, { schema: Schema }> };
      };
      ops.push({
        method: method.toUpperCase(),
        path,
        query: Object.fromEntries((op.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p.schema])),
        pathParams: (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
        body: op.requestBody?.content['application/json']?.schema,
      });
    }
  }
  return ops;
}

describe('API fuzz from its OpenAPI document', { timeout: 600_000 }, () => {
  let client: Client;
  let tmp: string;
  let tokens: TestTokens;
  let api: TestApi;
  let doc: { paths: Record<string, Record<string, unknown>> };
  const taskQueue = uniqueId('api-fuzz');
  const entry = `fz${run}`;

  before(async () => {
    client = await connectClient();
    tmp = await mkdtemp(join(tmpdir(), 'ep-fuzz-'));
    tokens = await writeTokens(tmp);
    api = await startTestApi(client, taskQueue, tokens, 3_000);
    doc = (await http(api.url, 'GET', '/openapi.json', { token: tokens.admin })).body as typeof doc;
  });
  after(async () => {
    // Should a broken build let a start through, end what it started: no worker polls this queue.
    if (client) {
      for await (const wf of client.workflow.list({
        query: `${onTaskQueues(taskQueue)} AND ExecutionStatus = 'Running'`,
      })) {
        await client.workflow
          .getHandle(wf.workflowId, wf.runId)
          .terminate('left by the API fuzz')
          .catch(() => undefined);
      }
    }
    await api?.close();
    await client?.connection.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('the document describes every route, with closed body schemas', () => {
    const ops = operations(doc);
    assert.equal(ops.length, 27, ops.map((o) => `${o.method} ${o.path}`).join(', '));
    for (const path of [
      '/v1/proxies',
      '/v1/proxies/{entry}/{name}/resize',
      '/v1/pools',
      '/v1/pools/{entry}/{pool}/scale',
      '/v1/pools/{entry}/{pool}/members/{member}/replace',
      '/v1/hosts/{entry}/{host}/cordon',
      '/v1/hosts/{entry}/{host}/drain',
      '/v1/hosts/{entry}/{host}/uncordon',
    ]) {
      const post = ops.find((o) => o.method === 'POST' && o.path === path)!;
      assert.equal((post.body as { additionalProperties?: boolean }).additionalProperties, false, path);
    }
  });

  it('no 5xx, invalid bodies are 400/413, and no workflow is started', async () => {
    const ajv = new Ajv({ strict: false, coerceTypes: false });
    const seen: Record<string, number> = {};
    for (const op of operations(doc)) {
      const validBody = op.body ? ajv.compile(op.body) : undefined;
      const queryValue = (s: Schema) => fc.oneof(valid(s).map(String), fc.string({ maxLength: 30 }));
      const query = fc.record(
        {
          ...Object.fromEntries(Object.entries(op.query).map(([k, s]) => [k, queryValue(s)])),
          unknown: fc.string({ maxLength: 8 }),
        },
        { requiredKeys: [] },
      );
      const pathValue = fc.oneof(
        fc.constant(entry),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/).map((n) => `${entry.slice(0, 2)}${n}`),
        fc.string({ minLength: 1, maxLength: 50 }),
      );
      const body = op.body
        ? fc.oneof(
            broken(op.body).map((b) => ({ kind: 'json' as const, b })),
            fc
              .tuple(
                fc.string({ maxLength: 200 }),
                fc.constantFrom('application/json', 'text/plain', 'application/xml', ''),
              )
              .map(([raw, type]) => ({ kind: 'raw' as const, raw, type })),
          )
        : fc.constant(undefined);
      await fc.assert(
        fc.asyncProperty(query, fc.array(pathValue, { minLength: 2, maxLength: 2 }), body, async (q, params, b) => {
          let path = op.path;
          op.pathParams.forEach((p, i) => (path = path.replace(`{${p}}`, encodeURIComponent(params[i]!))));
          const qs = new URLSearchParams(q as Record<string, string>).toString();
          // A "." or ".." path segment is resolved away by the URL parser before the request is
          // sent (WHATWG URL; "%2E" too), so the request would name another route: not sent.
          if (params.slice(0, op.pathParams.length).some((p) => p === '.' || p === '..')) return;
          // A body the schema accepts would start a proxy: only broken ones are sent.
          if (b?.kind === 'json' && validBody?.(b.b)) return;
          // Likewise a warm of a well-formed entry/key starts a warm: only malformed ones are sent.
          if (
            op.path.endsWith('/warm') &&
            op.method === 'POST' &&
            params.every((p) => /^[a-z][a-z0-9-]{0,39}$/.test(p))
          ) {
            return;
          }
          const r = await http(api.url, op.method, qs === '' ? path : `${path}?${qs}`, {
            token: tokens.admin,
            ...(b === undefined ? {} : b.kind === 'json' ? { body: b.b } : { raw: b.raw, type: b.type || 'x/none' }),
            timeoutMs: 20_000,
          });
          seen[r.status] = (seen[r.status] ?? 0) + 1;
          // /readyz answers 503 by design here: no worker polls the fuzz task queue.
          const expected503 = op.path === '/readyz' && r.body['ready'] === false;
          assert.ok(r.status < 500 || expected503, `${op.method} ${path}?${qs} → ${r.status} ${r.text.slice(0, 300)}`);
          assert.doesNotMatch(r.text, /\n\s+at |\.ts:\d+/, 'no stack trace in a body');
          // A POST to a pool's action (pause and resume take no body) names a pool that is not
          // there: 404, and nothing starts.
          const refusals = op.path.startsWith('/v1/pools/') ? [400, 404, 413, 415] : [400, 413, 415];
          if (op.method === 'POST') assert.ok(refusals.includes(r.status), `${r.status} ${r.text}`);
        }),
        {
          numRuns: RUNS_PER_OPERATION,
          interruptAfterTimeLimit: TIME_PER_OPERATION_MS,
          seed: Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31),
        },
      );
    }
    assert.equal(api.starts(), 0, 'no workflow start was attempted');
    const started = [];
    for await (const wf of client.workflow.list({ query: onTaskQueues(taskQueue) })) started.push(wf.workflowId);
    assert.deepEqual(started, []);
    assert.ok((seen[400] ?? 0) > 0, JSON.stringify(seen));
  });
});
