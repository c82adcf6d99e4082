// A server span per HTTP request (docs/monitoring.md, "Traces"), made with the global tracer: a
// no-op until a tracer provider is registered (workers/api.ts does when an OTLP endpoint is
// configured). The span is named by the route's template (`POST /v1/proxies`, never the path with
// its names in it) and carries only the method, the route, the scheme and the status: no headers,
// tokens, query strings or bodies. A W3C `traceparent` the caller sends makes it a child of the
// caller's span. The route's handler runs in the span's context, so the workflows it starts
// (through a client with the OpenTelemetry plugin) carry it in their headers: the worker's spans of
// that workflow, its activities and their libvirt RPCs join the request's trace.
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Span, Tracer } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** The instrumentation scope of the request spans. */
export const API_TRACER_NAME = 'egress-proxies-api';

/**
 * Opens a span per request on `app`, the request's handling in its context. Call it before the
 * other onRequest hooks (auth), so that their work and their refusals are inside the span.
 */
export function traceRequests(app: FastifyInstance, tracer: Tracer = trace.getTracer(API_TRACER_NAME)): void {
  const traced = new WeakMap<FastifyRequest, Span>();
  const end = (request: FastifyRequest, status: number | undefined): void => {
    const span = traced.get(request);
    if (span === undefined) return;
    traced.delete(request);
    if (status === undefined) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'the client went away before the response' });
    } else {
      span.setAttribute('http.response.status_code', status);
      // A server span's 4xx is the caller's error, not the server's (the semantic conventions).
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  };

  app.addHook('onRequest', (request, _reply, done) => {
    const { method } = request;
    const route = request.routeOptions.url;
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const span = tracer.startSpan(
      route === undefined ? method : `${method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': method,
          'url.scheme': request.protocol,
          ...(route === undefined ? {} : { 'http.route': route }),
        },
      },
      parent,
    );
    traced.set(request, span);
    // Every later step runs in the span's context: the hooks after this one (auth), the body's
    // stream events (Node 24's AsyncLocalStorage follows them; test/unit/api-tracing.test.ts sends a
    // late body) and the handler.
    context.with(trace.setSpan(parent, span), done);
  });
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined);
    done();
  });
}
