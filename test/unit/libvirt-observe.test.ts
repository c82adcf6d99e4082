/**
 * The observability hook: one span and one JSON log line per call, with procedure, serial,
 * duration, bytes and outcome; failures recorded on the span and logged at warn with their kind.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { it } from 'node:test';
import { SpanStatusCode } from '@opentelemetry/api';
import type { Attributes, Span, SpanOptions, Tracer } from '@opentelemetry/api';
import { pino } from 'pino';
import { LibvirtError, LibvirtTimeoutError } from '../../lib/libvirt/errors.ts';
import { tracingObserver } from '../../lib/libvirt/observe.ts';

interface RecordedSpan {
  name: string;
  attributes: Attributes;
  status?: { code: SpanStatusCode; message?: string };
  exceptions: unknown[];
  ended: number;
}

/** A tracer that records what the observer does with its spans (the API's no-op records nothing). */
function recordingTracer(spans: RecordedSpan[]): Tracer {
  const startSpan = (name: string, options?: SpanOptions): Span => {
    const rec: RecordedSpan = { name, attributes: { ...options?.attributes }, exceptions: [], ended: 0 };
    spans.push(rec);
    const span = {
      setAttributes(a: Attributes) {
        Object.assign(rec.attributes, a);
        return span;
      },
      setStatus(s: { code: SpanStatusCode; message?: string }) {
        rec.status = s;
        return span;
      },
      recordException(e: unknown) {
        rec.exceptions.push(e);
      },
      end() {
        rec.ended++;
      },
    };
    return span as unknown as Span;
  };
  return { startSpan, startActiveSpan: () => assert.fail('not used') };
}

function capture(): { logger: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  const logger = pino({ timestamp: pino.stdTimeFunctions.isoTime }, sink);
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

it('a successful call gives one span and one info line with procedure, serial, duration and bytes', () => {
  const spans: RecordedSpan[] = [];
  const { logger, lines } = capture();
  const observer = tracingObserver({ logger, tracer: recordingTracer(spans), attributes: { host: 'h1' } });
  const obs = observer.start({ proc: 157, serial: 7, bytesOut: 0 });
  obs.end({ bytesIn: 8 });
  obs.end({ bytesIn: 8 }); // a second end is ignored
  assert.equal(spans.length, 1);
  assert.equal(spans[0]!.name, 'libvirt CONNECT_GET_LIB_VERSION');
  assert.equal(spans[0]!.ended, 1);
  assert.equal(spans[0]!.status?.code, SpanStatusCode.OK);
  assert.equal(spans[0]!.attributes['libvirt.serial'], 7);
  assert.equal(spans[0]!.attributes['libvirt.bytes_in'], 8);
  assert.equal(spans[0]!.attributes['host'], 'h1');
  const out = lines();
  assert.equal(out.length, 1);
  const line = out[0]!;
  assert.equal(line.proc, 'CONNECT_GET_LIB_VERSION');
  assert.equal(line.serial, 7);
  assert.equal(line.outcome, 'ok');
  assert.equal(line.bytes_in, 8);
  assert.equal(line.bytes_out, 0);
  assert.equal(line.host, 'h1');
  assert.equal(typeof line.duration_ms, 'number');
  assert.match(String(line.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'RFC 3339 timestamp');
});

it('a failed call records the exception, an error status, and a warn line with the kind', () => {
  const spans: RecordedSpan[] = [];
  const { logger, lines } = capture();
  const observer = tracingObserver({ logger, tracer: recordingTracer(spans) });
  const notFound = new LibvirtError(
    { code: 42, domain: 10, message: "Domain not found: no domain with matching name 'x'" },
    23,
  );
  observer.start({ proc: 23, serial: 3, bytesOut: 12 }).end({ error: notFound });
  observer.start({ proc: 87, serial: 4, bytesOut: 40 }).end({ error: new LibvirtTimeoutError('budget') });
  assert.equal(spans.length, 2);
  assert.equal(spans[0]!.status?.code, SpanStatusCode.ERROR);
  assert.deepEqual(spans[0]!.exceptions, [notFound]);
  const [first, second] = lines();
  assert.equal(first!.outcome, 'error');
  assert.equal(first!.level, 40);
  assert.equal(first!.kind, 'NotFound');
  assert.equal(first!.proc, 'DOMAIN_LOOKUP_BY_NAME');
  assert.equal(second!.kind, 'Transient');
  assert.equal(second!.proc, 'STORAGE_POOL_GET_INFO');
});

it('an upload is observed as a whole: one stream line with the bytes sent', async () => {
  const { pairWithPeer } = await import('../support/fake-daemon.ts');
  const { LibvirtConnection } = await import('../../lib/libvirt/connection.ts');
  const { uploadStream } = await import('../../lib/libvirt/upload.ts');
  const { VOL_UPLOAD_CALL } = await import('./fixtures/libvirt-frames.ts');
  const { client, peer } = pairWithPeer();
  const { logger, lines } = capture();
  const conn = new LibvirtConnection(client, { observer: tracingObserver({ logger, tracer: recordingTracer([]) }) });
  try {
    const upload = uploadStream(conn, 208, VOL_UPLOAD_CALL.bytes.subarray(28), [Buffer.alloc(300_000, 1)], {
      chunkBytes: 128 * 1024,
    });
    const call = await peer.nextCall();
    peer.reply(call);
    await peer.nextStreamControl(call.serial);
    peer.streamOk(call);
    assert.equal((await upload).bytes, 300_000);
    const stream = lines().filter((l) => l.stream === true);
    assert.equal(stream.length, 1);
    assert.equal(stream[0]!.proc, 'STORAGE_VOL_UPLOAD');
    assert.equal(stream[0]!.bytes_out, 300_000);
    assert.equal(stream[0]!.outcome, 'ok');
  } finally {
    conn.kill(new Error('test over'));
    peer.dispose();
  }
});
