/**
 * The logging surface the SSH layer needs: a subset of pino's `Logger`, so a pino logger (or a
 * child of one) can be passed as is. Lines carry host, port, timings and outcomes; never key
 * material, passphrases or agent details.
 */
export interface SshLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}
