// The commands that talk to Temporal directly, not through the API (smoke, proxy up): one
// connection per command, from client/connection.ts's settings, closed at the end. A Temporal that
// cannot be reached or does not answer is exit 5, as an unreachable API is.
import type { Client } from '@temporalio/client';
import { connectClient, temporalSettings } from '../client/connection.ts';
import type { TemporalSettings } from '../client/connection.ts';
import { isTemporalUnavailable } from '../client/errors.ts';
import { CliError, EXIT } from './http.ts';

/** The Temporal Web UI: $TEMPORAL_UI_URL, else the dev server's on $TEMPORAL_UI_PORT (default 8233). */
export function webUiUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env['TEMPORAL_UI_URL'] || `http://127.0.0.1:${env['TEMPORAL_UI_PORT'] || '8233'}`;
}

/** Connects (bounded by `connectTimeoutMs`), runs `fn` with the client, and closes the connection. */
export async function withTemporal<T>(
  connectTimeoutMs: number,
  fn: (client: Client, settings: TemporalSettings) => Promise<T>,
): Promise<T> {
  const settings = temporalSettings();
  const hint = `(Temporal at ${settings.address}: is it running, with a worker? scripts/temporal up, or set TEMPORAL_ADDRESS)`;
  const unavailable = (err: unknown): CliError => new CliError(EXIT.unavailable, `${(err as Error).message} ${hint}`);
  let client: Client;
  try {
    client = await connectClient(settings, { connectTimeoutMs });
  } catch (err) {
    throw new CliError(EXIT.unavailable, `cannot connect: ${(err as Error).message} ${hint}`);
  }
  try {
    return await fn(client, settings);
  } catch (err) {
    throw isTemporalUnavailable(err) ? unavailable(err) : err;
  } finally {
    await client.connection.close();
  }
}
