// JSON schemas of the /v1/pools routes (validation and the OpenAPI document), closed at every
// level like the proxies' (api/schemas.ts). The ranges are contracts/pool.ts's, which the routes
// apply again (poolSpecProblems: the rules a schema cannot say, such as maxSurge and
// maxUnavailable both 0) and which test/unit/api-pools.test.ts holds this file to.
import { MAX_POOL_NAME_LENGTH, POOL_SIZE, POOL_SPARES, SCALE_DOWN_POLICIES } from '../contracts/pool.ts';
import {
  errorSchema,
  identifierSchema,
  listErrors,
  pathReadErrors,
  proxySpecSchema,
  workflowSummaryProperties,
  workflowSummaryRequired,
  writeErrors,
} from './schemas.ts';

const whole = (min: number, max: number) => ({ type: 'integer', minimum: min, maximum: max }) as const;
const DAY_MS = 86_400_000;
/** contracts/pool.ts DURATION: 0 to 30 days, in ms. */
const duration = whole(0, 30 * DAY_MS);

export const poolNameSchema = {
  ...identifierSchema,
  maxLength: MAX_POOL_NAME_LENGTH,
  description: `pool name, unique within the entry; members are named <pool>-<5 characters>, so at most ${MAX_POOL_NAME_LENGTH} characters`,
} as const;

const templateSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['imageKey'],
  description: 'what members are made from; a new template rolls through the members',
  properties: {
    imageKey: proxySpecSchema.properties.imageKey,
    vm: proxySpecSchema.properties.vm,
    squid: proxySpecSchema.properties.squid,
  },
} as const;

/** Every field of a spec but entry and name: the body of PATCH (each top-level field replaces the pool's). */
const specFields = {
  size: { ...whole(POOL_SIZE.min, POOL_SIZE.max), description: 'members in discovery' },
  spares: {
    ...whole(POOL_SPARES.min, POOL_SPARES.max),
    description: 'extra members kept Healthy out of discovery, promoted first (default 0)',
  },
  template: templateSchema,
  placement: {
    type: 'object',
    additionalProperties: false,
    properties: {
      maxPerHost: {
        ...whole(1, POOL_SIZE.max + POOL_SPARES.max),
        description: 'at most this many members on one host',
      },
      avoidHosts: { type: 'array', maxItems: 100, items: identifierSchema, description: 'hosts never used' },
    },
  },
  rollout: {
    type: 'object',
    additionalProperties: false,
    properties: {
      maxSurge: { ...whole(0, POOL_SIZE.max), description: 'members above size + spares while replacing (default 1)' },
      maxUnavailable: {
        ...whole(0, POOL_SIZE.max),
        description: 'members in discovery may drop this far below size while replacing (default 0)',
      },
      minHealthyMs: { ...duration, description: 'a member counts as available once Healthy this long (default 10000)' },
      progressDeadlineMs: {
        ...whole(10_000, 30 * DAY_MS),
        description: 'a rollout without progress this long rolls back (default 600000)',
      },
    },
  },
  replacement: {
    type: 'object',
    additionalProperties: false,
    properties: {
      unhealthyGraceMs: { ...duration, description: 'an Unhealthy member is replaced after this long (default 60000)' },
      startupGraceMs: {
        ...duration,
        description: 'a member never Healthy yet is not replaced as Unhealthy before it is this old (default 300000)',
      },
      hostFailureGraceMs: {
        ...duration,
        description: 'a member whose host has not answered this long is replaced on another host (default 60000)',
      },
      maxFailures: {
        ...whole(1, 100),
        description: 'the loop guard: members that never became available... (default 3)',
      },
      windowMs: { ...whole(1000, 30 * DAY_MS), description: '...within this window (default 1800000)...' },
      backoffMs: { ...whole(1000, 30 * DAY_MS), description: '...stop creation this long, doubling (default 600000)' },
      requestedPerHour: {
        ...whole(0, 100),
        description: 'replace-member requests taken in a sliding hour (default 6; 0: none)',
      },
    },
  },
  rotation: {
    type: 'object',
    additionalProperties: false,
    properties: {
      maxAgeMs: { ...whole(60_000, 365 * DAY_MS), description: 'members older than this are replaced (default never)' },
      jitter: { type: 'number', minimum: 0, maximum: 0.5, description: 'fraction of maxAgeMs taken off at random' },
    },
  },
  scaleDownPolicy: { type: 'string', enum: SCALE_DOWN_POLICIES, description: 'default random' },
  drainDelayMs: { ...whole(0, 3_600_000), description: 'a member leaving discovery waits this long (default 10000)' },
} as const;

export const poolSpecSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'name', 'size', 'template'],
  properties: {
    entry: { ...identifierSchema, description: 'provider entry of the providers file' },
    name: poolNameSchema,
    ...specFields,
  },
} as const;

export const poolPatchSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: specFields,
} as const;

export const poolSummarySchema = {
  type: 'object',
  additionalProperties: false,
  required: workflowSummaryRequired,
  properties: {
    ...workflowSummaryProperties,
    phase: { type: 'string', enum: ['Ready', 'Progressing', 'Paused', 'Degraded', 'Deleting', 'Deleted'] },
    desired: { type: 'integer' },
    spares: { type: 'integer' },
    healthy: { type: 'integer' },
    available: { type: 'integer' },
    updated: { type: 'integer' },
    revision: { type: 'integer' },
    replacements: { type: 'integer', description: 'members replaced over the life of the pool' },
    rollbacks: { type: 'integer', description: 'rollouts rolled back' },
  },
} as const;

const statusSchema = { type: 'object', additionalProperties: true, description: 'contracts/pool.ts PoolStatus' };

const poolParams = {
  type: 'object',
  additionalProperties: false,
  required: ['entry', 'pool'],
  properties: { entry: identifierSchema, pool: poolNameSchema },
} as const;

const secured = [{ bearer: [] }];
const tags = ['pools'];
/** 200 with the pool's status after an update; 409 when the pool's validator refused it. */
const updated = {
  200: { type: 'object', properties: { status: statusSchema } },
  ...writeErrors,
  409: { ...errorSchema, description: 'POOL_UPDATE_REFUSED: the pool refused the request (the message says why)' },
};

/** OpenAPI links from a create's answer to the pool's own routes (Schemathesis' stateful phase). */
const toPool = Object.fromEntries(
  (['getPool', 'updatePool', 'scalePool', 'pausePool', 'resumePool', 'rollbackPool', 'deletePool'] as const).map(
    (operationId) => [
      operationId,
      { operationId, parameters: { entry: '$response.body#/pool/entry', pool: '$response.body#/pool/name' } },
    ],
  ),
);
export const createPoolLinks = { 200: toPool, 201: toPool };

const created = { type: 'object', properties: { created: { type: 'boolean' }, pool: poolSummarySchema } };

export const poolRouteSchemas = {
  create: {
    operationId: 'createPool',
    summary: 'Start a pool (idempotent: the same spec again answers 200 with the existing pool)',
    tags,
    security: secured,
    body: poolSpecSchema,
    response: { 200: created, 201: created, ...writeErrors, 409: errorSchema },
  },
  list: {
    operationId: 'listPools',
    summary: 'List pools from the visibility store (their memo: phase and counts), paged',
    tags,
    security: secured,
    querystring: {
      type: 'object',
      additionalProperties: false,
      properties: {
        entry: identifierSchema,
        all: { type: 'boolean', description: 'include ended (deleted) pools' },
        pageSize: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
        pageToken: { type: 'string', maxLength: 4096, pattern: '^[A-Za-z0-9_-]+$' },
      },
    },
    response: {
      200: {
        type: 'object',
        properties: { pools: { type: 'array', items: poolSummarySchema }, nextPageToken: { type: 'string' } },
      },
      ...listErrors,
    },
  },
  get: {
    operationId: 'getPool',
    summary: "One pool: its workflow and the workflow's status query (spec, counts, rollout, members)",
    tags,
    security: secured,
    params: poolParams,
    querystring: { type: 'object', additionalProperties: false, properties: {} },
    response: {
      200: {
        type: 'object',
        properties: { pool: poolSummarySchema, status: statusSchema, statusError: { type: 'string' } },
      },
      ...pathReadErrors,
    },
  },
  update: {
    operationId: 'updatePool',
    summary: "Change the spec: each given top-level field replaces the pool's; a new template rolls out",
    tags,
    security: secured,
    params: poolParams,
    body: poolPatchSchema,
    response: updated,
  },
  scale: {
    operationId: 'scalePool',
    summary: 'Set the size (and spares)',
    tags,
    security: secured,
    params: poolParams,
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['size'],
      properties: { size: specFields.size, spares: specFields.spares },
    },
    response: updated,
  },
  pause: {
    operationId: 'pausePool',
    summary: 'Pause a rollout (failed members are still replaced)',
    tags,
    security: secured,
    params: poolParams,
    response: updated,
  },
  resume: {
    operationId: 'resumePool',
    summary: 'Resume a paused rollout',
    tags,
    security: secured,
    params: poolParams,
    response: updated,
  },
  rollback: {
    operationId: 'rollbackPool',
    summary: 'Roll back to a revision (body {} : the last stable one)',
    tags,
    security: secured,
    params: poolParams,
    body: {
      type: 'object',
      additionalProperties: false,
      properties: { revision: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
    },
    response: updated,
  },
  replaceMember: {
    operationId: 'replacePoolMember',
    summary:
      'Replace a member reported banned: it leaves discovery and the door at once, a replacement is made (409 past replacement.requestedPerHour)',
    tags,
    security: secured,
    params: {
      type: 'object',
      additionalProperties: false,
      required: ['entry', 'pool', 'member'],
      properties: { entry: identifierSchema, pool: poolNameSchema, member: identifierSchema },
    },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['reason'],
      properties: {
        reason: { type: 'string', minLength: 1, maxLength: 200, description: "why (kept in the pool's status)" },
      },
    },
    response: updated,
  },
  delete: {
    operationId: 'deletePool',
    summary: 'Delete a pool and its members (202 once accepted; ?wait=true waits for the end, bounded)',
    tags,
    security: secured,
    params: poolParams,
    querystring: {
      type: 'object',
      additionalProperties: false,
      properties: {
        wait: { type: 'boolean', default: false },
        waitMs: { type: 'integer', minimum: 1, maximum: 600000, description: 'bound on ?wait=true (default 60000)' },
      },
    },
    response: {
      200: { type: 'object', additionalProperties: true },
      202: { type: 'object', additionalProperties: true },
      ...writeErrors,
      409: updated[409],
    },
  },
} as const;
