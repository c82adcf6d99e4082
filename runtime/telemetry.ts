// OpenTelemetry in the worker: a global tracer provider with an AsyncLocalStorage context, so the
// per-RPC spans of lib/libvirt (one per call, made with the global tracer) become children of the
// activity span that Temporal's OpenTelemetry interceptors open around each activity. Spans are
// written as JSON lines to the worker's pino log at debug level (LOG_LEVEL=debug shows them);
// tests pass a processor of their own to read them back.
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ExportResultCode } from '@opentelemetry/core';
import type { ExportResult } from '@opentelemetry/core';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import type { Logger } from 'pino';

/** Writes each finished span as one debug line: name, ids, parent, duration, status, attributes. */
export class PinoSpanExporter implements SpanExporter {
  readonly #log: Logger;
  constructor(log: Logger) {
    this.#log = log;
  }
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    if (this.#log.isLevelEnabled('debug')) {
      for (const s of spans) {
        const ctx = s.spanContext();
        this.#log.debug(
          {
            span: s.name,
            traceId: ctx.traceId,
            spanId: ctx.spanId,
            parentSpanId: s.parentSpanId,
            durationMs: s.duration[0] * 1e3 + s.duration[1] / 1e6,
            status: s.status.code,
            attributes: s.attributes,
          },
          'span',
        );
      }
    }
    done({ code: ExportResultCode.SUCCESS });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

export interface Tracing {
  /** The worker plugin: client, activity and workflow interceptors plus the workflow span sink. */
  plugin: OpenTelemetryPlugin;
  shutdown(): Promise<void>;
}

/** Registers the global tracer provider (once per process) and returns the worker plugin. */
export function setupTracing(log: Logger, processor?: SpanProcessor): Tracing {
  const resource = new Resource({ 'service.name': 'egress-proxies-worker' });
  const spanProcessor = processor ?? new SimpleSpanProcessor(new PinoSpanExporter(log));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager().enable() });
  return {
    plugin: new OpenTelemetryPlugin({ resource, spanProcessor }),
    shutdown: () => provider.shutdown(),
  };
}
