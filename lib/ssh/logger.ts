/** The SSH layer logs through the library's one logger type. */
import type { LineLogger } from '../log/line-logger.ts';

/** @deprecated Use `LineLogger` from lib/log/line-logger.ts; kept until activities/ and test/support/ switch. */
export type SshLogger = LineLogger;
