// The HTTP API: Fastify with the project's pino logger, JSON-schema validation (bodies strict, no
// coercion; query strings and paths coerced), bearer-token auth on every route but the health
// endpoints, one error handler, metrics, and the OpenAPI document at /openapi.json.
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import type { Http2SecureServer } from 'node:http2';
import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import { Ajv } from 'ajv';
import type { Logger } from 'pino';
import type { TokenAuth } from './auth.ts';
import type { Role } from './auth.ts';
import { ApiError, handleError } from './errors.ts';
import { registerFleetPage } from './fleet-page.ts';
import type { FleetPageOptions } from './fleet-page.ts';
import { createMetrics } from './metrics.ts';
import { PageTokens } from './page-token.ts';
import { registerHostRoutes } from './routes-hosts.ts';
import { OPTIONAL_BODY_OPERATIONS } from './schemas-hosts.ts';
import { registerOpsRoutes } from './routes-ops.ts';
import { registerPoolRoutes } from './routes-pools.ts';
import { registerProxyRoutes } from './routes-proxies.ts';
import { registerImageRoutes } from './routes-images.ts';
import { traceRequests } from './tracing.ts';
import type { ImageWarmer } from './routes-images.ts';
import type { HostStore } from '../client/host-store.ts';
import type { PoolStore, ProxyStore } from './store.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The bearer token's role; set by the auth hook on every route that needs a token. */
    role: Role | undefined;
  }
  interface FastifyContextConfig {
    /** No token needed (health endpoints). */
    public?: boolean;
  }
}

export interface ApiOptions {
  /** Image warming (/v1/images/...); unset: those routes are not served. */
  warmer?: ImageWarmer;
  store: ProxyStore;
  /** Pools (/v1/pools, discovery by pool); unset: those routes are not served. */
  pools?: PoolStore;
  /** Hosts (/v1/hosts, the egress_host_* metrics); unset: those routes are not served. */
  hosts?: HostStore;
  log: Logger;
  auth: TokenAuth | (() => TokenAuth);
  /** Task queue of the proxy workflows (and of the worker /readyz looks for). */
  taskQueue: string;
  /** Largest request body, in bytes (default 64 KiB). */
  bodyLimitBytes?: number;
  /** Accept `allowedClientCidrs` overrides of /0 (an open proxy). Default false. */
  allowOpenProxy?: boolean;
  /** Bound of DELETE ?wait=true when no waitMs is given, in ms (default 60000). */
  deleteWaitMs?: number;
  /** Key of the page-token MACs; replicas behind one address share it. Default: random per process. */
  pageTokenSecret?: string;
  /** Writes (POST, PATCH, DELETE) one token may make per minute; 0: no limit. Default 120. */
  writesPerMinute?: number;
  /** The fleet page at /fleet (api/fleet-page.ts; public, it holds no data). */
  fleetPage?: FleetPageOptions;
  /**
   * Serve HTTPS with this PEM certificate and key (api/tls.ts loads them): HTTP/2 and HTTP/1.1,
   * chosen by ALPN. Replace them while serving with app.server.setSecureContext. Unset: plain HTTP/1.1.
   */
  tls?: { cert: Buffer | string; key: Buffer | string };
}

/** Builds the API (routes registered, not listening). */
export async function buildApi(options: ApiOptions): Promise<FastifyInstance> {
  const logger: FastifyBaseLogger = options.log;
  const serverOptions: FastifyServerOptions = {
    loggerInstance: logger,
    bodyLimit: options.bodyLimitBytes ?? 64 * 1024,
    return503OnClosing: true,
    // The body's JSON: __proto__ and constructor.prototype keys are refused (400), never merged.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    routerOptions: { maxParamLength: 200 },
    // The router's own refusals (a malformed or over-long path) in the API's error shape.
    frameworkErrors: (err, request, reply) => handleError(err, request, reply),
  };
  // With TLS, HTTP/2 beside HTTP/1.1 (ALPN). The routes see the same request and reply either way,
  // so the instance is typed as the HTTP/1.1 one they are written against.
  const app =
    options.tls === undefined
      ? Fastify(serverOptions)
      : (Fastify({
          ...(serverOptions as unknown as FastifyServerOptions<Http2SecureServer>),
          http2: true,
          https: { allowHTTP1: true, cert: options.tls.cert, key: options.tls.key },
        }) as unknown as FastifyInstance);
  // First: the request span opens before auth, so a refused token is traced too.
  traceRequests(app);
  const auth = typeof options.auth === 'function' ? options.auth : () => options.auth as TokenAuth;

  // Two validators: bodies are taken as sent (a string is not a number; an unknown field is an
  // error, never stripped); query strings and paths are text, so they are coerced to the schema.
  const strict = new Ajv({
    allErrors: false,
    removeAdditional: false,
    coerceTypes: false,
    useDefaults: false,
    strict: false,
  });
  const coercing = new Ajv({
    allErrors: false,
    removeAdditional: false,
    coerceTypes: true,
    useDefaults: true,
    strict: false,
  });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? strict.compile(schema) : coercing.compile(schema),
  );
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('role', undefined);
  // A request no route matches can fail before the not-found handler (a QUERY without a body's
  // Content-Type): it still answers 404, or 405 with Allow. Auth's 401 stays a 401.
  app.setErrorHandler((err, request, reply) =>
    request.is404 && !(err instanceof ApiError) ? notFound(request, reply) : handleError(err as Error, request, reply),
  );
  // Every route's path and methods, for a 405 with Allow on a known path with another method.
  const routes: { re: RegExp; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    const re = new RegExp(`^${route.url.replace(/:[^/]+/g, '[^/]+')}$`);
    let found = routes.find((r) => r.re.source === re.source);
    if (found === undefined) routes.push((found = { re, methods: new Set() }));
    for (const m of [route.method].flat()) found.methods.add(m);
  });
  const notFound = (request: FastifyRequest, reply: FastifyReply): void => {
    const path = request.url.split('?')[0] ?? '';
    const known = routes.find((r) => r.re.test(path));
    if (known !== undefined) {
      const allow = [...known.methods].sort().join(', ');
      const e = new ApiError('METHOD_NOT_ALLOWED', `${path} does not answer ${request.method}; it answers ${allow}`);
      void reply.header('allow', allow);
      return handleError(e, request, reply);
    }
    handleError(new ApiError('NOT_FOUND', `no route ${request.method} ${path}; see /openapi.json`), request, reply);
  };
  app.setNotFoundHandler(notFound);

  const metrics = createMetrics(options.store, {
    ...(options.pools ? { pools: options.pools } : {}),
    ...(options.hosts ? { hosts: options.hosts } : {}),
  });
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.routeOptions.config.public === true) return done();
    try {
      request.role = auth().authenticate(request.headers.authorization);
      done();
    } catch (err) {
      done(err as Error);
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    metrics.duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  // Writes per token (a runaway script cannot start thousands of workflows): counted after auth
  // and validation, per SHA-256 of the bearer token; over the limit, 429 RATE_LIMITED with Retry-After.
  const writesPerMinute = options.writesPerMinute ?? 120;
  // Before the plugin's own onRoute hook, which reads each route's rateLimit config.
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (writesPerMinute > 0 && methods.some((m) => m === 'POST' || m === 'PATCH' || m === 'DELETE')) {
      route.config = { ...route.config, rateLimit: { max: writesPerMinute, timeWindow: 60_000 } };
    }
  });
  await app.register(rateLimit, {
    global: false,
    hook: 'preHandler',
    keyGenerator: (request) =>
      createHash('sha256')
        .update(request.headers.authorization ?? '')
        .digest('hex'),
    errorResponseBuilder: (_request, ctx) =>
      new ApiError(
        'RATE_LIMITED',
        `more than ${ctx.max} writes a minute with this token; retry in ${ctx.after} (see Retry-After)`,
      ),
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'egress-proxies API',
        version: '1',
        description:
          'Start, list and delete egress proxies and pools of them; discover the healthy ones. See docs/api.md.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
    // The plugin marks every body required; a route that takes none as `{}` says it is optional.
    transformObject: (doc) => {
      if (!('openapiObject' in doc)) return doc.swaggerObject;
      const { openapiObject } = doc;
      for (const ops of Object.values(openapiObject.paths ?? {})) {
        for (const op of Object.values(ops as Record<string, { operationId?: string; requestBody?: object }>)) {
          if (op.requestBody !== undefined && OPTIONAL_BODY_OPERATIONS.has(op.operationId ?? '')) {
            op.requestBody = { ...op.requestBody, required: false };
          }
        }
      }
      return openapiObject;
    },
  });

  const common = {
    store: options.store,
    taskQueue: options.taskQueue,
    allowOpenProxy: options.allowOpenProxy ?? false,
    deleteWaitMs: options.deleteWaitMs ?? 60_000,
    pageTokens: new PageTokens(options.pageTokenSecret),
  };
  registerProxyRoutes(app, common);
  if (options.pools) registerPoolRoutes(app, { ...common, pools: options.pools });
  if (options.hosts) registerHostRoutes(app, { hosts: options.hosts, taskQueue: options.taskQueue });
  registerOpsRoutes(app, {
    store: options.store,
    ...(options.pools ? { pools: options.pools } : {}),
    taskQueue: options.taskQueue,
    registry: metrics.registry,
  });
  if (options.warmer)
    registerImageRoutes(app, { warmer: options.warmer, taskQueue: options.taskQueue, store: options.store });
  registerFleetPage(app, options.fleetPage);
  app.get('/openapi.json', { schema: { hide: true } }, () => app.swagger());
  return app;
}
