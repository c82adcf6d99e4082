// The pre-deploy replay check's local side (egressctl replay): the workflow bundle built as the
// worker builds it (runtime/workflow-bundle.ts: workflows/index.ts, the OpenTelemetry plugin's
// interceptors, the same bundle cache), and the SDK's replayer run over downloaded histories, one
// outcome per history in the order they came. No server is needed here; client/replay.ts lists
// and downloads.
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { FetchedHistory, ReplayCandidate } from '../client/replay.ts';
import { sdkLoggerFromPino, sdkLogLevelFor } from '../lib/log/temporal-adapter.ts';
import { setupTracing } from './telemetry.ts';
import { defaultBundleCacheDir, loadWorkflowBundle } from './workflow-bundle.ts';

/** The project's root and the worker's bundle entry (workers/worker.ts bundles the same file). */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const WORKER_WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface ReplayOutcome {
  run: ReplayCandidate;
  /** `ok`; `violation`: the SDK's DeterminismViolationError; `error`: another replay failure. */
  result: 'ok' | 'violation' | 'error';
  /** The SDK's error (name: message), unless ok. */
  error?: string;
}

export interface ReplayBundleOptions {
  /**
   * Another bundle entry than the worker's (tests: a scratch copy with a deliberate change). Such
   * an entry is built in memory: its own files are outside the cache key.
   */
  workflowsPath?: string;
  /** The bundle cache (the worker's $EP_WORKFLOW_BUNDLE_CACHE or its default; `off`: none). */
  cacheDir?: string | undefined;
  log: Logger;
}

/** The bundle cache the worker uses by default: $EP_WORKFLOW_BUNDLE_CACHE (`off`: none) or ~/.cache/... */
export function workerBundleCacheDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dir = env['EP_WORKFLOW_BUNDLE_CACHE'] || defaultBundleCacheDir(env);
  return dir === 'off' ? undefined : dir;
}

/**
 * Replays `histories` against the bundle of `o.workflowsPath` (default the worker's) and yields
 * one outcome per history, in order. A download that fails ends the iteration with its error.
 */
export async function* replayHistories(
  histories: AsyncIterable<FetchedHistory>,
  o: ReplayBundleOptions,
): AsyncGenerator<ReplayOutcome> {
  const { Runtime, Worker } = await import('@temporalio/worker');
  try {
    // Core's and the SDK's logs into the command's pino stream (stderr), as the worker does.
    Runtime.install({
      logger: sdkLoggerFromPino(o.log.child({ component: 'temporal' })),
      telemetryOptions: { logging: { filter: { core: sdkLogLevelFor(o.log.level), other: 'ERROR' }, forward: {} } },
    });
  } catch {
    // Already installed in this process (a test's runtime): keep it.
  }
  const tracing = setupTracing(o.log.child({ component: 'otel' }));
  try {
    const own = o.workflowsPath === undefined;
    const bundle = await loadWorkflowBundle({
      root: ROOT,
      workflowsPath: o.workflowsPath ?? WORKER_WORKFLOWS_PATH,
      plugins: [tracing.plugin],
      cacheDir: own ? o.cacheDir : undefined,
      log: o.log.child({ component: 'bundle' }),
    });
    // The replayer answers in the order histories are given: the runs wait here for their results.
    const order: ReplayCandidate[] = [];
    async function* feed(): AsyncGenerator<{ workflowId: string; history: FetchedHistory['history'] }> {
      for await (const h of histories) {
        order.push(h.run);
        yield { workflowId: h.run.workflowId, history: h.history };
      }
    }
    const results = Worker.runReplayHistories(
      { workflowBundle: { code: bundle.code }, plugins: [tracing.plugin], replayName: 'egressctl-replay' },
      feed(),
    );
    for await (const r of results) {
      const run = order.shift();
      if (run === undefined || run.workflowId !== r.workflowId) {
        throw new Error(
          `replay result for ${r.workflowId} does not match the history sent (${run?.workflowId ?? 'none'})`,
        );
      }
      if (r.error === undefined) {
        yield { run, result: 'ok' };
      } else {
        const violation = r.error.name === 'DeterminismViolationError';
        yield { run, result: violation ? 'violation' : 'error', error: `${r.error.name}: ${r.error.message}` };
      }
    }
  } finally {
    await tracing.shutdown();
  }
}
