// Warm image (`warm/<entry>/<key>`): ensures a base on every host of the entry by joining each
// host's ensure-image workflow as a waiter, exactly as a proxy does, and reports per host. A host
// that fails does not stop the others; the workflow fails only on an unknown entry or key.
import {
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import { imageWorkflowId } from '../contracts/image.ts';
import type { ImageResult } from '../contracts/image.ts';
import { imageLeaveSignal, imageReadySignal } from '../contracts/messages.ts';
import type { WarmHostResult, WarmInput, WarmResult } from '../contracts/warm.ts';
import { QUICK_ACTIVITY, RPC_ACTIVITY } from './activity-options.ts';

const quick = proxyActivities<Activities>(QUICK_ACTIVITY);
const rpc = proxyActivities<Activities>(RPC_ACTIVITY);

export async function warmImageWorkflow(input: WarmInput): Promise<WarmResult> {
  const me = workflowInfo().workflowId;
  const results = new Map<string, ImageResult>();
  setHandler(imageReadySignal, (r) => {
    if (r.workflowId !== undefined) results.set(r.workflowId, r);
  });
  const { hosts, attemptTimeoutMs } = await quick.imageHosts(input);
  const ids = hosts.map((host) => imageWorkflowId(host, input.entry, input.key));
  try {
    for (const host of hosts) {
      await rpc.joinImage({
        workflowId: imageWorkflowId(host, input.entry, input.key),
        image: { entry: input.entry, host, key: input.key, attemptTimeoutMs },
        waiter: me,
      });
    }
    await condition(() => ids.every((id) => results.has(id)));
  } finally {
    // Cancelled: leave every image workflow still running, so an upload nobody waits for stops.
    await CancellationScope.nonCancellable(async () => {
      for (const id of ids.filter((i) => !results.has(i))) {
        await getExternalWorkflowHandle(id)
          .signal(imageLeaveSignal, { waiter: me })
          .catch(() => undefined);
      }
    });
  }
  return {
    entry: input.entry,
    key: input.key,
    hosts: hosts.map((host, i): WarmHostResult => {
      const r = results.get(ids[i]!)!;
      return r.ok
        ? { host, ok: true, cached: r.base.cached, sizeBytes: r.base.sizeBytes }
        : { host, ok: false, error: `${r.code}: ${r.message}` };
    }),
  };
}
