// JSON schemas of the API's requests and responses: validation (every object closed with
// `additionalProperties: false`, so an unknown field is a 400 that names it) and the OpenAPI
// document at /openapi.json. The value rules are the providers file's, read from
// contracts/limits.ts (identifiers, VM sizes, ports).
import { IDENTIFIER_RE, MAX_IDENTIFIER_LENGTH, PORT, VM_LIMITS } from '../contracts/limits.ts';

/** A lowercase identifier, contracts/limits.ts IDENTIFIER_RE: proxy names, entries, image keys, hosts. */
export const IDENTIFIER_PATTERN = IDENTIFIER_RE.source;

/** The proxy states of contracts/proxy.ts ProxyState. */
export const PROXY_STATES = [
  'Pending',
  'WaitingForCapacity',
  'Provisioning',
  'Booting',
  'Running',
  'Deleting',
  'Deleted',
  'Failed',
] as const;

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

/** A proxy as the visibility store lists it (search attributes and memo, no query). */
export const proxySummarySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'entry', 'workflowId', 'runId', 'execution', 'startTime'],
  properties: {
    name: { type: 'string' },
    entry: { type: 'string' },
    workflowId: { type: 'string' },
    runId: { type: 'string' },
    execution: { type: 'string', description: 'Temporal execution status: RUNNING, COMPLETED, FAILED, ...' },
    state: { type: 'string', description: 'ProxyState search attribute (absent before the first publish)' },
    healthy: { type: 'boolean' },
    host: { type: 'string' },
    ip: { type: 'string' },
    startTime: { type: 'string', format: 'date-time' },
    closeTime: { type: 'string', format: 'date-time' },
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

export const discoveryQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: { entry: identifierSchema },
} as const;

export const getQuerySchema = { type: 'object', additionalProperties: false, properties: {} } as const;

const errors = { 400: errorSchema, 401: errorSchema, 403: errorSchema, 503: errorSchema } as const;
const secured = [{ bearer: [] }];

export const routeSchemas = {
  create: {
    summary: 'Start a proxy (idempotent: the same spec again answers 200 with the existing proxy)',
    tags: ['proxies'],
    security: secured,
    body: proxySpecSchema,
    response: {
      200: { type: 'object', properties: { created: { type: 'boolean' }, proxy: proxySummarySchema } },
      201: { type: 'object', properties: { created: { type: 'boolean' }, proxy: proxySummarySchema } },
      409: errorSchema,
      ...errors,
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
      ...errors,
    },
  },
  get: {
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
          status: { type: 'object', additionalProperties: true, description: 'contracts/proxy.ts ProxyStatus' },
          statusError: { type: 'string' },
        },
      },
      404: errorSchema,
      ...errors,
    },
  },
  delete: {
    summary: 'Delete a proxy (202 once accepted; ?wait=true waits for the workflow, bounded)',
    tags: ['proxies'],
    security: secured,
    params: pathParams,
    querystring: deleteQuerySchema,
    response: {
      200: { type: 'object', additionalProperties: true },
      202: { type: 'object', additionalProperties: true },
      404: errorSchema,
      ...errors,
    },
  },
  providers: {
    summary: "The latest provider-health schedule run's survey of every host",
    tags: ['fleet'],
    security: secured,
    response: { 200: { type: 'object', additionalProperties: true }, 404: errorSchema, ...errors },
  },
  discovery: {
    summary: 'Healthy proxies only, as ip:port with entry and age: what clients of the proxies use',
    tags: ['fleet'],
    security: secured,
    querystring: discoveryQuerySchema,
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
                healthySince: { type: 'string', format: 'date-time' },
              },
            },
          },
          skipped: { type: 'integer', description: 'listed as healthy but their status query failed: left out' },
        },
      },
      ...errors,
    },
  },
  healthz: { summary: 'Liveness: the API process answers (no auth)', tags: ['ops'] },
  readyz: {
    summary: 'Readiness: Temporal reachable and a worker polling the task queue (no auth)',
    tags: ['ops'],
  },
  metrics: { summary: 'Prometheus text exposition', tags: ['ops'], security: secured },
  openapi: { summary: 'This document', tags: ['ops'], security: secured },
} as const;
