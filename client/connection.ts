// Where Temporal is and how long a call to it may take: the one place for the connection settings
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE, the TLS files TEMPORAL_TLS_CERT,
// TEMPORAL_TLS_KEY, TEMPORAL_TLS_CA, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS and the API key
// TEMPORAL_API_KEY, with their defaults), read by the worker, the API, the CLI and the tests
// (runtime/temporal-options.ts lays the --temporal-* flags over them), turned into the SDK's
// connection options here, and the one deadline helper every client call of client/ runs under. This file loads no SDK code until a connection is made, so an entry point
// can print its --help (defaults included) without loading the Temporal client.
import { readFileSync } from 'node:fs';
import type { Client, ClientPlugin, Connection } from '@temporalio/client';
import { TASK_QUEUE } from '../contracts/task-queues.ts';
import { explainConnectFailure } from './connect-diagnosis.ts';
import { isTemporalUnavailable, TemporalUnavailableError } from './errors.ts';

/** The frontend address when TEMPORAL_ADDRESS is unset: scripts/temporal's dev server. */
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
/** The namespace when TEMPORAL_NAMESPACE is unset. */
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';
/** Deadline of one Temporal call when the caller names none, in ms. */
export const DEFAULT_CALL_TIMEOUT_MS = 10_000;

/** TLS to the frontend: PEM files (paths) and the name the server's certificate must carry. */
export interface TemporalTlsSettings {
  /** The client certificate (mTLS); needs `keyFile`. */
  certFile?: string;
  /** The client certificate's private key; needs `certFile`. */
  keyFile?: string;
  /** The CA that signed the server's certificate; the system's CAs when unset (Temporal Cloud). */
  caFile?: string;
  /** The name to verify the server's certificate against (and SNI), instead of the address's host. */
  serverName?: string;
}

export interface TemporalSettings {
  /** The frontend's `host:port`. */
  address: string;
  namespace: string;
  /** The task queue of the project's workflows and activities. */
  taskQueue: string;
  /** TLS to the frontend; plain TCP when absent (unless `apiKey` is set: then TLS with the system's CAs). */
  tls?: TemporalTlsSettings;
  /** API-key authentication (`Authorization: Bearer`), as Temporal Cloud uses. */
  apiKey?: string;
}

/** Bad connection settings; the message names the option (flag and variable) and the fix. */
export class TemporalSettingsError extends Error {
  override readonly name = 'TemporalSettingsError';
}

/** Each TLS setting's flag and environment variable, for messages and for runtime/temporal-options.ts. */
export const TEMPORAL_TLS_SOURCES = {
  certFile: { flag: 'temporal-tls-cert', env: 'TEMPORAL_TLS_CERT' },
  keyFile: { flag: 'temporal-tls-key', env: 'TEMPORAL_TLS_KEY' },
  caFile: { flag: 'temporal-tls-ca', env: 'TEMPORAL_TLS_CA' },
  serverName: { flag: 'temporal-tls-server-name', env: 'TEMPORAL_TLS_SERVER_NAME' },
} as const satisfies Record<keyof TemporalTlsSettings, { flag: string; env: string }>;

const source = (k: keyof TemporalTlsSettings): string =>
  `--${TEMPORAL_TLS_SOURCES[k].flag} / ${TEMPORAL_TLS_SOURCES[k].env}`;

/**
 * The settings from the environment (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,
 * `TEMPORAL_TASK_QUEUE`, `TEMPORAL_TLS_*`, `TEMPORAL_TLS`, `TEMPORAL_API_KEY`); `tls` and `apiKey`
 * only when set. Throws TemporalSettingsError for a certificate without its key or the reverse.
 */
export function temporalSettings(env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  const settings: TemporalSettings = {
    address: env['TEMPORAL_ADDRESS'] || DEFAULT_TEMPORAL_ADDRESS,
    namespace: env['TEMPORAL_NAMESPACE'] || DEFAULT_TEMPORAL_NAMESPACE,
    taskQueue: env['TEMPORAL_TASK_QUEUE'] || TASK_QUEUE,
  };
  const tls: TemporalTlsSettings = {};
  for (const k of Object.keys(TEMPORAL_TLS_SOURCES) as (keyof TemporalTlsSettings)[]) {
    const v = env[TEMPORAL_TLS_SOURCES[k].env];
    if (v) tls[k] = v;
  }
  const tlsOn = env['TEMPORAL_TLS'];
  if (tlsOn !== undefined && tlsOn !== '' && !/^(1|true|0|false)$/i.test(tlsOn)) {
    throw new TemporalSettingsError(`TEMPORAL_TLS must be true or false, got ${JSON.stringify(tlsOn)}`);
  }
  return withTls(settings, tls, /^(1|true)$/i.test(tlsOn ?? ''), env['TEMPORAL_API_KEY'] || undefined);
}

/**
 * `settings` with TLS (when `on` or any TLS setting is given) and the API key (when given), checked:
 * a client certificate needs its key and the reverse. Shared by the environment and the flags.
 */
export function withTls(
  settings: TemporalSettings,
  tls: TemporalTlsSettings,
  on: boolean,
  apiKey: string | undefined,
): TemporalSettings {
  const out: TemporalSettings = { ...settings };
  delete out.tls;
  delete out.apiKey;
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) {
    const [given, missing] = tls.certFile === undefined ? ['keyFile', 'certFile'] : ['certFile', 'keyFile'];
    throw new TemporalSettingsError(
      `${source(given as keyof TemporalTlsSettings)} is set but ${source(missing as keyof TemporalTlsSettings)} is not: a client certificate needs its private key (give both, or neither)`,
    );
  }
  if (on || Object.values(tls).some((v) => v !== undefined)) out.tls = { ...tls };
  if (apiKey !== undefined) out.apiKey = apiKey;
  return out;
}

/** The SDK's connection options (Connection and NativeConnection alike): address, TLS with the files read, API key. */
export interface SdkConnectionOptions {
  address: string;
  tls?: {
    serverNameOverride?: string;
    serverRootCACertificate?: Buffer;
    clientCertPair?: { crt: Buffer; key: Buffer };
  };
  apiKey?: string;
}

/** The SDK's options for `settings`, reading the PEM files now; a file that cannot be read is a TemporalSettingsError naming its option. */
export function sdkConnectionOptions(
  settings: Pick<TemporalSettings, 'address' | 'tls' | 'apiKey'>,
): SdkConnectionOptions {
  const options: SdkConnectionOptions = { address: settings.address };
  const t = settings.tls;
  if (t !== undefined) {
    const read = (k: keyof TemporalTlsSettings, path: string): Buffer => {
      try {
        return readFileSync(path);
      } catch (err) {
        throw new TemporalSettingsError(`cannot read ${source(k)} ${path}: ${(err as Error).message}`, { cause: err });
      }
    };
    options.tls = {};
    if (t.serverName !== undefined) options.tls.serverNameOverride = t.serverName;
    if (t.caFile !== undefined) options.tls.serverRootCACertificate = read('caFile', t.caFile);
    if (t.certFile !== undefined && t.keyFile !== undefined) {
      options.tls.clientCertPair = { crt: read('certFile', t.certFile), key: read('keyFile', t.keyFile) };
    }
  }
  if (settings.apiKey !== undefined) options.apiKey = settings.apiKey;
  return options;
}

export interface ConnectOptions {
  /** Bound of the connection attempt, in ms. */
  connectTimeoutMs: number;
  /** Connect at the first call, not now (a server that starts while Temporal is down). Default false. */
  lazy?: boolean;
  /** The client's plugins (the API's OpenTelemetry plugin: workflows it starts carry its trace context). */
  plugins?: ClientPlugin[];
}

/** A connection attempt failed; the message says why in an operator's words (client/connect-diagnosis.ts), the cause is the SDK's error. */
export class TemporalConnectError extends Error {
  override readonly name = 'TemporalConnectError';
}

/**
 * A client of `settings.namespace` at `settings.address` (with its TLS and API key); close it
 * with `client.connection.close()`. A failed attempt is a TemporalConnectError naming the cause.
 */
export async function connectClient(
  settings: Pick<TemporalSettings, 'address' | 'namespace' | 'tls' | 'apiKey'>,
  o: ConnectOptions,
): Promise<Client> {
  const { Client, Connection } = await import('@temporalio/client');
  const options = { ...sdkConnectionOptions(settings), connectTimeout: o.connectTimeoutMs };
  // Connection.connect would leave the channel of a failed attempt open (retrying): lazy, then
  // ensureConnected, so that a failed attempt is closed here.
  const connection = Connection.lazy(options);
  if (!o.lazy) {
    try {
      await connection.ensureConnected();
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw new TemporalConnectError(await explainConnectFailure(err, settings), { cause: err });
    }
  }
  return new Client({ connection, namespace: settings.namespace, ...(o.plugins ? { plugins: o.plugins } : {}) });
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
