// The last step of `scripts/temporal cluster up`: registers the project's search attributes on
// the cluster's namespace (client/search-attributes.ts, as the worker does at start-up),
// connecting as every client does (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_*). A
// namespace just created may not be usable for a few seconds (the server's namespace cache), so
// this retries for up to 60 s. Prints what it registered; exit 1 with the reason otherwise.
import { connectClient, temporalSettings } from '../../client/connection.ts';
import { ensureSearchAttributes, SearchAttributeKindError } from '../../client/search-attributes.ts';

const BOUND_MS = 60_000;
const settings = temporalSettings();
const client = await connectClient(settings, { connectTimeoutMs: 10_000 });
const deadline = Date.now() + BOUND_MS;
let code = 1;
try {
  for (let attempt = 1; ; attempt++) {
    try {
      const added = await ensureSearchAttributes(client.connection, settings.namespace);
      const what = added.length > 0 ? `registered ${added.join(', ')}` : 'all present';
      process.stderr.write(`temporal cluster: search attributes on ${settings.namespace}: ${what}\n`);
      code = 0;
      break;
    } catch (err) {
      if (err instanceof SearchAttributeKindError || Date.now() >= deadline) {
        process.stderr.write(`temporal cluster: search attributes (attempt ${attempt}): ${(err as Error).message}\n`);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
} finally {
  await client.connection.close();
}
process.exit(code);
