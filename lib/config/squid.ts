/**
 * One proxy's Squid settings: the entry's `squid` with the client's overrides applied, checked by
 * the same schema as the providers file and by the open-proxy rule. Errors name the request's
 * field (`squid.<path>`).
 */
import { openBlocks } from '../../contracts/cidr.ts';
import type { ResolvedSquid, SquidOverrides } from '../../contracts/squid.ts';
import { ProxySpecError } from './errors.ts';
import { formatPath } from './load.ts';
import { SquidSchema } from './schema.ts';
import type { SquidConfig } from './schema.ts';

/**
 * `entry`'s Squid settings with `overrides` applied; a ProxySpecError naming the field for a value
 * the schema refuses, or for client blocks that admit every address unless `allowOpenProxy`.
 */
export function resolveSquid(
  entry: SquidConfig,
  overrides: SquidOverrides | undefined,
  allowOpenProxy: boolean,
): ResolvedSquid {
  const squid = SquidSchema.safeParse({ ...entry, ...overrides });
  if (!squid.success) {
    const issue = squid.error.issues[0]!;
    throw new ProxySpecError(`squid.${formatPath(issue.path)}`, issue.message);
  }
  if (!allowOpenProxy) {
    const [open] = openBlocks(squid.data.allowedClientCidrs);
    if (open !== undefined) {
      throw new ProxySpecError(
        `squid.allowedClientCidrs[${open.index}]`,
        `${open.problem} (an open proxy); list the client networks, or set allowOpenProxy: true in the providers file`,
      );
    }
  }
  return { port: squid.data.port, allowedClientCidrs: [...squid.data.allowedClientCidrs] };
}
