// JSON schemas of the API's requests and responses: validation (every object closed with
// `additionalProperties: false`, so an unknown field is a 400 that names it) and the OpenAPI
// document at /openapi.json. The value rules are the providers file's, read from
// contracts/limits.ts (identifiers, VM sizes, ports).
import { IDENTIFIER_RE, MAX_IDENTIFIER_LENGTH, PORT, VM_LIMITS } from '../contracts/limits.ts';
import { PROXY_STATES } from '../contracts/proxy.ts';

/** A lowercase identifier, contracts/limits.ts IDENTIFIER_RE: proxy names, entries, image keys, hosts. */
export const IDENTIFIER_PATTERN = IDENTIFIER_RE.source;

/** The proxy states (contracts/proxy.ts), for the list filter's enum and the metrics. */
export { PROXY_STATES };

/** The JSON schema of an identifier (contracts/limits.ts), for every route's fields that name one. */
export const identifierSchema = {
  type: 'string',
  pattern: IDENTIFIER_PATTERN,
  maxLength: MAX_IDENTIFIER_LENGTH,
} as const;

/** A whole number within one of contracts/limits.ts ranges. */
const within = (range: { readonly min: number; readonly max: number }) =>
  ({ type: 'integer', minimum: range.min, maximum: range.max }) as const;

/** An IPv4 or IPv6 CIDR block (its characters only here; routes-proxies.ts parses it with contracts/cidr.ts). */
const cidr = {
  type: 'string',
  minLength: 3,
  maxLength: 50,
  pattern: '^[0-9A-Fa-f:.]+/[0-9]{1,3}$',
  description:
    'an IPv4 or IPv6 CIDR block with host bits clear; blocks that admit every address (an open proxy: 0.0.0.0/0, ::/0, ::ffff:0.0.0.0/96, 0.0.0.0/1 with 128.0.0.0/1) are refused',
} as const;

export const proxySpecSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'entry', 'imageKey'],
  properties: {
    name: { ...identifierSchema, description: 'proxy name, unique within the entry (also the guest hostname)' },
    entry: { ...identifierSchema, description: 'provider entry of the providers file' },
    imageKey: { ...identifierSchema, description: "image key within the entry's images" },
    vm: {
      type: 'object',
      additionalProperties: false,
      description: "VM size; omitted fields take the entry's vm settings",
      properties: {
        vcpus: within(VM_LIMITS.vcpus),
        memoryMiB: within(VM_LIMITS.memoryMiB),
        diskGiB: within(VM_LIMITS.diskGiB),
      },
    },
    squid: {
      type: 'object',
      additionalProperties: false,
      description: "Squid overrides; omitted fields take the entry's squid settings",
      properties: {
        port: within(PORT),
        allowedClientCidrs: { type: 'array', minItems: 1, maxItems: 64, items: cidr },
      },
    },
  },
} as const;

/** The body of a resize: the new VM size, at least one field. */
export const resizeBodySchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    vcpus: within(VM_LIMITS.vcpus),
    memoryMiB: within(VM_LIMITS.memoryMiB),
    diskGiB: within(VM_LIMITS.diskGiB),
  },
} as const;

export const errorSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      additionalProperties: false,
      required: ['code', 'message'],
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        field: { type: 'string', description: 'the request field at fault (body, query or path), dotted' },
      },
    },
  },
} as const;

/** What every listed workflow (a proxy, a pool) has: its names, run and Temporal status. */
export const workflowSummaryRequired = ['name', 'entry', 'workflowId', 'runId', 'execution', 'startTime'] as const;
export const workflowSummaryProperties = {
  name: { type: 'string' },
  entry: { type: 'string' },
  workflowId: { type: 'string' },
  runId: { type: 'string' },
  execution: { type: 'string', description: 'Temporal execution status: RUNNING, COMPLETED, FAILED, ...' },
  startTime: { type: 'string', format: 'date-time' },
  closeTime: { type: 'string', format: 'date-time' },
} as const;

/** A proxy as the visibility store lists it (search attributes and memo, no query). */
export const proxySummarySchema = {
  type: 'object',
  additionalProperties: false,
  required: workflowSummaryRequired,
  properties: {
    ...workflowSummaryProperties,
    state: { type: 'string', description: 'ProxyState search attribute (absent before the first publish)' },
    healthy: { type: 'boolean', description: 'ProxyHealthy: false also while Healthy is Unknown (booting)' },
    health: {
      type: 'string',
      enum: ['True', 'False', 'Unknown'],
      description: 'the Healthy condition, as GET shows it',
    },
    host: { type: 'string' },
    ip: { type: 'string' },
  },
} as const;

/** The status query's answer: contracts/proxy.ts ProxyStatus (its fields pass through as they are). */
export const proxyStatusSchema = {
  type: 'object',
  additionalProperties: true,
  description: 'contracts/proxy.ts ProxyStatus',
  properties: {
    exitIp: {
      type: 'string',
      description:
        "the address destinations see when the proxy connects out, as the entry's health.egressIpUrl answered it " +
        'through the proxy (absent without that URL or before the first read; docs/health.md#exit-ip)',
    },
  },
} as const;

const pathParams = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'name'],
  properties: { entry: identifierSchema, name: identifierSchema },
} as const;

export const listQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    state: { type: 'string', enum: PROXY_STATES },
    healthy: { type: 'boolean' },
    health: { type: 'string', enum: ['True', 'False', 'Unknown'], description: 'the Healthy condition' },
    entry: identifierSchema,
    host: identifierSchema,
    all: { type: 'boolean', description: 'include closed workflows (Deleted, Failed) when no state is given' },
    pageSize: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
    pageToken: { type: 'string', maxLength: 4096, pattern: '^[A-Za-z0-9_-]+$' },
  },
} as const;

export const deleteQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    wait: { type: 'boolean', default: false },
    waitMs: { type: 'integer', minimum: 1, maximum: 600000, description: 'bound on ?wait=true (default 60000)' },
  },
} as const;

/** `<entry>/<pool>`: two identifiers. */
const POOL_REF_PATTERN = `^${IDENTIFIER_PATTERN.replace(/^\^|\$$/g, '')}/${IDENTIFIER_PATTERN.replace(/^\^|\$$/g, '')}$`;

/** The longest a discovery request may be held (`?wait=`), in seconds: under common proxies' idle timeouts. */
export const DISCOVERY_WAIT_MAX_SECONDS = 60;

export const discoveryQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    entry: identifierSchema,
    pool: {
      type: 'string',
      pattern: POOL_REF_PATTERN,
      maxLength: 2 * MAX_IDENTIFIER_LENGTH + 1,
      description: "<entry>/<pool>: that pool's members in discovery, with ready and desired counts and an ETag",
    },
    wait: {
      type: 'integer',
      minimum: 0,
      maximum: DISCOVERY_WAIT_MAX_SECONDS,
      description:
        `with pool and If-None-Match: hold the request up to this many seconds (0-${DISCOVERY_WAIT_MAX_SECONDS}) ` +
        'until the ETag differs (200) or the wait ends (304); ignored without pool (no ETag to wait on)',
    },
  },
} as const;

export const getQuerySchema = { type: 'object', additionalProperties: false, properties: {} } as const;

/** The error answers of a route, each in the one error shape (docs/api.md lists their codes). */
const answers = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [
      s,
      {
        ...errorSchema,
        description: ERROR_DESCRIPTIONS[s],
        ...(s === 429 ? { headers: { 'retry-after': { type: 'integer', description: 'seconds to wait' } } } : {}),
      },
    ]),
  );

/** OpenAPI links from a create's answer to the proxy's own routes (Schemathesis' stateful phase follows them). */
const toProxy = Object.fromEntries(
  (['getProxy', 'deleteProxy', 'resizeProxy'] as const).map((operationId) => [
    operationId,
    {
      operationId,
      parameters: { entry: '$response.body#/proxy/entry', name: '$response.body#/proxy/name' },
    },
  ]),
);
export const createLinks = { 200: toProxy, 201: toProxy };
const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid request: a field the schema refuses (UNKNOWN_FIELD, MISSING_FIELD, INVALID_FIELD, INVALID_JSON, ...)',
  401: 'UNAUTHENTICATED: no or unknown bearer token',
  403: 'FORBIDDEN: a read-only token on a write',
  404: 'NOT_FOUND',
  409: 'CONFLICT, RESIZE_REFUSED or POOL_UPDATE_REFUSED',
  413: 'BODY_TOO_LARGE',
  414: 'URI_TOO_LONG: a path segment over the router limit',
  415: 'UNSUPPORTED_CONTENT_TYPE: the body is not application/json',
  422: "well-formed but not servable: UNKNOWN_ENTRY, UNKNOWN_IMAGE, OVERRIDE_REFUSED (the installation's catalog), INVALID_CIDR, OPEN_PROXY_REFUSED, INVALID_PAGE_TOKEN",
  429: 'RATE_LIMITED: too many writes with this token; retry after Retry-After seconds',
  503: 'TEMPORAL_UNAVAILABLE, CATALOG_UNAVAILABLE or CATALOG_CONFLICT: retry later',
};
/** A read: bad query, no token, Temporal away. */
export const readErrors = answers(400, 401, 503);
/** The list: a page token can be well-formed and still not one this API issued (422). */
export const listErrors = answers(400, 401, 422, 503);
/** A read of one resource by path. */
export const pathReadErrors = answers(400, 401, 404, 414, 503);
/** A write (with or without a body). */
export const writeErrors = answers(400, 401, 403, 404, 413, 414, 415, 422, 429, 503);
const secured = [{ bearer: [] }];

const readiness = {
  type: 'object',
  properties: {
    ready: { type: 'boolean' },
    temporal: { type: 'string' },
    taskQueue: { type: 'string' },
    pollers: { type: 'object', properties: { workflow: { type: 'integer' }, activity: { type: 'integer' } } },
    reason: { type: 'string' },
  },
} as const;

export const routeSchemas = {
  create: {
    operationId: 'createProxy',
    summary: 'Start a proxy (idempotent: the same spec again answers 200 with the existing proxy)',
    tags: ['proxies'],
    security: secured,
    body: proxySpecSchema,
    response: {
      200: { type: 'object', properties: { created: { type: 'boolean' }, proxy: proxySummarySchema } },
      201: { type: 'object', properties: { created: { type: 'boolean' }, proxy: proxySummarySchema } },
      ...writeErrors,
      409: errorSchema,
    },
  },
  list: {
    summary: 'List proxies from the visibility store (search attributes), filtered and paged',
    tags: ['proxies'],
    security: secured,
    querystring: listQuerySchema,
    response: {
      200: {
        type: 'object',
        properties: {
          proxies: { type: 'array', items: proxySummarySchema },
          nextPageToken: { type: 'string' },
        },
      },
      ...listErrors,
    },
  },
  get: {
    operationId: 'getProxy',
    summary: "One proxy: its workflow and the workflow's status query",
    tags: ['proxies'],
    security: secured,
    params: pathParams,
    querystring: getQuerySchema,
    response: {
      200: {
        type: 'object',
        properties: {
          proxy: proxySummarySchema,
          status: proxyStatusSchema,
          statusError: { type: 'string' },
        },
      },
      ...pathReadErrors,
    },
  },
  delete: {
    operationId: 'deleteProxy',
    summary: 'Delete a proxy (202 once accepted; ?wait=true waits for the workflow, bounded)',
    tags: ['proxies'],
    security: secured,
    params: pathParams,
    querystring: deleteQuerySchema,
    response: {
      200: { type: 'object', additionalProperties: true },
      202: { type: 'object', additionalProperties: true },
      ...writeErrors,
    },
  },
  resize: {
    operationId: 'resizeProxy',
    summary:
      'Resize a proxy (restart included): waits for Running and the new size, bounded by waitMs (202 when still applying)',
    tags: ['proxies'],
    security: secured,
    params: pathParams,
    querystring: {
      type: 'object',
      additionalProperties: false,
      properties: {
        waitMs: { type: 'integer', minimum: 1, maximum: 600000, description: 'bound of the wait (default 60000)' },
      },
    },
    body: resizeBodySchema,
    response: {
      200: {
        type: 'object',
        properties: { done: { type: 'boolean' }, status: { type: 'object', additionalProperties: true } },
      },
      202: { type: 'object', properties: { done: { type: 'boolean' }, message: { type: 'string' } } },
      ...writeErrors,
      409: errorSchema,
    },
  },
  providers: {
    summary: "The latest provider-health schedule run's survey of every host",
    tags: ['fleet'],
    security: secured,
    response: { 200: { type: 'object', additionalProperties: true }, ...answers(401, 404, 503) },
  },
  discovery: {
    summary: 'Healthy proxies only, as ip:port with entry and age: what clients of the proxies use',
    tags: ['fleet'],
    security: secured,
    querystring: discoveryQuerySchema,
    headers: {
      type: 'object',
      properties: {
        'if-none-match': {
          type: 'string',
          description: 'an ETag of an earlier ?pool= answer (with wait: the long-poll)',
        },
      },
    },
    response: {
      200: {
        type: 'object',
        properties: {
          proxies: {
            type: 'array',
            items: {
              type: 'object',
              additionalProperties: false,
              properties: {
                address: { type: 'string', description: 'ip:port' },
                name: { type: 'string' },
                entry: { type: 'string' },
                host: { type: 'string' },
                ageSeconds: { type: 'integer', description: 'seconds since the proxy first ran' },
                healthySince: { type: 'string', format: 'date-time', description: 'absent in a pool answer' },
                exitIp: {
                  type: 'string',
                  description:
                    'the address destinations see through this proxy (health.egressIpUrl); absent until read',
                },
              },
            },
          },
          skipped: { type: 'integer', description: 'listed as healthy but their status query failed: left out' },
          pool: { type: 'string', description: 'with ?pool=: the pool' },
          ready: { type: 'integer', description: 'with ?pool=: members listed (available, in discovery)' },
          desired: { type: 'integer', description: "with ?pool=: the pool's size" },
        },
      },
      304: {
        description:
          'with ?pool= and If-None-Match naming the current ETag: the list has not changed (with wait: all the wait long)',
        type: 'null',
      },
      ...answers(400, 401, 404, 503),
    },
  },
  healthz: {
    summary: 'Liveness: the API process answers (no auth)',
    tags: ['ops'],
    response: { 200: { type: 'object', properties: { status: { type: 'string' } } } },
  },
  readyz: {
    summary: 'Readiness: Temporal reachable and a worker polling the task queue (no auth)',
    tags: ['ops'],
    response: { 200: readiness, 503: { ...readiness, description: 'not ready: reason says why' } },
  },
  metrics: {
    summary: 'Prometheus text exposition (scrape with a read token: docs/api.md)',
    tags: ['ops'],
    security: secured,
    response: {
      200: { description: 'Prometheus text format 0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } },
      ...answers(401),
    },
  },
  openapi: { summary: 'This document', tags: ['ops'], security: secured },
} as const;
