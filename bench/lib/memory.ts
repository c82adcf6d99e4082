/**
 * Where a benchmark's worker memory is: the process's RSS split into the main thread's JS heap
 * (activities, the SDK's worker), the worker threads' JS heaps (the SDK runs the workflows, and
 * its cache of them, in a worker thread) and the rest (native: the SDK's core and its caches,
 * V8's code, malloc). The thread heaps come from Node's diagnostic report, which asks each thread.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

const MiB = 2 ** 20;

export interface MemorySample {
  rssMiB: number;
  /** Used JS heap of the main thread, after a full GC of it. */
  mainHeapMiB: number;
  /** Used JS heap of every worker thread (not collected first: it includes their garbage). */
  threadHeapMiB: number;
  /** Memory outside the JS heaps: RSS less both heaps' committed size. */
  nativeMiB: number;
  /** The main thread's external memory (Buffers, the SDK's native objects' JS side). */
  externalMiB: number;
}

interface ReportHeap {
  javascriptHeap?: { totalMemory?: number; usedMemory?: number };
}

let gc: (() => void) | undefined;
/** A full GC of the main thread (V8's `gc`, enabled for this process on first use). */
export function collect(): void {
  if (gc === undefined) {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as () => void;
  }
  gc();
}

/** The split above, now. */
export function memorySample(): MemorySample {
  collect();
  const mu = process.memoryUsage();
  const report = process.report.getReport() as unknown as { workers?: ReportHeap[] };
  const threads = report.workers ?? [];
  const threadUsed = threads.reduce((a, w) => a + (w.javascriptHeap?.usedMemory ?? 0), 0);
  const threadTotal = threads.reduce((a, w) => a + (w.javascriptHeap?.totalMemory ?? 0), 0);
  return {
    rssMiB: mu.rss / MiB,
    mainHeapMiB: mu.heapUsed / MiB,
    threadHeapMiB: threadUsed / MiB,
    nativeMiB: (mu.rss - mu.heapTotal - threadTotal) / MiB,
    externalMiB: mu.external / MiB,
  };
}

/** `b - a` per item, in KiB, for each field. */
export function perItemKiB(a: MemorySample, b: MemorySample, n: number): MemorySample {
  const k = (f: keyof MemorySample): number => ((b[f] - a[f]) * 1024) / n;
  return {
    rssMiB: k('rssMiB'),
    mainHeapMiB: k('mainHeapMiB'),
    threadHeapMiB: k('threadHeapMiB'),
    nativeMiB: k('nativeMiB'),
    externalMiB: k('externalMiB'),
  };
}
