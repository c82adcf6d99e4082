// /v1/proxies: create (idempotent), list (visibility), get (status query), delete (update).
// A proxy is addressed as /v1/proxies/{entry}/{name}, like its workflow ID proxy/<entry>/<name>.
import type { FastifyInstance } from 'fastify';
import { openBlocks, parseCidr } from '../contracts/cidr.ts';
import { CODES } from '../contracts/errors.ts';
import type { ProxySpec, VmSize } from '../contracts/proxy.ts';
import { requireWrite } from './auth.ts';
import { checkSpec } from './catalog.ts';
import type { PageTokens } from './page-token.ts';
import { pageAnswer, serverToken } from './paging.ts';
import { ApiError } from './errors.ts';
import { createLinks, routeSchemas } from './schemas.ts';
import { canonicalJson, canonicalSpec, listQuery } from './store.ts';
import type { ProxyStore } from './store.ts';

export interface ProxyRoutesOptions {
  store: ProxyStore;
  taskQueue: string;
  allowOpenProxy: boolean;
  deleteWaitMs: number;
  pageTokens: PageTokens;
}

interface ListQuery {
  state?: string;
  healthy?: boolean;
  health?: string;
  entry?: string;
  host?: string;
  all?: boolean;
  pageSize: number;
  pageToken?: string;
}
interface Params {
  entry: string;
  name: string;
}

/** The fields where two specs differ, for a 409's message. */
function differences(a: ProxySpec, b: ProxySpec): string[] {
  return (['imageKey', 'vm', 'squid'] as const).filter((k) => canonicalJson(a[k]) !== canonicalJson(b[k]));
}

export function registerProxyRoutes(app: FastifyInstance, o: ProxyRoutesOptions): void {
  const { store } = o;

  app.post<{ Body: ProxySpec }>(
    '/v1/proxies',
    { schema: routeSchemas.create, links: createLinks },
    async (request, reply) => {
      requireWrite(request.role, 'creating a proxy');
      const spec = request.body;
      checkClientCidrs(spec.squid?.allowedClientCidrs ?? [], o.allowOpenProxy);
      const entry = await checkSpec(store, o.taskQueue, spec);
      // Open only when the API and the providers file both allow it.
      if (!entry.allowOpenProxy) checkClientCidrs(spec.squid?.allowedClientCidrs ?? [], false);
      const result = await store.start(spec, o.taskQueue);
      if (result.started) return reply.code(201).send({ created: true, proxy: result.proxy });
      const where = `proxy ${spec.entry}/${spec.name}`;
      if (result.spec === undefined) {
        throw new ApiError('CONFLICT', `${where} exists and its spec cannot be read; delete it or choose another name`);
      }
      if (canonicalSpec(result.spec) !== canonicalSpec(spec)) {
        throw new ApiError(
          'CONFLICT',
          `${where} exists with another spec (differs in ${differences(result.spec, spec).join(', ') || 'its fields'}): ` +
            `it was started with ${canonicalSpec(result.spec)}; delete it first or choose another name`,
        );
      }
      return reply.code(200).send({ created: false, proxy: result.proxy });
    },
  );

  app.get<{ Querystring: ListQuery }>('/v1/proxies', { schema: routeSchemas.list }, async (request) => {
    const q = request.query;
    const query = listQuery({
      state: q.state,
      healthy: q.healthy,
      health: q.health,
      entry: q.entry,
      host: q.host,
      openOnly: q.state === undefined && q.all !== true,
    });
    const page = await store.list(query, q.pageSize, serverToken(o.pageTokens, query, q.pageToken));
    return pageAnswer('proxies', o.pageTokens, query, page);
  });

  app.get<{ Params: Params }>('/v1/proxies/:entry/:name', { schema: routeSchemas.get }, async (request) => {
    const { entry, name } = request.params;
    const proxy = await store.describe(entry, name);
    if (proxy === undefined) throw notFound(entry, name);
    try {
      return { proxy, status: await store.status(entry, name) };
    } catch (err) {
      request.log.warn({ err, entry, name }, 'status query failed');
      return { proxy, statusError: `the status query failed: ${(err as Error).message.slice(0, 300)}` };
    }
  });

  app.post<{ Params: Params; Querystring: { waitMs?: number }; Body: VmSize }>(
    '/v1/proxies/:entry/:name/resize',
    { schema: routeSchemas.resize },
    async (request, reply) => {
      requireWrite(request.role, 'resizing a proxy');
      const { entry, name } = request.params;
      const waitMs = request.query.waitMs ?? o.deleteWaitMs;
      const result = await store.resize(entry, name, request.body, waitMs);
      if (result === undefined) throw notFound(entry, name);
      if (result.kind === 'refused') {
        throw new ApiError('RESIZE_REFUSED', `proxy ${entry}/${name} was not resized: ${result.message.slice(0, 300)}`);
      }
      if (result.kind === 'pending') {
        return reply
          .code(202)
          .send({ done: false, message: `accepted; not applied after ${waitMs} ms (it waits for Running)` });
      }
      return reply.code(200).send({ done: true, status: result.status });
    },
  );

  app.delete<{ Params: Params; Querystring: { wait?: boolean; waitMs?: number } }>(
    '/v1/proxies/:entry/:name',
    { schema: routeSchemas.delete },
    async (request, reply) => {
      requireWrite(request.role, 'deleting a proxy');
      const { entry, name } = request.params;
      const result = await store.requestDelete(entry, name);
      if (result === undefined) throw notFound(entry, name);
      if (result.kind === 'closed') {
        return reply.code(200).send({ done: true, state: result.proxy.state, proxy: result.proxy });
      }
      const base = { accepted: true, fromState: result.accepted.fromState, workflowId: `proxy/${entry}/${name}` };
      if (request.query.wait !== true) return reply.code(202).send({ ...base, done: false });
      const waitMs = request.query.waitMs ?? o.deleteWaitMs;
      const outcome = await store.waitOutcome(entry, name, waitMs);
      if (outcome === undefined) {
        return reply.code(202).send({ ...base, done: false, message: `still deleting after ${waitMs} ms` });
      }
      return reply.code(200).send({ ...base, done: true, state: outcome.state, outcome });
    },
  );
}

/**
 * Every block exact (the schema checks only its characters), and no open proxy unless the API runs
 * with --allow-open-proxy: the rule of contracts/cidr.ts, as the providers file and the workflow
 * apply it.
 */
export function checkClientCidrs(
  cidrs: readonly string[],
  allowOpenProxy: boolean,
  field = 'squid.allowedClientCidrs',
): void {
  cidrs.forEach((text, i) => {
    const parsed = parseCidr(text);
    if (parsed.ok) return;
    const fix = parsed.canonical === undefined ? 'write a block such as 10.0.0.0/8' : `write ${parsed.canonical}`;
    throw new ApiError(
      'INVALID_CIDR',
      `body field ${field}[${i}] (${text}) ${parsed.problem}; ${fix}`,
      `${field}[${i}]`,
    );
  });
  const [open] = allowOpenProxy ? [] : openBlocks(cidrs);
  if (open === undefined) return;
  throw new ApiError(
    CODES.openProxyRefused,
    `${field}[${open.index}] (${cidrs[open.index]}) ${open.problem} and would make an open proxy; ` +
      'list the client networks instead (the API accepts such blocks only when started with --allow-open-proxy)',
    `${field}[${open.index}]`,
  );
}

function notFound(entry: string, name: string): ApiError {
  return new ApiError('NOT_FOUND', `no proxy ${entry}/${name} (no workflow proxy/${entry}/${name})`);
}
