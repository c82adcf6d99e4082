// /v1/hosts: the known hosts (the last provider-health survey and open maintenance workflows) with
// their maintenance status, survey figures and open proxies; one host; and the maintenance
// actions cordon, drain and uncordon (Temporal Updates of the host's workflow `host/<entry>/<host>`,
// docs/api.md "Hosts"). A host is addressed as /v1/hosts/{entry}/{host}. A host the API does not
// know is a 404 naming the ones it does, so a typo never starts a workflow for a host that is not
// there; what the host workflow refuses is a 409 HOST_UPDATE_REFUSED with its reason.
import type { FastifyInstance } from 'fastify';
import type { HostActionRequest, HostStatus, HostView } from '../contracts/host.ts';
import type { HostAction, HostStore, KnownHosts } from '../client/host-store.ts';
import { requireWrite } from './auth.ts';
import { ApiError } from './errors.ts';
import { hostRouteSchemas } from './schemas-hosts.ts';

export interface HostRoutesOptions {
  hosts: HostStore;
  /** Where a host's maintenance workflow starts when it has none. */
  taskQueue: string;
}

interface Params {
  entry: string;
  host: string;
}

/** `GET /v1/hosts`. */
export interface ListHostsResponse {
  hosts: HostView[];
}
/** `GET /v1/hosts/{entry}/{host}`. */
export interface GetHostResponse {
  host: HostView;
}
/** `POST /v1/hosts/{entry}/{host}/cordon|drain|uncordon`: the host's status after it. */
export interface HostActionResponse {
  status: HostStatus;
}

/** Names listed in a 404 at most. */
const NAMES_MAX = 50;

const names = (list: string[]): string =>
  list.length > NAMES_MAX
    ? `${list.slice(0, NAMES_MAX).join(', ')} and ${list.length - NAMES_MAX} more`
    : list.join(', ');

/** The 404 of a host the API does not know, naming the hosts (or entries) it knows and where they come from. */
export function unknownHost(entry: string, host: string, known: KnownHosts): ApiError {
  const source =
    known.surveyedAt === undefined
      ? 'no provider-health survey has answered yet (a worker creates the schedule at start-up; its first run ' +
        'comes after hostHealthIntervalMs), so only hosts with an open maintenance workflow are known'
      : `hosts are known from the provider-health survey of ${known.surveyedAt} and open maintenance workflows; ` +
        'a host added to the providers file since is known after the next survey';
  const ofEntry = known.hosts.filter((h) => h.entry === entry).map((h) => h.host);
  if (ofEntry.length > 0) {
    return new ApiError(
      'NOT_FOUND',
      `no host ${entry}/${host}: the known hosts of ${entry} are ${names(ofEntry)} (${source})`,
    );
  }
  const entries = [...new Set(known.hosts.map((h) => h.entry))];
  const others = entries.length > 0 ? `the known entries are ${names(entries)}` : 'no host is known';
  return new ApiError('NOT_FOUND', `no host ${entry}/${host}: entry ${entry} has no known host; ${others} (${source})`);
}

const WHAT: Record<HostAction, string> = {
  cordon: 'cordoning a host',
  drain: 'draining a host',
  uncordon: 'uncordoning a host',
};

export function registerHostRoutes(app: FastifyInstance, o: HostRoutesOptions): void {
  const { hosts } = o;

  app.get<{ Querystring: { entry?: string } }>(
    '/v1/hosts',
    { schema: hostRouteSchemas.list },
    async (request): Promise<ListHostsResponse> => ({ hosts: await hosts.listHosts(request.query.entry) }),
  );

  app.get<{ Params: Params }>(
    '/v1/hosts/:entry/:host',
    { schema: hostRouteSchemas.get },
    async (request): Promise<GetHostResponse> => {
      const { entry, host } = request.params;
      const view = await hosts.getHost(entry, host);
      if (view === undefined) throw unknownHost(entry, host, await hosts.knownHosts());
      return { host: view };
    },
  );

  for (const action of ['cordon', 'drain', 'uncordon'] as const) {
    app.post<{ Params: Params; Body: HostActionRequest | undefined }>(
      `/v1/hosts/:entry/:host/${action}`,
      {
        schema: hostRouteSchemas[action],
        // The body is optional: none is `{}` (no reason).
        preValidation: (request, _reply, done) => {
          if (request.body === undefined) request.body = {};
          done();
        },
      },
      async (request): Promise<HostActionResponse> => {
        requireWrite(request.role, WHAT[action]);
        const { entry, host } = request.params;
        const known = await hosts.knownHosts();
        if (!known.hosts.some((h) => h.entry === entry && h.host === host)) throw unknownHost(entry, host, known);
        const body = request.body ?? {};
        const req: HostActionRequest = {
          ...(body.reason === undefined ? {} : { reason: body.reason }),
          // The schema takes deadlineMs on drain only.
          ...(body.deadlineMs === undefined ? {} : { deadlineMs: body.deadlineMs }),
        };
        const r = await hosts.act(action, entry, host, req, o.taskQueue);
        if (r.kind === 'refused') {
          throw new ApiError(
            'HOST_UPDATE_REFUSED',
            `host ${entry}/${host} refused the ${action}: ${r.message.slice(0, 500)}`,
          );
        }
        request.log.info(
          { entry, host, action, reason: req.reason, deadlineMs: req.deadlineMs, phase: r.status.phase },
          `host ${action}`,
        );
        return { status: r.status };
      },
    );
  }
}
