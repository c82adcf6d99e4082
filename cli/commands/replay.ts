import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { TASK_QUEUE } from '../../contracts/task-queues.ts';
import { CliError, EXIT } from '../http.ts';
import { positive, str, usage } from '../command.ts';
import type { Command } from '../command.ts';
import { TEMPORAL_CONNECTION_HELP, TEMPORAL_CONNECTION_OPTIONS } from '../../runtime/temporal-options.ts';

/** Default of --since and --limit. */
const DEFAULT_SINCE = '24h';
const DEFAULT_LIMIT = 200;
const MAX_LIMIT = 10_000;
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--since`: a duration back from `now` (`24h`, `90m`, `7d`, `1h30m`) or an RFC 3339 instant. */
export function parseSince(text: string, now: Date = new Date()): Date {
  if (/^(\d+[smhd])+$/.test(text)) {
    let ms = 0;
    for (const [, n, u] of text.matchAll(/(\d+)([smhd])/g)) ms += Number(n) * UNIT_MS[u!]!;
    if (ms > 0) return new Date(now.getTime() - ms);
  }
  if (/^\d{4}-\d{2}-\d{2}T/.test(text) && !Number.isNaN(Date.parse(text))) return new Date(Date.parse(text));
  throw usage(
    `--since must be a duration back from now (e.g. 24h, 90m, 7d, 1h30m) or an RFC 3339 time (e.g. 2026-12-01T00:00:00Z), got ${JSON.stringify(text)}`,
  );
}

export const replay: Command = {
  name: 'replay',
  usage: 'replay [--since 24h] [--limit N] [--type T ...] [--task-queue Q]',
  help: `egressctl replay [--since 24h] [--limit N] [--type T ...] [--task-queue Q]
  The pre-deploy check (docs/temporal.md, "Upgrading workers"): directly through Temporal (not the
  API), lists the runs of the project's workflow types that are open, or started or closed within
  --since (default ${DEFAULT_SINCE}; a duration or an RFC 3339 time), newest first, at most --limit
  (default ${DEFAULT_LIMIT}); downloads their histories and replays them against this build's
  workflow bundle (workflows/index.ts, bundled as the worker bundles it). Prints one line per run
  (--output json: one JSON line per run) and a summary on stderr. Exit 1 if any run does not
  replay (a determinism violation names the workflow ID, the run ID and the SDK's error): the new
  code would break it in flight; guard the change with patched() (docs/temporal.md).
  --type T            only this workflow type (repeatable; default every type the worker registers)
  --task-queue Q      only runs of this task queue (default any; the worker's is
                      $TEMPORAL_TASK_QUEUE or ${TASK_QUEUE})
  --timeout-ms MS     bounds the connection, the listing and each history's download (default 30000)
  For tests: --workflows-path FILE replays against another bundle entry (a scratch copy of the
  workflows), built in memory.

  Connection to Temporal (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and these):
${TEMPORAL_CONNECTION_HELP}`,
  options: {
    ...TEMPORAL_CONNECTION_OPTIONS,
    since: { type: 'string' },
    limit: { type: 'string' },
    type: { type: 'string', multiple: true },
    'task-queue': { type: 'string' },
    'workflows-path': { type: 'string' },
  },
  async run(ctx) {
    const since = parseSince(str(ctx, 'since') ?? DEFAULT_SINCE);
    const limit = positive(ctx, 'limit', DEFAULT_LIMIT);
    if (limit < 1 || limit > MAX_LIMIT) throw usage(`--limit must be 1 to ${MAX_LIMIT}, got ${limit}`);
    const taskQueue = str(ctx, 'task-queue');
    const given = str(ctx, 'workflows-path');
    const workflowsPath = given === undefined ? undefined : resolve(given);
    if (workflowsPath !== undefined && !existsSync(workflowsPath)) {
      throw usage(`--workflows-path ${given}: no such file (a workflows entry such as workflows/index.ts)`);
    }
    const [{ withTemporal }, client, local, { createLogger, logLevelFromEnv }] = await Promise.all([
      import('../temporal.ts'),
      import('../../client/replay.ts'),
      import('../../runtime/replay.ts'),
      import('../../lib/log/logger.ts'),
    ]);
    const types = (ctx.values['type'] as string[] | undefined) ?? [...client.PROJECT_WORKFLOW_TYPES];
    for (const t of types) {
      if (!client.PROJECT_WORKFLOW_TYPES.includes(t)) {
        throw usage(
          `--type ${JSON.stringify(t)} is not a workflow type of this worker: one of ${client.PROJECT_WORKFLOW_TYPES.join(', ')}`,
        );
      }
    }
    const log = createLogger({ name: 'egressctl', level: logLevelFromEnv(process.env, 'warn'), stream: 'stderr' });
    const counts = { ok: 0, violation: 0, error: 0 };
    const failed: string[] = [];
    const listing = await withTemporal(
      ctx.timeoutMs,
      async (c) => {
        const listed = await client.listReplayCandidates(c, {
          since,
          limit,
          types,
          ...(taskQueue === undefined ? {} : { taskQueue }),
          callTimeoutMs: ctx.timeoutMs,
        });
        const histories = client.fetchHistories(c, listed.runs, { callTimeoutMs: ctx.timeoutMs });
        const outcomes = local.replayHistories(histories, {
          ...(workflowsPath === undefined ? {} : { workflowsPath }),
          cacheDir: local.workerBundleCacheDir(),
          log,
        });
        for await (const o of outcomes) {
          counts[o.result]++;
          const { workflowId, runId, type, status } = o.run;
          if (o.error !== undefined) failed.push(`${workflowId} (run ${runId}, ${type}): ${o.error}`);
          ctx.out(
            ctx.json
              ? JSON.stringify({
                  workflowId,
                  runId,
                  type,
                  status,
                  result: o.result,
                  ...(o.error ? { error: o.error } : {}),
                })
              : [o.result === 'ok' ? 'ok' : o.result.toUpperCase(), type, workflowId, runId, status, o.error ?? '']
                  .join('  ')
                  .trimEnd(),
          );
        }
        return listed;
      },
      ctx.values,
    );
    const total = counts.ok + counts.violation + counts.error;
    const scope = `open, or started or closed since ${since.toISOString()}${taskQueue === undefined ? '' : `, task queue ${taskQueue}`}`;
    const cut = listing.truncated ? `; more runs matched: only the newest ${limit} were checked (--limit)` : '';
    process.stderr.write(
      `replay: ${total} run(s) (${scope}): ${counts.ok} ok, ${counts.violation} determinism violation(s), ${counts.error} other failure(s)${cut}\n`,
    );
    if (total === 0) process.stderr.write('replay: no run matched: nothing was checked\n');
    if (failed.length > 0) {
      throw new CliError(
        EXIT.failure,
        `replay: ${failed.length} run(s) do not replay against this build:\n${failed.map((f) => `  ${f}`).join('\n')}`,
      );
    }
    return EXIT.ok;
  },
};
