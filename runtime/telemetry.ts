// OpenTelemetry in the worker and the API: a global tracer provider with an AsyncLocalStorage
// context, so the per-RPC spans of lib/libvirt (one per call, made with the global tracer) become
// children of the activity span that Temporal's OpenTelemetry interceptors open around each
// activity, and the API's request spans (api/tracing.ts) the parents of the workflows it starts
// (the plugin's client interceptor carries the context in the workflow's headers). The OTLP
// settings themselves are read in runtime/otel-settings.ts.
//
// Where spans go (docs/monitoring.md, "Traces"):
// - always: the process's pino log at debug level (LOG_LEVEL=debug shows them), one line a span;
// - when an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT
//   or OTEL_TRACES_EXPORTER=otlp, the OpenTelemetry SDK's standard variables): OTLP over HTTP with
//   protobuf, through a batch processor with a bounded queue (OTEL_BSP_*), flushed at shutdown.
//   A receiver that does not answer never stops the process: its spans are dropped and one warning
//   is logged until an export succeeds again.
// Tests pass a processor of their own to read spans back.
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Resource, envDetectorSync } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import type { Context } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import type { ExportResult } from '@opentelemetry/core';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import type { Logger } from 'pino';
import { DEFAULT_SERVICE_NAME, otlpSettingsFromEnv } from './otel-settings.ts';
import type { Env } from './otel-settings.ts';

export { DEFAULT_SERVICE_NAME, otlpSettingsFromEnv } from './otel-settings.ts';
export type { OtlpSettings } from './otel-settings.ts';

/** How long shutdown waits for the last batch to reach the receiver. */
export const SHUTDOWN_FLUSH_MS = 5_000;

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

/**
 * Wraps the OTLP exporter: a failed export drops its spans (the batch processor does not retry)
 * and logs one warning for the whole run of failures; the first success after it logs how many
 * spans were lost.
 */
class WarnOnceExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #log: Logger;
  readonly #url: string;
  #failing = false;
  #dropped = 0;
  constructor(inner: SpanExporter, log: Logger, url: string) {
    this.#inner = inner;
    this.#log = log;
    this.#url = url;
  }
  get dropped(): number {
    return this.#dropped;
  }
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        if (this.#failing) {
          this.#failing = false;
          this.#log.info({ endpoint: this.#url, droppedSpans: this.#dropped }, 'trace export recovered');
        }
      } else {
        this.#dropped += spans.length;
        if (!this.#failing) {
          this.#failing = true;
          this.#log.warn(
            { endpoint: this.#url, err: result.error?.message, spans: spans.length },
            'trace export failed: spans are dropped until the OTLP receiver answers (logged once)',
          );
        }
      }
      done(result);
    });
  }
  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** One processor for the provider and the worker plugin that hands every span to each of several. */
class FanOutProcessor implements SpanProcessor {
  readonly #all: SpanProcessor[];
  constructor(all: SpanProcessor[]) {
    this.#all = all;
  }
  onStart(span: Span, parent: Context): void {
    for (const p of this.#all) p.onStart(span, parent);
  }
  onEnd(span: ReadableSpan): void {
    for (const p of this.#all) p.onEnd(span);
  }
  async forceFlush(): Promise<void> {
    await Promise.all(this.#all.map((p) => p.forceFlush()));
  }
  async shutdown(): Promise<void> {
    await Promise.all(this.#all.map((p) => p.shutdown()));
  }
}

export interface TracingOptions {
  /** A processor of the caller's (tests read spans back with it); replaces the log processor. */
  processor?: SpanProcessor;
  /** The OTel variables to read (default process.env). */
  env?: Env;
  /** A base OTLP endpoint that wins over the variables (an --otlp-endpoint option). */
  otlpEndpoint?: string | undefined;
  /** service.name when OTEL_SERVICE_NAME is not set (default egress-proxies-worker). */
  serviceName?: string;
}

export interface Tracing {
  /** The worker plugin: client, activity and workflow interceptors plus the workflow span sink. */
  plugin: OpenTelemetryPlugin;
  /** Where spans are exported over OTLP, or undefined. */
  otlpUrl: string | undefined;
  /** Sends every finished span now (tests; the process's shutdown does it too). */
  forceFlush(): Promise<void>;
  /** Flushes (bounded by SHUTDOWN_FLUSH_MS) and stops the exporters. */
  shutdown(): Promise<void>;
}

/**
 * Registers the global tracer provider (once per process) and returns the worker plugin. Reads the
 * OTLP variables itself (otlpSettingsFromEnv; an unusable value throws OptionError naming it).
 */
export function setupTracing(log: Logger, o: TracingOptions = {}): Tracing {
  const settings = otlpSettingsFromEnv(o.env ?? process.env, { endpoint: o.otlpEndpoint, serviceName: o.serviceName });
  const resource = new Resource({ 'service.name': DEFAULT_SERVICE_NAME })
    .merge(envDetectorSync.detect())
    .merge(new Resource({ 'service.name': settings.serviceName }));
  const processors = [o.processor ?? new SimpleSpanProcessor(new PinoSpanExporter(log))];
  let exporter: WarnOnceExporter | undefined;
  if (settings.url !== undefined) {
    // Headers, timeout and compression: OTEL_EXPORTER_OTLP_(TRACES_)HEADERS/TIMEOUT/COMPRESSION,
    // read by the exporter; queue and batch sizes: OTEL_BSP_*, read by the batch processor.
    exporter = new WarnOnceExporter(new OTLPTraceExporter({ url: settings.url }), log, settings.url);
    processors.push(new BatchSpanProcessor(exporter));
    log.info({ endpoint: settings.url, serviceName: settings.serviceName }, 'traces exported over OTLP');
  }
  const spanProcessor = processors.length === 1 ? processors[0]! : new FanOutProcessor(processors);
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager().enable() });
  return {
    plugin: new OpenTelemetryPlugin({ resource, spanProcessor }),
    otlpUrl: settings.url,
    forceFlush: () => provider.forceFlush(),
    shutdown: async () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), SHUTDOWN_FLUSH_MS);
        timer.unref();
      });
      // A last batch the receiver refused is already counted and warned about: not an error here.
      const flushed = provider.shutdown().then(
        () => 'done' as const,
        () => 'failed' as const,
      );
      const done = await Promise.race([flushed, late]);
      clearTimeout(timer);
      if (done === 'late')
        log.warn({ endpoint: settings.url, waitedMs: SHUTDOWN_FLUSH_MS }, 'trace flush at shutdown cut short');
      if (exporter && exporter.dropped > 0)
        log.info({ endpoint: settings.url, droppedSpans: exporter.dropped }, 'spans dropped by failed trace exports');
    },
  };
}
