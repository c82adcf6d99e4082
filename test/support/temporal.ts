/**
 * Helpers for tests that run against a real Temporal server: the dev server that
 * `scripts/temporal up` starts, or the time-skipping test server it installs. Every wait here is
 * bounded; every failure to reach a server names the address and the command that fixes it.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import { connectClient as connectTo, sdkConnectionOptions, temporalSettings } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { poolTaskQueue } from '../../contracts/task-queues.ts';
import {
  ensureSearchAttributes,
  INDEXED_VALUE_TYPES,
  registeredSearchAttributes,
} from '../../client/search-attributes.ts';
import { createLogger, logLevelFromEnv } from '../../lib/log/logger.ts';
import { sdkLoggerFromPino, sdkLogLevelFor } from '../../lib/log/temporal-adapter.ts';

const execFileAsync = promisify(execFile);

const settings = temporalSettings();
/** The dev server's frontend: `TEMPORAL_ADDRESS`, default scripts/temporal's (client/connection.ts). */
export const TEMPORAL_ADDRESS = settings.address;
/** The namespace tests use: `TEMPORAL_NAMESPACE`, default `default`. */
export const TEMPORAL_NAMESPACE = settings.namespace;
/** The project root (two levels above this file). */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Entry of the workflow bundle, as `workers/worker.ts` uses it. */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

const CONNECT_TIMEOUT_MS = 5_000;
const HOW_TO_START = 'start it with `scripts/temporal up` (or point TEMPORAL_ADDRESS at a running server)';

/** A workflow ID or task queue name no other test run uses: `<prefix>-<time>-<random>`. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomUUID().slice(0, 8)}`;
}

/** A visibility clause for a worker's task queues: `taskQueue` and the pools' one beside it. */
export function onTaskQueues(taskQueue: string): string {
  return `TaskQueue IN ('${taskQueue}', '${poolTaskQueue(taskQueue)}')`;
}

let runtimeInstalled = false;

/**
 * Installs the Temporal Runtime with the project's pino logger (stderr, `LOG_LEVEL`, default
 * `warn` so test output stays readable) and Core's logs forwarded into it. Call before creating
 * any worker, native connection or test environment; later calls do nothing.
 */
export function installTestRuntime(): void {
  if (runtimeInstalled) return;
  const level = logLevelFromEnv(process.env, 'warn');
  const log = createLogger({ name: 'test', level, stream: 'stderr' });
  Runtime.install({
    logger: sdkLoggerFromPino(log.child({ component: 'temporal' })),
    telemetryOptions: { logging: { filter: { core: sdkLogLevelFor(level), other: 'ERROR' }, forward: {} } },
  });
  runtimeInstalled = true;
}

/** Namespaces (`address/namespace`) whose search attributes this process has ensured. */
const registered = new Map<string, Promise<string[]>>();

/** TLS and API key of a connection (client/connection.ts's settings); none for the dev server. */
export type TemporalCredentials = Pick<TemporalSettings, 'tls' | 'apiKey'>;

/**
 * Connects a client to the dev server, failing within a few seconds with a message that says how
 * to start it, and registers the project's search attributes on the namespace (once per process),
 * as the worker does at start-up: tests that run workflows or list proxies without a worker
 * process find them registered. `credentials`: TLS (e.g. `scripts/temporal cluster`'s mTLS).
 */
export async function connectClient(
  address = TEMPORAL_ADDRESS,
  namespace = TEMPORAL_NAMESPACE,
  credentials: TemporalCredentials = {},
): Promise<Client> {
  let client: Client;
  try {
    client = await connectTo({ address, namespace, ...credentials }, { connectTimeoutMs: CONNECT_TIMEOUT_MS });
  } catch (cause) {
    throw new Error(`Temporal dev server not reachable at ${address}: ${HOW_TO_START}. (${errorText(cause)})`, {
      cause,
    });
  }
  const key = `${address}/${namespace}`;
  let done = registered.get(key);
  if (done === undefined) {
    done = ensureSearchAttributes(client.connection, namespace);
    registered.set(key, done);
    done.catch(() => registered.delete(key));
  }
  try {
    await done;
  } catch (err) {
    await client.connection.close();
    throw err;
  }
  return client;
}

/** Connects a worker's native connection to the dev server (bounded, same message as `connectClient`; `credentials` as there). */
export async function connectWorker(
  address = TEMPORAL_ADDRESS,
  credentials: TemporalCredentials = {},
): Promise<NativeConnection> {
  try {
    return await withTimeout(
      NativeConnection.connect(sdkConnectionOptions({ address, ...credentials })),
      CONNECT_TIMEOUT_MS * 2,
      `connect a worker to ${address}`,
    );
  } catch (cause) {
    throw new Error(`Temporal dev server not reachable at ${address}: ${HOW_TO_START}. (${errorText(cause)})`, {
      cause,
    });
  }
}

/**
 * The time-skipping test server's binary: `TEMPORAL_TEST_SERVER_PATH`, else what
 * `scripts/temporal test-server-path` prints. Never downloads (the SDK's own download would need
 * the internet); fails naming `scripts/temporal setup` when nothing is installed.
 */
export async function testServerPath(): Promise<string> {
  const fromEnv = process.env['TEMPORAL_TEST_SERVER_PATH'];
  if (fromEnv) return fromEnv;
  try {
    const { stdout } = await execFileAsync(`${PROJECT_ROOT}scripts/temporal`, ['test-server-path'], {
      timeout: 30_000,
      encoding: 'utf8',
    });
    const path = stdout.trim();
    if (path === '') throw new Error('scripts/temporal test-server-path printed nothing');
    return path;
  } catch (cause) {
    throw new Error(
      `no Temporal test server: run \`scripts/temporal setup\` (or set TEMPORAL_TEST_SERVER_PATH). (${errorText(cause)})`,
      { cause },
    );
  }
}

/** Rejects with `what` named if `promise` has not settled within `timeoutMs`. */
export async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms: ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface PollOptions {
  /** Give up after this long, in ms. */
  timeoutMs: number;
  /** Pause between attempts, in ms. Default 200. */
  intervalMs?: number;
  /** What is awaited, for the timeout message. */
  what: string;
}

/** Calls `probe` until it returns a value other than `undefined`; bounded by `timeoutMs`. */
export async function pollUntil<T>(probe: () => Promise<T | undefined>, options: PollOptions): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 200));
  }
}

/**
 * Names of the server's search attribute types (`temporal.api.enums.v1.IndexedValueType`), as
 * the CLI and contracts/search-attributes.ts spell them.
 */
export const INDEXED_VALUE_TYPE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(INDEXED_VALUE_TYPES).map(([kind, n]) => [n, kind]),
);

/** The namespace's custom search attributes as `{ name: kind }` (kinds spelled as the CLI spells them). */
export async function customSearchAttributes(
  client: Client,
  namespace = TEMPORAL_NAMESPACE,
): Promise<Record<string, string>> {
  return registeredSearchAttributes(client.connection, namespace);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A history's events as `fetchHistory` returns them (only the marker part is read here). */
interface MarkerEvents {
  events?:
    | {
        markerRecordedEventAttributes?: {
          details?: Record<string, { payloads?: { data?: Uint8Array | null }[] | null }> | null;
        } | null;
      }[]
    | null;
}

/** A history's events as `fetchHistory` returns them (the activity parts read by activityResults). */
interface ActivityEvents {
  events?:
    | {
        eventId?: unknown;
        activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null } | null;
        activityTaskCompletedEventAttributes?: {
          scheduledEventId?: unknown;
          result?: { payloads?: { data?: Uint8Array | null }[] | null } | null;
        } | null;
        markerRecordedEventAttributes?: {
          markerName?: string | null;
          details?: Record<string, { payloads?: { data?: Uint8Array | null }[] | null }> | null;
        } | null;
      }[]
    | null;
}

/** One completed activity of a history: its type, whether it ran as a local activity, its result as JSON text. */
export interface ActivityResult {
  type: string;
  local: boolean;
  result: string | undefined;
}

const payloadText = (
  p: { payloads?: { data?: Uint8Array | null }[] | null } | null | undefined,
): string | undefined => {
  const data = p?.payloads?.[0]?.data;
  return data === undefined || data === null ? undefined : Buffer.from(data).toString('utf8');
};

/**
 * The completed activities of a history, in order: activity tasks (ActivityTaskCompleted, named by
 * their scheduled event) and local activities (the SDK's `core_local_activity` markers, whose
 * `data` names the type and whose `result` is the value). A failed local activity's marker has no
 * result and is left out.
 */
export function activityResults(history: ActivityEvents): ActivityResult[] {
  const events = history.events ?? [];
  const scheduled = new Map<string, string>();
  const out: ActivityResult[] = [];
  for (const e of events) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(e.eventId), s.activityType?.name ?? '');
    const c = e.activityTaskCompletedEventAttributes;
    if (c)
      out.push({ type: scheduled.get(String(c.scheduledEventId)) ?? '', local: false, result: payloadText(c.result) });
    const m = e.markerRecordedEventAttributes;
    if (m?.markerName === 'core_local_activity') {
      const result = m.details?.['result'];
      const data = payloadText(m.details?.['data']);
      if (result === undefined || data === undefined) continue;
      const type = (JSON.parse(data) as { activity_type?: unknown }).activity_type;
      out.push({ type: typeof type === 'string' ? type : '', local: true, result: payloadText(result) });
    }
  }
  return out;
}

/** The patch IDs of a history's `patched()` markers, in the order they were recorded. */
export function patchIds(history: MarkerEvents): string[] {
  return (history.events ?? []).flatMap((ev) => {
    const data = ev.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data;
    if (data === undefined || data === null) return [];
    const decoded = JSON.parse(Buffer.from(data).toString('utf8')) as { id?: unknown } | string;
    const id = typeof decoded === 'string' ? decoded : decoded.id;
    return typeof id === 'string' ? [id] : [];
  });
}
