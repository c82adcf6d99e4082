// Warm image (`warm/<entry>/<key>`): ensures a base on every host of the entry by joining each
// host's ensure-image workflow as a waiter, exactly as a proxy does (image-join.ts), and reports
// per host. A host that fails does not stop the others; the workflow fails only on an unknown
// entry or key.
import { workflowInfo } from '@temporalio/workflow';
import { imageWorkflowId } from '../contracts/image.ts';
import type { WarmHostResult, WarmInput, WarmResult } from '../contracts/warm.ts';
import { ImageWaiter } from './image-join.ts';
import { quick } from './stubs.ts';

export async function warmImageWorkflow(input: WarmInput): Promise<WarmResult> {
  const images = new ImageWaiter(workflowInfo().workflowId);
  const { hosts, attemptTimeoutMs } = await quick.imageHosts(input);
  const ids = hosts.map((host) => imageWorkflowId(host, input.entry, input.key));
  try {
    for (const host of hosts) {
      await images.join(imageWorkflowId(host, input.entry, input.key), {
        entry: input.entry,
        host,
        key: input.key,
        attemptTimeoutMs,
      });
    }
    await images.ready(ids);
  } finally {
    // Cancelled: leave every image workflow still running, so an upload nobody waits for stops.
    await images.leave(ids);
  }
  return {
    entry: input.entry,
    key: input.key,
    hosts: hosts.map((host, i): WarmHostResult => {
      const r = images.result(ids[i]!)!;
      return r.ok
        ? { host, ok: true, cached: r.base.cached, sizeBytes: r.base.sizeBytes }
        : { host, ok: false, error: `${r.code}: ${r.message}` };
    }),
  };
}
