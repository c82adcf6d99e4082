// egressctl's command table: every command, in the order of the top-level help.
import { DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE } from '../../client/connection.ts';
import { TASK_QUEUE } from '../../contracts/task-queues.ts';
import type { Command } from '../command.ts';
import { dev } from './dev.ts';
import { discovery } from './discovery.ts';
import { hostCordon, hostDrain, hostUncordon } from './host-actions.ts';
import { hostGet, hostList } from './host-get.ts';
import { hostsCheck } from './hosts-check.ts';
import { imageBuild } from './image-build.ts';
import { imageWarm } from './image-warm.ts';
import { poolDelete, poolPause, poolReplaceMember, poolResume, poolRollback, poolScale } from './pool-actions.ts';
import { poolCreate } from './pool-create.ts';
import { poolGet, poolList } from './pool-get.ts';
import { poolUpdate } from './pool-update.ts';
import { poolWatch } from './pool-watch.ts';
import { proxyCreate } from './proxy-create.ts';
import { proxyDelete } from './proxy-delete.ts';
import { proxyGet } from './proxy-get.ts';
import { proxyList } from './proxy-list.ts';
import { proxyResize } from './proxy-resize.ts';
import { proxyUp } from './proxy-up.ts';
import { proxyWatch } from './proxy-watch.ts';
import { replay } from './replay.ts';
import { smoke } from './smoke.ts';

export const COMMANDS: readonly Command[] = [
  proxyCreate,
  proxyGet,
  proxyList,
  proxyDelete,
  proxyResize,
  proxyWatch,
  proxyUp,
  poolCreate,
  poolGet,
  poolList,
  poolScale,
  poolUpdate,
  poolPause,
  poolResume,
  poolRollback,
  poolReplaceMember,
  poolDelete,
  poolWatch,
  hostGet,
  hostList,
  hostCordon,
  hostDrain,
  hostUncordon,
  imageWarm,
  imageBuild,
  discovery,
  hostsCheck,
  smoke,
  replay,
  dev,
];

/** The command whose words start `words`, e.g. `proxy create` of [proxy, create, lab/p1]. */
export function findCommand(words: readonly string[]): Command | undefined {
  return COMMANDS.find((c) => {
    const own = c.name.split(' ');
    return own.every((w, i) => words[i] === w);
  });
}

export const GLOBAL_HELP = `Global options:
  --api URL            the API (default $EGRESSCTL_API or http://127.0.0.1:8080)
  --token-file FILE    bearer token file (default $EGRESSCTL_TOKEN_FILE); its first token is sent
  --cacert FILE        PEM file of the CAs trusted for an https API, in place of the system's
                       (default $EGRESSCTL_CACERT; without it NODE_EXTRA_CA_CERTS adds to them)
  --output json|table  output format (default table; json prints one JSON document or line per item)
  --timeout-ms MS      bound on each request (default 30000)
  -h, --help           help of the command

Environment: EGRESSCTL_API, EGRESSCTL_TOKEN_FILE, EGRESSCTL_CACERT; proxy up and smoke talk to Temporal itself:
TEMPORAL_ADDRESS (${DEFAULT_TEMPORAL_ADDRESS}), TEMPORAL_NAMESPACE (${DEFAULT_TEMPORAL_NAMESPACE}), TEMPORAL_TASK_QUEUE
(${TASK_QUEUE}), TEMPORAL_UI_URL; LOG_LEVEL (warn; logs are JSON lines on stderr).

Exit codes: 0 ok, 1 failure (including 401/403 and a Failed proxy), 2 usage or bad input (400),
3 not found (404), 4 conflict or refused (409: another spec, a pool refusing an update), 5 API or
Temporal unavailable (unreachable, 503).`;

export const TOP_HELP = `egressctl: start, inspect and delete egress proxies and pools of them, and maintain hosts, through the API

Commands:
${COMMANDS.map((c) => `  ${c.usage}`).join('\n')}

${GLOBAL_HELP}`;
