// The API's errors and its one error handler: every failure becomes a JSON body
// `{ error: { code, message, field? } }` with a 4xx, or a 503 when Temporal cannot be reached;
// nothing ever answers with a stack trace. Codes are listed in docs/api.md.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isTemporalUnavailable } from '../client/errors.ts';
import { CODES } from '../contracts/errors.ts';

// Raised by client/ when Temporal does not answer; routes and stand-in stores throw it too.
export { isTemporalUnavailable, TemporalUnavailableError } from '../client/errors.ts';

/**
 * Every error code the API answers with, and its status: the one table (docs/api.md lists each;
 * test/unit/api-error-codes.test.ts fails on one it does not).
 */
export const API_ERRORS = {
  UNKNOWN_FIELD: 400,
  MISSING_FIELD: 400,
  INVALID_FIELD: 400,
  INVALID_JSON: 400,
  INVALID_BODY: 400,
  INVALID_PATH: 400,
  BAD_REQUEST: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  NO_PROVIDER_HEALTH: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  RESIZE_REFUSED: 409,
  POOL_UPDATE_REFUSED: 409,
  HOST_UPDATE_REFUSED: 409,
  BODY_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  UNSUPPORTED_CONTENT_TYPE: 415,
  [CODES.openProxyRefused]: 422,
  INVALID_CIDR: 422,
  INVALID_PAGE_TOKEN: 422,
  UNKNOWN_ENTRY: 422,
  UNKNOWN_IMAGE: 422,
  OVERRIDE_REFUSED: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  CATALOG_UNAVAILABLE: 503,
  CATALOG_CONFLICT: 503,
  TEMPORAL_UNAVAILABLE: 503,
} as const satisfies Record<string, number>;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** An error the API answers with as is: a code of API_ERRORS (its status), message and the field at fault. */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly code: ApiErrorCode;
  readonly field: string | undefined;
  constructor(code: ApiErrorCode, message: string, field?: string) {
    super(message);
    this.name = 'ApiError';
    this.statusCode = API_ERRORS[code];
    this.code = code;
    this.field = field;
  }
}

export interface ErrorBody {
  error: { code: string; message: string; field?: string };
}

export function errorBody(code: ApiErrorCode, message: string, field?: string): ErrorBody {
  return { error: field === undefined ? { code, message } : { code, message, field } };
}

interface AjvIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** The dotted field an ajv issue is about: `squid.allowedClientCidrs[0]`, `vm.extra`. */
export function fieldOf(issue: AjvIssue): string {
  const segs = (issue.instancePath ?? '')
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
  const extra = issue.params?.['additionalProperty'] ?? issue.params?.['missingProperty'];
  if (typeof extra === 'string') segs.push(extra);
  let out = '';
  for (const s of segs) out += /^\d+$/.test(s) ? `[${s}]` : out === '' ? s : `.${s}`;
  return out;
}

const PART_NAMES: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** A 400 naming the field of the first schema violation, in words an operator can act on. */
export function validationError(issues: AjvIssue[], context: string | undefined): ApiError {
  const issue = issues[0] ?? {};
  const part = PART_NAMES[context ?? 'body'] ?? 'body';
  const field = fieldOf(issue);
  const where = field === '' ? `the ${part}` : `${part} field ${field}`;
  switch (issue.keyword) {
    case 'additionalProperties':
      return new ApiError('UNKNOWN_FIELD', `unknown ${part} field ${field}`, field);
    case 'required':
      return new ApiError('MISSING_FIELD', `${where} is required`, field);
    default:
      return new ApiError('INVALID_FIELD', `${where} ${issue.message ?? 'is invalid'}`, field || undefined);
  }
}

type Logged = Pick<FastifyRequest, 'log' | 'id'>;

/** Fastify's error handler: the only place an error becomes a response. */
export function handleError(err: FastifyError | Error, request: Logged, reply: FastifyReply): void {
  const send = (e: ApiError): void => {
    void reply
      .code(e.statusCode)
      .type('application/json; charset=utf-8')
      .send(errorBody(e.code, e.message, e.field));
  };
  if (err instanceof ApiError) return send(err);
  const fe = err as FastifyError & { validation?: AjvIssue[]; validationContext?: string };
  if (Array.isArray(fe.validation)) return send(validationError(fe.validation, fe.validationContext));
  if (isTemporalUnavailable(err)) {
    request.log.warn({ err }, 'Temporal unavailable');
    return send(new ApiError('TEMPORAL_UNAVAILABLE', 'Temporal is unavailable or did not answer in time; retry later'));
  }
  const known = fastifyError(fe);
  if (known !== undefined) return send(known);
  if (err instanceof SyntaxError) {
    // secure-json-parse: invalid JSON, __proto__ keys.
    return send(new ApiError('INVALID_JSON', `the request is malformed: ${err.message.slice(0, 200)}`, 'body'));
  }
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    request.log.info({ err }, 'request refused by the framework');
    return send(new ApiError('BAD_REQUEST', err.message.slice(0, 300)));
  }
  request.log.error({ err }, 'request failed');
  send(new ApiError('INTERNAL', `the request failed inside the API; see its log (request ${request.id})`));
}

/** Fastify's own errors (body parsing, URL, path length) in the API's words; undefined for others. */
export function fastifyError(fe: Pick<FastifyError, 'code' | 'message'>): ApiError | undefined {
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(
        'UNSUPPORTED_CONTENT_TYPE',
        'the body must be JSON: send Content-Type: application/json',
        'body',
      );
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('INVALID_BODY', 'the JSON body is empty or its length is wrong', 'body');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('BODY_TOO_LARGE', `the body is larger than the API accepts (${fe.message})`, 'body');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('INVALID_JSON', 'the body is not valid JSON', 'body');
    case 'FST_ERR_BAD_URL':
      return new ApiError('INVALID_PATH', 'the path is not a valid URL (bad percent-encoding?)', 'path');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ApiError(
        'URI_TOO_LONG',
        'a path segment is longer than any identifier (at most 40 characters); check the proxy, entry or image name',
        'path',
      );
    default:
      return undefined;
  }
}
