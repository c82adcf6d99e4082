// What the pool commands share: the spec's options (pool create and pool update take the same
// ones), the pool's path in the API, and the view `pool get` and the updates print.
import type { GetPoolResponse, PoolStatus } from '../../api/responses.ts';
import type { PoolSpecPatch, PoolTemplate, ResolvedPoolSpec } from '../../contracts/pool.ts';
import { optionalWholeNumber } from '../../runtime/options.ts';
import { enc, print, str, usage } from '../command.ts';
import type { Context } from '../command.ts';

/** The pool's path in the API. */
export const poolPath = (entry: string, pool: string): string => `/v1/pools/${enc(entry)}/${enc(pool)}`;

/** Whole-number options of the spec: flag, the group it belongs to (none: top level), field, least value. */
const NUMBERS = [
  ['spares', undefined, 'spares', 0],
  ['max-per-host', 'placement', 'maxPerHost', 1],
  ['max-surge', 'rollout', 'maxSurge', 0],
  ['max-unavailable', 'rollout', 'maxUnavailable', 0],
  ['min-healthy-ms', 'rollout', 'minHealthyMs', 0],
  ['progress-deadline-ms', 'rollout', 'progressDeadlineMs', 0],
  ['unhealthy-grace-ms', 'replacement', 'unhealthyGraceMs', 0],
  ['startup-grace-ms', 'replacement', 'startupGraceMs', 0],
  ['host-failure-grace-ms', 'replacement', 'hostFailureGraceMs', 0],
  ['max-failures', 'replacement', 'maxFailures', 1],
  ['failure-window-ms', 'replacement', 'windowMs', 0],
  ['backoff-ms', 'replacement', 'backoffMs', 0],
  ['requested-per-hour', 'replacement', 'requestedPerHour', 0],
  ['max-age-ms', 'rotation', 'maxAgeMs', 0],
  ['drain-delay-ms', undefined, 'drainDelayMs', 0],
] as const;

const TEMPLATE_NUMBERS = [
  ['vcpus', 'vm', 'vcpus'],
  ['memory-mib', 'vm', 'memoryMiB'],
  ['disk-gib', 'vm', 'diskGiB'],
  ['squid-port', 'squid', 'port'],
] as const;

/** The options of pool create and pool update. */
export const SPEC_OPTIONS = {
  image: { type: 'string' },
  vcpus: { type: 'string' },
  'memory-mib': { type: 'string' },
  'disk-gib': { type: 'string' },
  'squid-port': { type: 'string' },
  'allow-cidr': { type: 'string', multiple: true },
  'avoid-host': { type: 'string', multiple: true },
  jitter: { type: 'string' },
  'scale-down-policy': { type: 'string' },
  ...Object.fromEntries(NUMBERS.map(([flag]) => [flag, { type: 'string' }])),
} as const;

export const SPEC_HELP = `  --image KEY          the template's image key
  --vcpus N, --memory-mib N, --disk-gib N, --squid-port N, --allow-cidr CIDR (repeat)
                       the template's VM size and Squid overrides (default: the entry's)
  --spares K           members kept Healthy out of discovery (default 0)
  --max-per-host N  --avoid-host H (repeat)                        placement
  --max-surge N (1)  --max-unavailable N (0)  --min-healthy-ms MS (10000)
  --progress-deadline-ms MS (600000)                               rollout
  --unhealthy-grace-ms MS (60000)  --startup-grace-ms MS (300000, a member never Healthy yet)
  --host-failure-grace-ms MS (60000, a member whose host does not answer)
  --max-failures N (3)  --failure-window-ms MS (1800000)
  --backoff-ms MS (600000)  --requested-per-hour N (6, pool replace-member requests)
                                                                   replacement and its loop guard
  --max-age-ms MS (never)  --jitter F (0.1)                        rotation by age
  --scale-down-policy random|oldest|newest (random)  --drain-delay-ms MS (10000)`;

type Group = 'placement' | 'rollout' | 'replacement' | 'rotation';

/**
 * The spec fields the options give (only those given). `current` is the pool's spec when updating:
 * a group given in part keeps the pool's other fields of that group (PATCH replaces whole fields),
 * and template options without --image keep the pool's image.
 */
export function specFromOptions(ctx: Context, current?: ResolvedPoolSpec): PoolSpecPatch {
  const out: Record<string, unknown> = {};
  const groups: Partial<Record<Group, Record<string, unknown>>> = {};
  for (const [flag, group, field, min] of NUMBERS) {
    const v = optionalWholeNumber(flag, str(ctx, flag), undefined, { min });
    if (v === undefined) continue;
    if (group === undefined) out[field] = v;
    else (groups[group] ??= {})[field] = v;
  }
  const avoid = ctx.values['avoid-host'] as string[] | undefined;
  if (avoid !== undefined) (groups.placement ??= {})['avoidHosts'] = avoid;
  const jitter = str(ctx, 'jitter');
  if (jitter !== undefined) {
    const j = Number(jitter);
    if (jitter.trim() === '' || !Number.isFinite(j))
      throw usage(`--jitter must be a number from 0 to 0.5, got ${jitter}`);
    (groups.rotation ??= {})['jitter'] = j;
  }
  for (const [group, fields] of Object.entries(groups) as [Group, Record<string, unknown>][]) {
    out[group] = { ...(current?.[group] as object | undefined), ...fields };
  }
  const policy = str(ctx, 'scale-down-policy');
  if (policy !== undefined) out['scaleDownPolicy'] = policy;

  const given: { vm?: Record<string, number>; squid?: Record<string, unknown> } = {};
  for (const [flag, part, field] of TEMPLATE_NUMBERS) {
    const v = optionalWholeNumber(flag, str(ctx, flag), undefined);
    if (v !== undefined) (given[part] ??= {})[field] = v;
  }
  const cidrs = ctx.values['allow-cidr'] as string[] | undefined;
  if (cidrs !== undefined) (given.squid ??= {})['allowedClientCidrs'] = cidrs;
  const image = str(ctx, 'image');
  if (image !== undefined || given.vm !== undefined || given.squid !== undefined) {
    const base: Partial<PoolTemplate> = current?.template ?? {};
    const imageKey = image ?? base.imageKey;
    if (imageKey === undefined) throw usage('the template needs --image KEY');
    const t: PoolTemplate = { ...base, imageKey };
    if (given.vm) t.vm = { ...base.vm, ...given.vm };
    if (given.squid) t.squid = { ...base.squid, ...given.squid };
    out['template'] = t;
  }
  return out;
}

/** What pool get prints with --output json: the counts, the rollout and the members at the top. */
export function poolView(body: GetPoolResponse) {
  const st = body.status;
  if (st === undefined) {
    const p = body.pool;
    return {
      entry: p.entry,
      name: p.name,
      execution: p.execution,
      phase: p.phase,
      desired: p.desired,
      healthy: p.healthy,
      available: p.available,
      updated: p.updated,
      statusError: body.statusError,
    };
  }
  return { execution: body.pool.execution, ...statusView(st), spec: st.spec };
}

/** A status as its counts, rollout and members (each with name, host, state, healthy, imageKey, ageMs). */
export function statusView(st: PoolStatus) {
  return {
    entry: st.entry,
    name: st.name,
    phase: st.phase,
    ...(st.reason === undefined ? {} : { reason: st.reason }),
    desired: st.desired,
    spares: st.spares,
    healthy: st.healthy,
    available: st.available,
    updated: st.updated,
    revision: st.revision,
    ...(st.stableRevision === undefined ? {} : { stableRevision: st.stableRevision }),
    paused: st.paused,
    replacements: st.replacements,
    rollbacks: st.rollbacks,
    replacedOnRequest: st.replacedOnRequest ?? 0,
    rollout: st.rollout ?? null,
    ...(st.door === undefined ? {} : { door: st.door }),
    ...(st.degraded === undefined ? {} : { degraded: st.degraded }),
    members: st.members.map((m) => ({
      name: m.name,
      host: m.host,
      state: m.state,
      healthy: m.healthy,
      imageKey: m.imageKey,
      ageMs: m.ageMs,
      role: m.role,
      available: m.available,
      revision: m.revision,
      address: m.address,
      ...(m.lastError === undefined ? {} : { lastError: m.lastError }),
    })),
  };
}

export const POOL_COLUMNS = ['entry', 'name', 'phase', 'desired', 'healthy', 'available', 'updated', 'revision'];

/** An update's answer: the status (JSON), or its row (table). */
export function printStatus(ctx: Context, st: PoolStatus): void {
  const v = statusView(st);
  print(ctx, v, [{ ...v, step: st.rollout?.step }], [...POOL_COLUMNS, 'paused', 'step']);
}
