// /v1/proxies: create (idempotent), list (visibility), get (status query), delete (update).
// A proxy is addressed as /v1/proxies/{entry}/{name}, like its workflow ID proxy/<entry>/<name>.
import type { FastifyInstance } from 'fastify';
import type { ProxySpec } from '../contracts/proxy.ts';
import { requireWrite } from './auth.ts';
import type { PageTokens } from './page-token.ts';
import { ApiError } from './errors.ts';
import { routeSchemas } from './schemas.ts';
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

/** Whether a CIDR block covers every address (prefix length 0): an open proxy. */
export function isOpenCidr(cidr: string): boolean {
  return /\/0+$/.test(cidr.trim());
}

/** The fields where two specs differ, for a 409's message. */
function differences(a: ProxySpec, b: ProxySpec): string[] {
  return (['imageKey', 'vm', 'squid'] as const).filter((k) => canonicalJson(a[k]) !== canonicalJson(b[k]));
}

export function registerProxyRoutes(app: FastifyInstance, o: ProxyRoutesOptions): void {
  const { store } = o;

  app.post<{ Body: ProxySpec }>('/v1/proxies', { schema: routeSchemas.create }, async (request, reply) => {
    requireWrite(request.role, 'creating a proxy');
    const spec = request.body;
    if (!o.allowOpenProxy) {
      const i = spec.squid?.allowedClientCidrs?.findIndex(isOpenCidr) ?? -1;
      if (i >= 0) {
        throw new ApiError(
          400,
          'OPEN_PROXY_REFUSED',
          `squid.allowedClientCidrs[${i}] (${spec.squid!.allowedClientCidrs![i]}) admits every address and would make ` +
            'an open proxy; list the client networks instead (the API accepts /0 only when started with --allow-open-proxy)',
          `squid.allowedClientCidrs[${i}]`,
        );
      }
    }
    const result = await store.start(spec, o.taskQueue);
    if (result.started) return reply.code(201).send({ created: true, proxy: result.proxy });
    const where = `proxy ${spec.entry}/${spec.name}`;
    if (result.spec === undefined) {
      throw new ApiError(
        409,
        'CONFLICT',
        `${where} exists and its spec cannot be read; delete it or choose another name`,
      );
    }
    if (canonicalSpec(result.spec) !== canonicalSpec(spec)) {
      throw new ApiError(
        409,
        'CONFLICT',
        `${where} exists with another spec (differs in ${differences(result.spec, spec).join(', ') || 'its fields'}): ` +
          `it was started with ${canonicalSpec(result.spec)}; delete it first or choose another name`,
      );
    }
    return reply.code(200).send({ created: false, proxy: result.proxy });
  });

  app.get<{ Querystring: ListQuery }>('/v1/proxies', { schema: routeSchemas.list }, async (request) => {
    const q = request.query;
    const query = listQuery({
      state: q.state,
      healthy: q.healthy,
      entry: q.entry,
      host: q.host,
      openOnly: q.state === undefined && q.all !== true,
    });
    let token: Uint8Array | undefined;
    if (q.pageToken !== undefined) {
      token = o.pageTokens.decode(query, q.pageToken);
      if (token === undefined) {
        throw new ApiError(
          400,
          'INVALID_FIELD',
          'query field pageToken was not issued by this API for these filters; repeat the filters of the first page, or start over without it',
          'pageToken',
        );
      }
    }
    const page = await store.list(query, q.pageSize, token);
    return page.nextPageToken === undefined
      ? { proxies: page.items }
      : { proxies: page.items, nextPageToken: o.pageTokens.encode(query, page.nextPageToken) };
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

function notFound(entry: string, name: string): ApiError {
  return new ApiError(404, 'NOT_FOUND', `no proxy ${entry}/${name} (no workflow proxy/${entry}/${name})`);
}
