// /v1/pools: create (idempotent), list (visibility), get (status query), the operator updates
// (PATCH the spec, scale, pause, resume, rollback, replace a member) and delete. A pool is addressed as
// /v1/pools/{entry}/{pool}, like its workflow ID pool/<entry>/<pool>. Bad input is a 400 naming
// the field (the schema, then contracts/pool.ts poolSpecProblems: one set of rules with the
// workflow's validators); what the pool itself refuses (a rollback with nothing to roll back to,
// a pool being deleted) is a 409 POOL_UPDATE_REFUSED with its reason.
import type { FastifyInstance } from 'fastify';
import { poolSpecProblems } from '../contracts/pool.ts';
import type {
  PoolSpec,
  PoolSpecPatch,
  PoolTemplate,
  ReplaceMemberRequest,
  RollbackRequest,
  ScaleRequest,
} from '../contracts/pool.ts';
import { requireWrite } from './auth.ts';
import { checkSpec } from './catalog.ts';
import { ApiError } from './errors.ts';
import type { PageTokens } from './page-token.ts';
import { pageAnswer, serverToken } from './paging.ts';
import { checkClientCidrs } from './routes-proxies.ts';
import { createPoolLinks, poolRouteSchemas } from './schemas-pools.ts';
import { canonicalJson, poolListQuery } from './store.ts';
import type { PoolStore, PoolUpdate, PoolUpdateResult, ProxyStore } from './store.ts';

export interface PoolRoutesOptions {
  /** The proxies' store: the catalog a template is checked against. */
  store: ProxyStore;
  pools: PoolStore;
  taskQueue: string;
  allowOpenProxy: boolean;
  deleteWaitMs: number;
  pageTokens: PageTokens;
}

interface Params {
  entry: string;
  pool: string;
}

/** A 400 naming the field of the first problem (`rollout.maxSurge must be ...`); all of them in the message. */
export function specProblemsError(problems: string[]): ApiError | undefined {
  if (problems.length === 0) return undefined;
  const field = /^[A-Za-z.]+/.exec(problems[0]!)?.[0];
  return new ApiError('INVALID_FIELD', `body field ${problems.join('; body field ')}`, field);
}

function notFound(entry: string, pool: string): ApiError {
  return new ApiError('NOT_FOUND', `no pool ${entry}/${pool} (no workflow pool/${entry}/${pool})`);
}

export function registerPoolRoutes(app: FastifyInstance, o: PoolRoutesOptions): void {
  const { pools } = o;

  /** The template's entry, image key, Squid overrides and client networks, as a proxy create checks them. */
  const checkTemplate = async (entryName: string, name: string, t: PoolTemplate): Promise<void> => {
    const field = 'template.squid.allowedClientCidrs';
    checkClientCidrs(t.squid?.allowedClientCidrs ?? [], o.allowOpenProxy, field);
    const entry = await checkSpec(o.store, o.taskQueue, { name, entry: entryName, ...t }, 'template.');
    if (!entry.allowOpenProxy) checkClientCidrs(t.squid?.allowedClientCidrs ?? [], false, field);
  };

  /** The answer of an update: 200 with the status, 404, or 409 with the pool's reason. */
  const answer = (r: PoolUpdateResult | undefined, p: Params, what: string) => {
    if (r === undefined) throw notFound(p.entry, p.pool);
    if (r.kind === 'refused') {
      throw new ApiError(
        'POOL_UPDATE_REFUSED',
        `pool ${p.entry}/${p.pool} refused the ${what}: ${r.message.slice(0, 500)}`,
      );
    }
    return { status: r.status };
  };
  const update = async (p: Params, u: PoolUpdate, what: string) =>
    answer(await pools.updatePool(p.entry, p.pool, u), p, what);

  app.post<{ Body: PoolSpec }>(
    '/v1/pools',
    { schema: poolRouteSchemas.create, links: createPoolLinks },
    async (request, reply) => {
      requireWrite(request.role, 'creating a pool');
      const spec = request.body;
      await checkTemplate(spec.entry, spec.name, spec.template);
      const bad = specProblemsError(poolSpecProblems(spec));
      if (bad) throw bad;
      const result = await pools.startPool(spec, o.taskQueue);
      if (result.started) return reply.code(201).send({ created: true, pool: result.pool });
      const where = `pool ${spec.entry}/${spec.name}`;
      if (result.spec === undefined) {
        throw new ApiError('CONFLICT', `${where} exists and its spec cannot be read; delete it or choose another name`);
      }
      if (canonicalJson(result.spec) !== canonicalJson(spec)) {
        const keys = new Set([...Object.keys(result.spec), ...Object.keys(spec)]);
        const differ = [...keys].filter(
          (k) => canonicalJson((result.spec as never)[k]) !== canonicalJson((spec as never)[k]),
        );
        throw new ApiError(
          'CONFLICT',
          `${where} exists with another spec (differs in ${differ.join(', ') || 'its fields'}): it was started with ` +
            `${canonicalJson(result.spec)}; change it with PATCH, or delete it first, or choose another name`,
        );
      }
      return reply.code(200).send({ created: false, pool: result.pool });
    },
  );

  app.get<{ Querystring: { entry?: string; all?: boolean; pageSize: number; pageToken?: string } }>(
    '/v1/pools',
    { schema: poolRouteSchemas.list },
    async (request) => {
      const q = request.query;
      const query = poolListQuery({ entry: q.entry, openOnly: q.all !== true });
      const page = await pools.listPools(query, q.pageSize, serverToken(o.pageTokens, query, q.pageToken));
      return pageAnswer('pools', o.pageTokens, query, page);
    },
  );

  app.get<{ Params: Params }>('/v1/pools/:entry/:pool', { schema: poolRouteSchemas.get }, async (request) => {
    const { entry, pool } = request.params;
    const summary = await pools.describePool(entry, pool);
    if (summary === undefined) throw notFound(entry, pool);
    try {
      const status = await pools.poolStatus(entry, pool);
      if (status !== undefined) return { pool: summary, status };
      return { pool: summary, statusError: 'the status query found no workflow' };
    } catch (err) {
      request.log.warn({ err, entry, pool }, 'pool status query failed');
      return { pool: summary, statusError: `the status query failed: ${(err as Error).message.slice(0, 300)}` };
    }
  });

  app.patch<{ Params: Params; Body: PoolSpecPatch }>(
    '/v1/pools/:entry/:pool',
    { schema: poolRouteSchemas.update },
    async (request) => {
      requireWrite(request.role, 'changing a pool');
      const p = request.params;
      const patch = request.body;
      if ((await pools.describePool(p.entry, p.pool)) === undefined) throw notFound(p.entry, p.pool);
      if (patch.template !== undefined) await checkTemplate(p.entry, p.pool, patch.template);
      // The spec the pool would have: the same rules its validator applies, with the field named.
      const current = await pools.poolStatus(p.entry, p.pool);
      if (current !== undefined) {
        const bad = specProblemsError(poolSpecProblems({ ...current.spec, ...patch }));
        if (bad) throw bad;
      }
      return update(p, { kind: 'spec', patch }, 'spec update');
    },
  );

  app.post<{ Params: Params; Body: ScaleRequest }>(
    '/v1/pools/:entry/:pool/scale',
    { schema: poolRouteSchemas.scale },
    async (request) => {
      requireWrite(request.role, 'scaling a pool');
      return update(request.params, { kind: 'scale', request: request.body }, 'scale');
    },
  );

  app.post<{ Params: Params }>('/v1/pools/:entry/:pool/pause', { schema: poolRouteSchemas.pause }, async (request) => {
    requireWrite(request.role, 'pausing a pool');
    return update(request.params, { kind: 'pause' }, 'pause');
  });

  app.post<{ Params: Params }>(
    '/v1/pools/:entry/:pool/resume',
    { schema: poolRouteSchemas.resume },
    async (request) => {
      requireWrite(request.role, 'resuming a pool');
      return update(request.params, { kind: 'resume' }, 'resume');
    },
  );

  app.post<{ Params: Params; Body: RollbackRequest }>(
    '/v1/pools/:entry/:pool/rollback',
    { schema: poolRouteSchemas.rollback },
    async (request) => {
      requireWrite(request.role, 'rolling back a pool');
      return update(request.params, { kind: 'rollback', request: request.body }, 'rollback');
    },
  );

  app.post<{ Params: Params & { member: string }; Body: { reason: string } }>(
    '/v1/pools/:entry/:pool/members/:member/replace',
    { schema: poolRouteSchemas.replaceMember },
    async (request) => {
      requireWrite(request.role, 'replacing a pool member');
      const { entry, pool, member } = request.params;
      const req: ReplaceMemberRequest = { name: member, reason: request.body.reason };
      return update({ entry, pool }, { kind: 'replaceMember', request: req }, 'member replacement');
    },
  );

  app.delete<{ Params: Params; Querystring: { wait?: boolean; waitMs?: number } }>(
    '/v1/pools/:entry/:pool',
    { schema: poolRouteSchemas.delete },
    async (request, reply) => {
      requireWrite(request.role, 'deleting a pool');
      const p = request.params;
      const r = await pools.deletePool(p.entry, p.pool);
      if (r?.kind === 'closed') return reply.code(200).send({ done: true, pool: r.pool });
      const { status } = answer(r, p, 'delete');
      const base = { accepted: true, workflowId: `pool/${p.entry}/${p.pool}` };
      if (request.query.wait !== true) return reply.code(202).send({ ...base, done: false, status });
      const waitMs = request.query.waitMs ?? o.deleteWaitMs;
      const end = await pools.waitPoolDeleted(p.entry, p.pool, waitMs);
      if (end === undefined) {
        return reply.code(202).send({ ...base, done: false, status, message: `still deleting after ${waitMs} ms` });
      }
      return reply.code(200).send({ ...base, done: true, status: end });
    },
  );
}
