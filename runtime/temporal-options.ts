// The --temporal-* command-line options of the entry points (worker, API, egressctl's Temporal
// commands): TLS files, the server name and the API key, laid over the environment's settings
// (client/connection.ts temporalSettings) in one place. A flag wins over its variable; a bad
// combination is an OptionError naming the flags (exit 2 through orExit).
import type { ParseArgsConfig } from 'node:util';
import { TemporalSettingsError, TEMPORAL_TLS_SOURCES, temporalSettings, withTls } from '../client/connection.ts';
import type { TemporalSettings, TemporalTlsSettings } from '../client/connection.ts';
import { OptionError } from './options.ts';

/** The options to spread into an entry point's parseArgs `options` (no defaults: unset means "from the environment"). */
export const TEMPORAL_CONNECTION_OPTIONS = {
  'temporal-tls': { type: 'boolean' },
  'temporal-tls-cert': { type: 'string' },
  'temporal-tls-key': { type: 'string' },
  'temporal-tls-ca': { type: 'string' },
  'temporal-tls-server-name': { type: 'string' },
  'temporal-api-key': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** The options' lines for an entry point's --help. */
export const TEMPORAL_CONNECTION_HELP = `  --temporal-tls-cert FILE  client certificate (PEM) for mTLS to Temporal; needs --temporal-tls-key
                            (env TEMPORAL_TLS_CERT)
  --temporal-tls-key FILE   its private key (PEM) (env TEMPORAL_TLS_KEY)
  --temporal-tls-ca FILE    CA (PEM) that signed the Temporal frontend's certificate; default the
                            system's CAs (env TEMPORAL_TLS_CA)
  --temporal-tls-server-name NAME  name to verify the frontend's certificate against, instead of
                            TEMPORAL_ADDRESS's host (env TEMPORAL_TLS_SERVER_NAME)
  --temporal-tls            TLS with none of the above (a frontend whose certificate the system
                            trusts); implied by any --temporal-tls-* option (env TEMPORAL_TLS=true)
  --temporal-api-key KEY    API key (Temporal Cloud); implies TLS. Prefer env TEMPORAL_API_KEY:
                            a flag's value is visible to other users in the process list`;

/** What parseArgs gives for TEMPORAL_CONNECTION_OPTIONS (other options may sit beside them). */
export interface TemporalConnectionValues {
  'temporal-tls'?: boolean | undefined;
  'temporal-tls-cert'?: string | undefined;
  'temporal-tls-key'?: string | undefined;
  'temporal-tls-ca'?: string | undefined;
  'temporal-tls-server-name'?: string | undefined;
  'temporal-api-key'?: string | undefined;
}

/**
 * The connection settings: the environment's (TEMPORAL_ADDRESS, TEMPORAL_TLS_* …) with the
 * given --temporal-* flags laid over them. Throws OptionError (naming the flag and variable) for
 * an empty value or a certificate without its key; the files are read at connect time.
 */
export function temporalSettingsFromOptions(
  values: TemporalConnectionValues,
  env: NodeJS.ProcessEnv = process.env,
): TemporalSettings {
  try {
    const base = temporalSettings(env);
    const tls: TemporalTlsSettings = { ...base.tls };
    for (const k of Object.keys(TEMPORAL_TLS_SOURCES) as (keyof TemporalTlsSettings)[]) {
      const flag = TEMPORAL_TLS_SOURCES[k].flag;
      const v = values[flag];
      if (v === undefined) continue;
      if (v === '')
        throw new OptionError(`--${flag} must not be empty (omit it to use ${TEMPORAL_TLS_SOURCES[k].env})`);
      tls[k] = v;
    }
    const apiKey = values['temporal-api-key'];
    if (apiKey === '') throw new OptionError('--temporal-api-key must not be empty (omit it to use TEMPORAL_API_KEY)');
    return withTls(base, tls, values['temporal-tls'] === true || base.tls !== undefined, apiKey ?? base.apiKey);
  } catch (err) {
    if (err instanceof TemporalSettingsError) throw new OptionError(err.message, { cause: err });
    throw err;
  }
}
