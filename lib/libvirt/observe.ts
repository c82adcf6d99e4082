/**
 * Observability hooks: each call gets one OpenTelemetry span and one log line with procedure,
 * serial, duration, bytes and outcome. The connection calls `start` when a call (or upload) is
 * sent and `end` once when it settles.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Tracer } from '@opentelemetry/api';
import { errorKind } from '../errors.ts';
import { procName } from './constants.ts';
import type { LineLogger } from '../log/line-logger.ts';

export interface CallStart {
  proc: number;
  serial: number;
  bytesOut: number;
  /** A streamed call (upload): bytes counts the whole stream. */
  stream?: boolean;
}

export interface CallEnd {
  bytesIn?: number;
  bytesOut?: number;
  error?: unknown;
}

export interface CallObservation {
  end(result: CallEnd): void;
}

/** What the connection reports calls to. */
export interface CallObserver {
  start(call: CallStart): CallObservation;
}

export interface TracingObserverOptions {
  /** Where the one line per call goes (level info on success, warn on failure). */
  logger?: LineLogger;
  /** Tracer for the spans; defaults to the global OpenTelemetry tracer `egress-proxies/libvirt`. */
  tracer?: Tracer;
  /** Extra fields on every line and span, e.g. `{ host: 'h1' }`. */
  attributes?: Record<string, string>;
}

/** The standard observer: an OpenTelemetry span and a pino line per call. */
export function tracingObserver(options: TracingObserverOptions = {}): CallObserver {
  const tracer = options.tracer ?? trace.getTracer('egress-proxies/libvirt');
  const attributes = options.attributes ?? {};
  return {
    start(call) {
      const name = procName(call.proc);
      const began = performance.now();
      const span = tracer.startSpan(`libvirt ${name}`, {
        kind: SpanKind.CLIENT,
        attributes: { 'rpc.system': 'libvirt', 'rpc.method': name, 'libvirt.serial': call.serial, ...attributes },
      });
      let ended = false;
      return {
        end(result) {
          if (ended) return;
          ended = true;
          const durationMs = Math.round((performance.now() - began) * 1000) / 1000;
          const bytesOut = result.bytesOut ?? call.bytesOut;
          const bytesIn = result.bytesIn ?? 0;
          span.setAttributes({ 'libvirt.bytes_out': bytesOut, 'libvirt.bytes_in': bytesIn });
          const line = {
            ...attributes,
            proc: name,
            serial: call.serial,
            duration_ms: durationMs,
            bytes_out: bytesOut,
            bytes_in: bytesIn,
            outcome: result.error === undefined ? 'ok' : 'error',
            ...(call.stream ? { stream: true } : {}),
          };
          if (result.error === undefined) {
            span.setStatus({ code: SpanStatusCode.OK });
            options.logger?.info(line, 'libvirt call');
          } else {
            const err = result.error instanceof Error ? result.error : new Error(JSON.stringify(result.error));
            span.recordException(err);
            span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
            options.logger?.warn(
              { ...line, err: { name: err.name, message: err.message }, kind: errorKind(result.error) },
              'libvirt call failed',
            );
          }
          span.end();
        },
      };
    },
  };
}
