// /v1/images/{entry}/{key}/warm: fetch a base image onto every host of an entry ahead of the first
// proxy (the warm-image workflow, which shares each host's ensure-image workflow with proxies).
import type { Client } from '@temporalio/client';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { WARM_WORKFLOW_TYPE, warmWorkflowId } from '../contracts/warm.ts';
import type { WarmResult } from '../contracts/warm.ts';
import { requireWrite } from './auth.ts';
import { ApiError } from './errors.ts';
import { IDENTIFIER_PATTERN } from './schemas.ts';

/** What a warm looks like to a client. */
export type WarmView =
  | { workflowId: string; state: 'Running' }
  | { workflowId: string; state: 'Done'; result: WarmResult }
  | { workflowId: string; state: 'Failed'; error: string };

/** The API's view of warm-image workflows. */
export interface ImageWarmer {
  /** Starts the warm, or joins the one running for (entry, key). */
  start(entry: string, key: string, taskQueue: string): Promise<{ workflowId: string; runId: string }>;
  /** The warm's state, waiting up to `waitMs` for its end; undefined when there is none. */
  view(entry: string, key: string, waitMs: number): Promise<WarmView | undefined>;
}

export function temporalWarmer(client: Client): ImageWarmer {
  return {
    async start(entry, key, taskQueue) {
      const workflowId = warmWorkflowId(entry, key);
      const h = await client.workflow.start(WARM_WORKFLOW_TYPE, {
        workflowId,
        taskQueue,
        args: [{ entry, key }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        staticSummary: `warm image ${key} on every host of ${entry}`,
      });
      return { workflowId, runId: h.firstExecutionRunId };
    },
    async view(entry, key, waitMs) {
      const workflowId = warmWorkflowId(entry, key);
      const h = client.workflow.getHandle(workflowId);
      try {
        await h.describe();
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      }
      try {
        const result = await client.withDeadline(
          Date.now() + Math.max(1, waitMs),
          () => h.result() as Promise<WarmResult>,
        );
        return { workflowId, state: 'Done', result };
      } catch (err) {
        if (err instanceof WorkflowFailedError) {
          const inner = err.cause?.cause instanceof Error ? err.cause.cause.message : undefined;
          return { workflowId, state: 'Failed', error: inner ?? err.cause?.message ?? err.message };
        }
        if ((await h.describe()).status.name === 'RUNNING') return { workflowId, state: 'Running' };
        throw err;
      }
    },
  };
}

const params = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'key'],
  properties: {
    entry: { type: 'string', pattern: IDENTIFIER_PATTERN, maxLength: 40 },
    key: { type: 'string', pattern: IDENTIFIER_PATTERN, maxLength: 40 },
  },
} as const;
const waitQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    wait: { type: 'boolean', default: false, description: 'wait for the warm to end (bounded by waitMs)' },
    waitMs: {
      type: 'integer',
      minimum: 1,
      maximum: 3_600_000,
      description: 'the bound of wait, in ms (default 60000)',
    },
  },
} as const;
const errorSchema = { type: 'object', additionalProperties: true } as const;

export function registerImageRoutes(app: FastifyInstance, o: { warmer: ImageWarmer; taskQueue: string }): void {
  const answer = (view: WarmView | undefined, entry: string, key: string): WarmView => {
    if (view === undefined) throw new ApiError(404, 'NOT_FOUND', `no warm of image ${key} of entry ${entry}`);
    return view;
  };
  app.post<{ Params: { entry: string; key: string }; Querystring: { wait?: boolean; waitMs?: number } }>(
    '/v1/images/:entry/:key/warm',
    {
      schema: {
        summary:
          'Fetch a base image onto every host of the entry ahead of the first proxy (202; ?wait=true waits, bounded)',
        tags: ['images'],
        security: [{ bearer: [] }],
        params,
        querystring: waitQuery,
        response: {
          200: { type: 'object', additionalProperties: true },
          202: { type: 'object', additionalProperties: true },
          404: errorSchema,
        },
      },
    },
    async (request, reply) => {
      requireWrite(request.role, 'warming an image');
      const { entry, key } = request.params;
      const started = await o.warmer.start(entry, key, o.taskQueue);
      if (request.query.wait !== true) return reply.code(202).send({ ...started, state: 'Running' });
      const view = answer(await o.warmer.view(entry, key, request.query.waitMs ?? 60_000), entry, key);
      return reply.code(view.state === 'Running' ? 202 : 200).send(view);
    },
  );
  app.get<{ Params: { entry: string; key: string } }>(
    '/v1/images/:entry/:key/warm',
    {
      schema: {
        summary: "The warm's state: Running, Done (per host: ok, cached, size) or Failed (why)",
        tags: ['images'],
        security: [{ bearer: [] }],
        params,
        response: { 200: { type: 'object', additionalProperties: true }, 404: errorSchema },
      },
    },
    async (request) =>
      answer(
        await o.warmer.view(request.params.entry, request.params.key, 1),
        request.params.entry,
        request.params.key,
      ),
  );
}
