// The waiter's side of the ensure-image protocol (image.ts), for every workflow that needs a base
// on a host (the proxy lifecycle, warm): join the host's ensure-image workflow through the
// `joinImage` activity (signal-with-start), wait for its `imageReady` signal (or take the base the
// join found already in the pool), and leave the ones
// that have not answered when the waiter stops waiting (cancelled, deleted, gave up), so an
// upload nobody waits for is aborted.
import { CancellationScope, condition, getExternalWorkflowHandle, setHandler } from '@temporalio/workflow';
import type { ImageResult, ImageWorkflowInput } from '../contracts/image.ts';
import { imageLeaveSignal, imageReadySignal } from '../contracts/messages.ts';
import { rpc } from './stubs.ts';

export class ImageWaiter {
  private readonly waiter: string;
  private readonly results = new Map<string, ImageResult>();
  /** Ensure-image workflows joined (or being joined); those without a result are left on the way out. */
  private readonly joined = new Set<string>();
  private lastJoined: string | undefined;

  /** `waiter` is this workflow's ID. Sets the `imageReady` handler: construct it once, at the start. */
  constructor(waiter: string) {
    this.waiter = waiter;
    setHandler(imageReadySignal, (r) => {
      // Runs recorded before results named their ensure-image workflow answered the last one joined.
      const id = r.workflowId ?? this.lastJoined;
      if (id !== undefined) this.results.set(id, r);
    });
  }

  /**
   * Joins the ensure-image workflow `workflowId` for `image`; a result it gave before is forgotten.
   * When the join found the base already in the pool (the activity looks after joining) that is
   * the result at once: no wait for the workflow's signal.
   */
  async join(workflowId: string, image: ImageWorkflowInput): Promise<void> {
    this.results.delete(workflowId);
    this.joined.add(workflowId);
    this.lastJoined = workflowId;
    const found = await rpc.joinImage({ workflowId, image, waiter: this.waiter });
    if (found != null && !this.results.has(workflowId)) {
      this.results.set(workflowId, { ok: true, base: found, workflowId });
    }
  }

  /** Waits until each of `ids` has answered; false when `timeoutMs` passed first. */
  async ready(ids: readonly string[], timeoutMs?: number): Promise<boolean> {
    const answered = (): boolean => ids.every((id) => this.results.has(id));
    if (timeoutMs === undefined) {
      await condition(answered);
      return true;
    }
    return condition(answered, timeoutMs);
  }

  /** What `workflowId` answered, if it has. */
  result(workflowId: string): ImageResult | undefined {
    return this.results.get(workflowId);
  }

  /** Joined and not answered yet. */
  awaiting(workflowId: string): boolean {
    return this.joined.has(workflowId) && !this.results.has(workflowId);
  }

  /** Leaves each of `ids` (default: every one joined) that has not answered; never cancelled. */
  async leave(ids: Iterable<string> = this.joined): Promise<void> {
    const unanswered = [...ids].filter((id) => !this.results.has(id));
    await CancellationScope.nonCancellable(async () => {
      for (const id of unanswered) {
        this.joined.delete(id);
        await getExternalWorkflowHandle(id)
          .signal(imageLeaveSignal, { waiter: this.waiter })
          .catch(() => undefined); // the image workflow is gone: nothing to leave
      }
    });
  }
}
