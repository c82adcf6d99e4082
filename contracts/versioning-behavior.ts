// Worker Versioning behaviors as plain values, with no imports: the worker's option parsing
// (runtime/versioning.ts) reads them before --help is answered, when nothing of the SDK may load.

export type WorkflowVersioningBehavior = 'AUTO_UPGRADE' | 'PINNED';

/** The behavior a versioned worker gives a type without its own: pinned, which never replays another build's run. */
export const DEFAULT_VERSIONING_BEHAVIOR: WorkflowVersioningBehavior = 'PINNED';
