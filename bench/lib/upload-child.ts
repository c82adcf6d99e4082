/**
 * What the one-upload programs (bench/upload-once.ts, bench/upload-ssh-once.ts) share: their
 * upload options, the file as the upload's source, and the measured span (RSS sampled every 10 ms,
 * CPU, seconds) with the JSON line the bench reads.
 */
import { statSync } from 'node:fs';
import { DEFAULT_UPLOAD_CHUNK_BYTES } from '../../lib/libvirt/upload.ts';
import { fileChunks } from '../file-chunks.ts';

/** The options of every one-upload program (for `parseArgs`). */
export const UPLOAD_OPTIONS = {
  vol: { type: 'string' },
  file: { type: 'string' },
  chunk: { type: 'string', default: String(DEFAULT_UPLOAD_CHUNK_BYTES) },
  'read-bytes': { type: 'string', default: String(256 * 1024) },
} as const;

interface UploadValues {
  file?: string | undefined;
  chunk: string;
  'read-bytes': string;
}

/** Throws `--k is required` for the first of `keys` missing from `values`. */
export function requireOptions<K extends string>(values: Partial<Record<K, unknown>>, keys: readonly K[]): void {
  for (const k of keys) {
    if (!values[k]) throw new Error(`--${k} is required`);
  }
}

/** The upload's source (the file in `--read-bytes` pieces) and its chunk size. */
export function uploadInput(values: UploadValues): { chunks: AsyncGenerator<Uint8Array>; chunkBytes: number } {
  return {
    chunks: fileChunks(values.file!, Number(values['read-bytes'])),
    chunkBytes: Number(values.chunk),
  };
}

/** The figures of a measured span. */
export interface SpanFigures {
  seconds: number;
  startedMs: number;
  idleRss: number;
  peakRss: number;
  cpuUserS: number;
  cpuSystemS: number;
}

/** Starts a measured span (RSS sampled every 10 ms from now); `end()` stops it and returns its figures. */
export function startSpan(): { end(): SpanFigures } {
  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 10);
  const idle = process.memoryUsage.rss();
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  return {
    end(): SpanFigures {
      const seconds = (performance.now() - started) / 1000;
      const cpu = process.cpuUsage(cpu0);
      clearInterval(sampler);
      peak = Math.max(peak, process.memoryUsage.rss());
      return {
        seconds,
        startedMs: started,
        idleRss: idle,
        peakRss: peak,
        cpuUserS: cpu.user / 1e6,
        cpuSystemS: cpu.system / 1e6,
      };
    },
  };
}

/**
 * Checks that all of `file` went up and prints the one JSON line: seconds, bytes, when the span
 * began and when this line was written (ms since this process started), idle and peak RSS, the
 * process's max RSS, user and system CPU seconds, then `extra`.
 */
export function printOnceResult(
  span: SpanFigures,
  bytes: number,
  file: string,
  extra: Record<string, unknown> = {},
): void {
  const size = statSync(file).size;
  if (bytes !== size) throw new Error(`uploaded ${bytes} of ${size} bytes`);
  process.stdout.write(
    JSON.stringify({
      seconds: span.seconds,
      bytes,
      startedMs: span.startedMs,
      endMs: performance.now(),
      idleRss: span.idleRss,
      peakRss: span.peakRss,
      maxRssKiB: process.resourceUsage().maxRSS,
      cpuUserS: span.cpuUserS,
      cpuSystemS: span.cpuSystemS,
      ...extra,
    }) + '\n',
  );
}
