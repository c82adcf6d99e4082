import type { ErrorKind } from '../contracts/errors.ts';

/**
 * The one vocabulary of failure kinds shared by every layer (libvirt client, SSH transport,
 * provider), defined in contracts/errors.ts where workflows read it too. Activities map
 * `Permanent` to a non-retryable Temporal failure, `Transient` to a retryable one, and treat
 * `NotFound` as success for deletes.
 */
export type { ErrorKind };

/** Options every project error accepts. */
export interface ProjectErrorOptions {
  cause?: unknown;
}

/**
 * Base class of every error the project throws. `code` is stable (listed in docs/errors.md),
 * `name` is the class name (Temporal matches retry policies on it: never rename a subclass) and
 * `kind` says whether retrying can help.
 */
export abstract class ProjectError extends Error {
  abstract readonly code: string;
  abstract readonly kind: ErrorKind;
  constructor(message: string, options?: ProjectErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }
}

/** The kind of any thrown value: project errors carry theirs; anything else is Transient. */
export function errorKind(err: unknown): ErrorKind {
  return err instanceof ProjectError ? err.kind : 'Transient';
}
