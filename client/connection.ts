// Where Temporal is and how long a call to it may take: the one place for the connection settings
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE and their defaults), read by the
// worker, the API, the CLI and the tests, and the one deadline helper every client call of
// client/ runs under. This file loads no SDK code until a connection is made, so an entry point
// can print its --help (defaults included) without loading the Temporal client.
import type { Client, Connection } from '@temporalio/client';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
import { isTemporalUnavailable, TemporalUnavailableError } from './errors.ts';

/** The frontend address when TEMPORAL_ADDRESS is unset: scripts/temporal's dev server. */
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
/** The namespace when TEMPORAL_NAMESPACE is unset. */
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';
/** Deadline of one Temporal call when the caller names none, in ms. */
export const DEFAULT_CALL_TIMEOUT_MS = 10_000;

export interface TemporalSettings {
  /** The frontend's `host:port`. */
  address: string;
  namespace: string;
  /** The task queue of the project's workflows and activities. */
  taskQueue: string;
}

/** The settings from the environment (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_TASK_QUEUE`). */
export function temporalSettings(env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  return {
    address: env['TEMPORAL_ADDRESS'] || DEFAULT_TEMPORAL_ADDRESS,
    namespace: env['TEMPORAL_NAMESPACE'] || DEFAULT_TEMPORAL_NAMESPACE,
    taskQueue: env['TEMPORAL_TASK_QUEUE'] || TASK_QUEUE,
  };
}

export interface ConnectOptions {
  /** Bound of the connection attempt, in ms. */
  connectTimeoutMs: number;
  /** Connect at the first call, not now (a server that starts while Temporal is down). Default false. */
  lazy?: boolean;
}

/** A client of `settings.namespace` at `settings.address`; close it with `client.connection.close()`. */
export async function connectClient(
  settings: Pick<TemporalSettings, 'address' | 'namespace'>,
  o: ConnectOptions,
): Promise<Client> {
  const { Client, Connection } = await import('@temporalio/client');
  const options = { address: settings.address, connectTimeout: o.connectTimeoutMs };
  const connection = o.lazy ? Connection.lazy(options) : await Connection.connect(options);
  return new Client({ connection, namespace: settings.namespace });
}

/**
 * Runs `fn` (Temporal calls through `client`) under a deadline of `timeoutMs`; a server that does
 * not answer in time, or cannot be reached, becomes a TemporalUnavailableError naming `what`.
 */
export async function withDeadline<T>(
  client: Pick<Client | Connection, 'withDeadline'>,
  what: string,
  timeoutMs: number,
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await client.withDeadline(Date.now() + timeoutMs, fn);
  } catch (err) {
    if (isTemporalUnavailable(err) && !(err instanceof TemporalUnavailableError)) {
      throw new TemporalUnavailableError(`Temporal did not answer ${what} within ${timeoutMs} ms`, { cause: err });
    }
    throw err;
  }
}
