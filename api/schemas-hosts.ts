// JSON schemas of the /v1/hosts routes (validation and the OpenAPI document), closed at every level
// like the proxies' (api/schemas.ts). The shapes are contracts/host.ts HostView and HostStatus; a
// field not listed here would be dropped by the response serializer, so every field is.
import { MAX_DRAIN_DEADLINE_MS, MAX_HOST_REASON_LENGTH, MIN_DRAIN_DEADLINE_MS } from '../contracts/host.ts';
import { errorSchema, identifierSchema, pathReadErrors, readErrors, writeErrors } from './schemas.ts';

const PHASES = ['Schedulable', 'Cordoned', 'Draining', 'Drained'] as const;

const drainSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['startedAt', 'proxies', 'remaining'],
  description: "the drain's progress (contracts/host.ts HostDrain)",
  properties: {
    startedAt: { type: 'string', format: 'date-time' },
    finishedAt: { type: 'string', format: 'date-time' },
    proxies: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'state'],
        properties: {
          name: { type: 'string' },
          pool: { type: 'string', description: '<entry>/<pool> of a pool member; absent for a standalone proxy' },
          state: { type: 'string', enum: ['asked', 'gone'] },
          error: { type: 'string', description: '`code: message` when asking failed (tried again on the next pass)' },
        },
      },
    },
    remaining: { type: 'integer', description: 'proxies still on the host at the last pass' },
    deadlineAt: {
      type: 'string',
      format: 'date-time',
      description: "when the drain should be done (the drain request's deadlineMs)",
    },
    overdue: {
      type: 'boolean',
      description:
        'a pass after deadlineAt still found proxies on the host (those still asked); the drain goes on asking',
    },
    lastError: {
      type: 'string',
      description: 'what the last pass could not read (`code: message`); absent when it read all',
    },
  },
} as const;

/** The maintenance fields HostStatus and HostView share. */
const statusProperties = {
  entry: { type: 'string' },
  host: { type: 'string' },
  phase: {
    type: 'string',
    enum: PHASES,
    description: 'Schedulable (no maintenance), Cordoned (no new placements), Draining, Drained (none of ours left)',
  },
  cordoned: { type: 'boolean' },
  since: { type: 'string', format: 'date-time', description: 'when the cordon (or drain) made it unschedulable' },
  reason: { type: 'string' },
  drain: drainSchema,
} as const;

export const hostStatusSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'host', 'phase', 'cordoned'],
  properties: statusProperties,
} as const;

export const hostViewSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'host', 'phase', 'cordoned', 'proxies'],
  description:
    'a host: its maintenance status, the last provider-health survey of it (those fields are absent for a host never surveyed) and its open proxy workflows',
  properties: {
    ...statusProperties,
    reachable: { type: 'boolean', description: 'from the last survey' },
    surveyedAt: { type: 'string', format: 'date-time', description: 'when that survey was taken' },
    memoryTotalMiB: { type: 'integer' },
    memoryFreeMiB: { type: 'integer' },
    cpus: { type: 'integer' },
    maxProxies: { type: 'integer', description: "the providers file's limit of our proxies on the host" },
    error: { type: 'string', description: 'why the survey could not reach it: `code: message`' },
    proxies: { type: 'integer', description: 'open proxy workflows on the host (ProxyHost), pool members included' },
  },
} as const;

const hostParams = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'host'],
  properties: { entry: identifierSchema, host: identifierSchema },
} as const;

const reasonSchema = {
  type: 'string',
  minLength: 1,
  maxLength: MAX_HOST_REASON_LENGTH,
  description: 'why: shown in the status, the logs and the Web UI',
} as const;

/** Optional body of cordon and uncordon (contracts/host.ts HostActionRequest). */
export const hostActionBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: { reason: reasonSchema },
} as const;

/** Optional body of drain: a reason and a deadline (contracts/host.ts HostActionRequest). */
export const hostDrainBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    reason: reasonSchema,
    deadlineMs: {
      type: 'integer',
      minimum: MIN_DRAIN_DEADLINE_MS,
      maximum: MAX_DRAIN_DEADLINE_MS,
      description:
        'how long the drain may take from this request; past it with proxies left the drain is overdue ' +
        '(status, egress_host_drain_overdue) and goes on asking: nothing is deleted by force',
    },
  },
} as const;

/** Operations whose body may be left out (none is `{}`): the OpenAPI document says so (api/server.ts). */
export const OPTIONAL_BODY_OPERATIONS: ReadonlySet<string> = new Set(['cordonHost', 'drainHost', 'uncordonHost']);

const secured = [{ bearer: [] }];
const tags = ['hosts'];

const action = (
  operationId: string,
  summary: string,
  body: typeof hostActionBodySchema | typeof hostDrainBodySchema = hostActionBodySchema,
) => ({
  operationId,
  summary,
  tags,
  security: secured,
  params: hostParams,
  body,
  response: {
    200: {
      type: 'object',
      additionalProperties: false,
      required: ['status'],
      properties: { status: hostStatusSchema },
    },
    ...writeErrors,
    409: {
      ...errorSchema,
      description: 'HOST_UPDATE_REFUSED: the host workflow refused the request (the message says why)',
    },
  },
});

export const hostRouteSchemas = {
  list: {
    operationId: 'listHosts',
    summary: 'Every known host (the last provider-health survey and open host workflows) with its status and counts',
    tags,
    security: secured,
    querystring: { type: 'object', additionalProperties: false, properties: { entry: identifierSchema } },
    response: {
      200: {
        type: 'object',
        additionalProperties: false,
        required: ['hosts'],
        properties: { hosts: { type: 'array', items: hostViewSchema } },
      },
      ...readErrors,
    },
  },
  get: {
    operationId: 'getHost',
    summary: 'One host: its maintenance status, last survey and open proxies',
    tags,
    security: secured,
    params: hostParams,
    querystring: { type: 'object', additionalProperties: false, properties: {} },
    response: {
      200: { type: 'object', additionalProperties: false, required: ['host'], properties: { host: hostViewSchema } },
      ...pathReadErrors,
    },
  },
  cordon: action('cordonHost', 'Stop new placements on the host (idempotent); its proxies stay'),
  drain: action(
    'drainHost',
    'Cordon the host and move its proxies elsewhere within each pool budget (idempotent), by an optional deadline',
    hostDrainBodySchema,
  ),
  uncordon: action('uncordonHost', 'Make the host schedulable again (ends its maintenance workflow)'),
} as const;
