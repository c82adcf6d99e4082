// The API's errors and its one error handler: every failure becomes a JSON body
// `{ error: { code, message, field? } }` with a 4xx, or a 503 when Temporal cannot be reached;
// nothing ever answers with a stack trace. Codes are listed in docs/api.md.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isTemporalUnavailable } from '../client/errors.ts';

// Raised by client/ when Temporal does not answer; routes and stand-in stores throw it too.
export { isTemporalUnavailable, TemporalUnavailableError } from '../client/errors.ts';

/** An error the API answers with as is: status, stable code, message and the field at fault. */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly code: string;
  readonly field: string | undefined;
  constructor(statusCode: number, code: string, message: string, field?: string) {
    super(message);
    this.name = 'ApiError';
    this.statusCode = statusCode;
    this.code = code;
    this.field = field;
  }
}

export interface ErrorBody {
  error: { code: string; message: string; field?: string };
}

export function errorBody(code: string, message: string, field?: string): ErrorBody {
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
      return new ApiError(400, 'UNKNOWN_FIELD', `unknown ${part} field ${field}`, field);
    case 'required':
      return new ApiError(400, 'MISSING_FIELD', `${where} is required`, field);
    default:
      return new ApiError(400, 'INVALID_FIELD', `${where} ${issue.message ?? 'is invalid'}`, field || undefined);
  }
}

type Logged = Pick<FastifyRequest, 'log' | 'id'>;

/** Fastify's error handler: the only place an error becomes a response. */
export function handleError(err: FastifyError | Error, request: Logged, reply: FastifyReply): void {
  const send = (status: number, body: ErrorBody): void => {
    void reply.code(status).type('application/json; charset=utf-8').send(body);
  };
  if (err instanceof ApiError) {
    send(err.statusCode, errorBody(err.code, err.message, err.field));
    return;
  }
  const fe = err as FastifyError & { validation?: AjvIssue[]; validationContext?: string };
  if (Array.isArray(fe.validation)) {
    const v = validationError(fe.validation, fe.validationContext);
    send(400, errorBody(v.code, v.message, v.field));
    return;
  }
  if (isTemporalUnavailable(err)) {
    request.log.warn({ err }, 'Temporal unavailable');
    send(503, errorBody('TEMPORAL_UNAVAILABLE', 'Temporal is unavailable or did not answer in time; retry later'));
    return;
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      send(
        400,
        errorBody('UNSUPPORTED_CONTENT_TYPE', 'the body must be JSON: send Content-Type: application/json', 'body'),
      );
      return;
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      send(400, errorBody('INVALID_BODY', 'the JSON body is empty or its length is wrong', 'body'));
      return;
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      send(413, errorBody('BODY_TOO_LARGE', `the body is larger than the API accepts (${err.message})`, 'body'));
      return;
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      send(400, errorBody('INVALID_JSON', 'the body is not valid JSON', 'body'));
      return;
  }
  if (err instanceof SyntaxError || fe.code === 'FST_ERR_BAD_URL') {
    // secure-json-parse (invalid JSON, __proto__ keys) and malformed URLs.
    send(400, errorBody('INVALID_JSON', `the request is malformed: ${err.message.slice(0, 200)}`, 'body'));
    return;
  }
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    send(status, errorBody(fe.code ?? 'BAD_REQUEST', err.message.slice(0, 300)));
    return;
  }
  request.log.error({ err }, 'request failed');
  send(500, errorBody('INTERNAL', `the request failed inside the API; see its log (request ${request.id})`));
}
