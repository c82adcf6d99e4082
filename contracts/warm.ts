// Warming a base image onto every host of a provider entry ahead of the first proxy: one
// workflow per (entry, key) that joins the ensure-image workflow of each host, exactly as a proxy
// does, so a warm and a proxy that need the same base share one download and one upload.

export const WARM_WORKFLOW_TYPE = 'warmImageWorkflow';

/** `warm/<entry>/<key>`. */
export function warmWorkflowId(entry: string, key: string): string {
  return `warm/${entry}/${key}`;
}

export interface WarmInput {
  entry: string;
  key: string;
}

export interface WarmHostResult {
  host: string;
  ok: boolean;
  /** The base was already there (no download). */
  cached?: boolean;
  sizeBytes?: number;
  /** `CODE: message` when the base could not be ensured on this host. */
  error?: string;
}

export interface WarmResult {
  entry: string;
  key: string;
  hosts: WarmHostResult[];
}
