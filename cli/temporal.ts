// The commands that talk to Temporal directly, not through the API (smoke, proxy up): one
// connection per command, from client/connection.ts's settings (TEMPORAL_ADDRESS, TEMPORAL_TLS_*,
// TEMPORAL_API_KEY) with the command's --temporal-* flags over them (runtime/temporal-options.ts),
// closed at the end. A Temporal that cannot be reached or does not answer (or refuses the TLS
// handshake, the error naming why) is exit 5, as an unreachable API is; bad TLS options exit 2.
import type { Client } from '@temporalio/client';
import { connectClient } from '../client/connection.ts';
import type { TemporalSettings } from '../client/connection.ts';
import { isTemporalUnavailable } from '../client/errors.ts';
import { OptionError } from '../runtime/options.ts';
import { temporalSettingsFromOptions } from '../runtime/temporal-options.ts';
import type { TemporalConnectionValues } from '../runtime/temporal-options.ts';
import { CliError, EXIT } from './http.ts';

/** The Temporal Web UI: $TEMPORAL_UI_URL, else the dev server's on $TEMPORAL_UI_PORT (default 8233). */
export function webUiUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env['TEMPORAL_UI_URL'] || `http://127.0.0.1:${env['TEMPORAL_UI_PORT'] || '8233'}`;
}

/**
 * Connects (bounded by `connectTimeoutMs`; `flags`: the command's --temporal-* values, if it takes
 * them), runs `fn` with the client, and closes the connection.
 */
export async function withTemporal<T>(
  connectTimeoutMs: number,
  fn: (client: Client, settings: TemporalSettings) => Promise<T>,
  flags: TemporalConnectionValues = {},
): Promise<T> {
  let settings: TemporalSettings;
  try {
    settings = temporalSettingsFromOptions(flags);
  } catch (err) {
    if (err instanceof OptionError) throw new CliError(EXIT.usage, err.message);
    throw err;
  }
  const hint = `(Temporal at ${settings.address}: is it running, with a worker? scripts/temporal up, or set TEMPORAL_ADDRESS)`;
  const unavailable = (err: unknown): CliError => new CliError(EXIT.unavailable, `${(err as Error).message} ${hint}`);
  let client: Client;
  try {
    client = await connectClient(settings, { connectTimeoutMs });
  } catch (err) {
    const message = (err as Error).message;
    // A TLS cause already names the option that fixes it; the "is it running" hint would mislead.
    throw new CliError(
      EXIT.unavailable,
      `cannot connect: ${message}${message.includes('--temporal-') ? '' : ` ${hint}`}`,
    );
  }
  try {
    return await fn(client, settings);
  } catch (err) {
    throw isTemporalUnavailable(err) ? unavailable(err) : err;
  } finally {
    await client.connection.close();
  }
}
