/**
 * api/tracing.ts: one server span per request, named by the route's template, with the method,
 * route, scheme and status only; a caller's traceparent is its parent; the route's handler runs in
 * its context even after a request body was read.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, it } from 'node:test';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { traceRequests } from '../../api/tracing.ts';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let app: FastifyInstance;

before(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  app = Fastify();
  traceRequests(app, provider.getTracer('test'));
  // What the handler sees as the active span: the request's, after the body was read.
  app.post('/v1/things/:name', async (request, reply) => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return reply.code(201).send({ active: trace.getActiveSpan()?.spanContext().spanId ?? null, body: request.body });
  });
  app.get('/v1/boom', () => {
    throw new Error('boom');
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
after(async () => {
  await app?.close();
  context.disable();
  propagation.disable();
});

const base = (): string => {
  const a = app.server.address() as { port: number };
  return `http://127.0.0.1:${a.port}`;
};

it('a POST is one server span named by its route, the handler runs in it, no token or body in it', async () => {
  exporter.reset();
  const res = await fetch(`${base()}/v1/things/secret-name?q=1`, {
    method: 'POST',
    headers: { authorization: 'Bearer tok-123', 'content-type': 'application/json' },
    body: JSON.stringify({ password: 'hunter2' }),
  });
  assert.equal(res.status, 201);
  const { active } = (await res.json()) as { active: string | null };
  const spans = exporter.getFinishedSpans();
  assert.equal(spans.length, 1, spans.map((s) => s.name).join(', '));
  const span = spans[0]!;
  assert.equal(span.name, 'POST /v1/things/:name');
  assert.equal(span.kind, SpanKind.SERVER);
  assert.equal(active, span.spanContext().spanId, "the handler's active span is the request's");
  assert.deepEqual(span.attributes, {
    'http.request.method': 'POST',
    'http.route': '/v1/things/:name',
    'url.scheme': 'http',
    'http.response.status_code': 201,
  });
  assert.equal(span.status.code, SpanStatusCode.UNSET);
  assert.equal(span.parentSpanId, undefined, 'no traceparent: a root span');
});

it('a body that arrives after the headers: the handler still runs in the request span', async () => {
  exporter.reset();
  const { port } = app.server.address() as { port: number };
  const answer = await new Promise<string>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/things/late',
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve(text));
      },
    );
    req.on('error', reject);
    req.flushHeaders();
    // The body in a later packet: Fastify reads it from stream events, outside the hook's context.
    setTimeout(() => req.end('{"late":true}'), 50);
  });
  const { active } = JSON.parse(answer) as { active: string | null };
  const span = exporter.getFinishedSpans()[0]!;
  assert.equal(active, span.spanContext().spanId);
});

it("a caller's traceparent makes the request span its child", async () => {
  exporter.reset();
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parentId = '00f067aa0ba902b7';
  const res = await fetch(`${base()}/v1/things/x`, {
    method: 'POST',
    headers: { traceparent: `00-${traceId}-${parentId}-01`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(res.status, 201);
  const span = exporter.getFinishedSpans()[0]!;
  assert.equal(span.spanContext().traceId, traceId);
  assert.equal(span.parentSpanId, parentId);
});

it('a 5xx is an error span, a path no route matches is named by its method only', async () => {
  exporter.reset();
  assert.equal((await fetch(`${base()}/v1/boom`)).status, 500);
  assert.equal((await fetch(`${base()}/v1/nothing/here`)).status, 404);
  const [boom, missing] = exporter.getFinishedSpans();
  assert.equal(boom?.name, 'GET /v1/boom');
  assert.equal(boom?.status.code, SpanStatusCode.ERROR);
  assert.equal(boom?.attributes['http.response.status_code'], 500);
  assert.equal(missing?.name, 'GET');
  assert.equal(missing?.attributes['http.route'], undefined);
  assert.equal(missing?.attributes['http.response.status_code'], 404);
  assert.equal(missing?.status.code, SpanStatusCode.UNSET, "a 404 is the caller's error");
});
