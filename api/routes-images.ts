// /v1/images/{entry}/{key}/warm: fetch a base image onto every host of an entry ahead of the first
// proxy (the warm-image workflow, which shares each host's ensure-image workflow with proxies).
// The Temporal calls behind it are client/warm.ts's `temporalWarmer`.
import type { FastifyInstance } from 'fastify';
import type { ImageWarmer, WarmView } from '../client/warm.ts';
import { requireWrite } from './auth.ts';
import { catalogEntry, checkImage } from './catalog.ts';
import type { ProxyStore } from './store.ts';
import { ApiError } from './errors.ts';
import { identifierSchema, pathReadErrors, writeErrors } from './schemas.ts';

export type { ImageWarmer, WarmView } from '../client/warm.ts';

const params = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'key'],
  properties: {
    entry: identifierSchema,
    key: identifierSchema,
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

export function registerImageRoutes(
  app: FastifyInstance,
  o: { warmer: ImageWarmer; taskQueue: string; store: ProxyStore },
): void {
  const answer = (view: WarmView | undefined, entry: string, key: string): WarmView => {
    if (view === undefined) throw new ApiError('NOT_FOUND', `no warm of image ${key} of entry ${entry}`);
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
          ...writeErrors,
        },
      },
    },
    async (request, reply) => {
      requireWrite(request.role, 'warming an image');
      const { entry, key } = request.params;
      checkImage(await catalogEntry(o.store, o.taskQueue, entry), key, 'key');
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
        response: { 200: { type: 'object', additionalProperties: true }, ...pathReadErrors },
      },
    },
    async (request) =>
      answer(
        await o.warmer.view(request.params.entry, request.params.key, 0),
        request.params.entry,
        request.params.key,
      ),
  );
}
