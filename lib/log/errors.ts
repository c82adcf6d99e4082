import { ProjectError } from '../errors.ts';

/** A logging setting (e.g. `LOG_LEVEL`) has a value that is not accepted. */
export class LogConfigError extends ProjectError {
  readonly code = 'LOG_CONFIG_INVALID';
  readonly kind = 'Permanent' as const;
}
