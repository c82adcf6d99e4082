// The fleet page: a read-only web page served by the API at /fleet (docs/fleet-page.md). The page
// itself is public and holds no data: its script (api/fleet/app.js, plain JavaScript, no build
// step) asks for an API token once, keeps it in sessionStorage and calls the JSON routes with
// `Authorization: Bearer`, so the routes' own roles apply. Nothing is loaded from elsewhere, and a
// strict Content-Security-Policy forbids it: scripts, styles and requests from this origin only.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { readFileSync } from 'node:fs';

export interface FleetPageOptions {
  /** How often the page refreshes, in ms (default 5000; 1000-600000). */
  refreshMs?: number;
}

/** The page's Content-Security-Policy: nothing inline, nothing from another origin, no framing. */
export const FLEET_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const DEFAULT_REFRESH_MS = 5000;

function asset(name: string): string {
  return readFileSync(new URL(`./fleet/${name}`, import.meta.url), 'utf8');
}

/** The HTML: a skeleton the script fills; the refresh interval rides on a data attribute. */
export function fleetPageHtml(refreshMs: number): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Fleet - egress-proxies</title>
<link rel="stylesheet" href="/fleet/app.css">
<script src="/fleet/app.js" defer></script>
</head>
<body data-refresh-ms="${String(Math.trunc(refreshMs))}">
<header>
<h1>Fleet</h1>
<p id="status">Loading&hellip;</p>
<p id="announce" class="visually-hidden" role="status" aria-live="polite"></p>
</header>
<main id="main">
<noscript><p>The fleet page needs JavaScript: it reads the API with your token.</p></noscript>
</main>
</body>
</html>
`;
}

/** Registers GET /fleet (the page), /fleet/app.js and /fleet/app.css; none needs a token. */
export function registerFleetPage(app: FastifyInstance, options: FleetPageOptions = {}): void {
  const refreshMs = options.refreshMs ?? DEFAULT_REFRESH_MS;
  if (!Number.isInteger(refreshMs) || refreshMs < 1000 || refreshMs > 600_000) {
    throw new Error(`fleet page refreshMs must be an integer from 1000 to 600000 ms, not ${String(refreshMs)}`);
  }
  const html = fleetPageHtml(refreshMs);
  const script = asset('app.js');
  const style = asset('app.css');
  const secure = (reply: FastifyReply, type: string): FastifyReply =>
    reply
      .type(type)
      .header('content-security-policy', FLEET_PAGE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .header('cache-control', 'no-store');
  const config = { public: true };
  const schema = { hide: true };
  app.get('/fleet', { config, schema }, (_request, reply) => secure(reply, 'text/html; charset=utf-8').send(html));
  app.get('/fleet/app.js', { config, schema }, (_request, reply) =>
    secure(reply, 'text/javascript; charset=utf-8').send(script),
  );
  app.get('/fleet/app.css', { config, schema }, (_request, reply) =>
    secure(reply, 'text/css; charset=utf-8').send(style),
  );
}
