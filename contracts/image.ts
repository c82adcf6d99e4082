// The ensure-image workflow's contract: one workflow per (host, provider entry, image key), so
// every proxy on any worker that needs the same cold base joins one fetch and one upload. The
// messages' define* objects are in messages.ts; the waiter's side is workflows/image-join.ts.

/** Workflow type of the ensure-image workflow. */
export const IMAGE_WORKFLOW_TYPE = 'ensureImageWorkflow';
/** Signal: a proxy workflow waits on this image (`{ waiter }`, its workflow ID). */
export const IMAGE_JOIN_SIGNAL = 'join';
/** Signal: a proxy workflow no longer waits (deleted or cancelled); the last one out aborts the upload. */
export const IMAGE_LEAVE_SIGNAL = 'leave';
/** Query: the waiters and the last progress. */
export const IMAGE_STATUS_QUERY = 'imageStatus';
/** Signal sent to each waiter when the image is ready or failed. */
export const IMAGE_READY_SIGNAL = 'imageReady';
/** Signal sent to each waiter with upload progress (at most every few seconds). */
export const IMAGE_PROGRESS_SIGNAL = 'imageProgress';

/** `image/<host>/<entry>/<key>`. */
export function imageWorkflowId(host: string, entry: string, key: string): string {
  return `image/${host}/${entry}/${key}`;
}

export interface ImageWorkflowInput {
  entry: string;
  host: string;
  key: string;
  /** Bound on one fetch-and-upload attempt, in ms (the entry's downloadTotalMs plus a margin). */
  attemptTimeoutMs?: number;
}

export interface EnsuredBase {
  volumeName: string;
  path: string;
  format: 'qcow2' | 'raw';
  sizeBytes: number;
  sha256: string;
  cached: boolean;
}

/**
 * What the upload activity returns: the base, and the waiters it already told (`imageReady`, sent
 * from the activity in parallel the moment the base is published), so the ensure-image workflow
 * signals only those that joined after. Absent in runs recorded before the broadcast: tell all.
 */
export type EnsuredBaseTold = EnsuredBase & { toldWaiters?: string[] };

/** The outcome each waiter is told; `workflowId` names the ensure-image run it came from. */
export type ImageResult = (
  { ok: true; base: EnsuredBase } | { ok: false; kind: string; code: string; message: string }
) & { workflowId?: string };

export interface ImageJoin {
  /** The waiting proxy workflow's ID. */
  waiter: string;
}

export interface ImageProgressSignal {
  workflowId: string;
  bytes: number;
  totalBytes: number;
  bytesPerSecond: number;
  /** When the uploading activity took this sample (RFC 3339); absent from older senders. */
  at?: string;
}

export interface ImageStatus {
  waiters: string[];
  progress?: ImageProgressSignal;
  result?: ImageResult;
}
