// The OTLP export settings from the OpenTelemetry SDK's standard variables, apart from the SDK
// itself (runtime/telemetry.ts), so that a process that traces only when an endpoint is configured
// (the API) can ask without loading the SDK (a few hundred ms of start-up).
import { OptionError } from './options.ts';

/** The service name when OTEL_SERVICE_NAME is not set (the worker's). */
export const DEFAULT_SERVICE_NAME = 'egress-proxies-worker';

/** Where and how spans are exported over OTLP; `undefined` url: no OTLP export. */
export interface OtlpSettings {
  /** The traces URL spans are POSTed to (…/v1/traces), or undefined when OTLP export is off. */
  url: string | undefined;
  /** The resource's service.name. */
  serviceName: string;
}

/** Environment variables, as process.env holds them. */
export type Env = Record<string, string | undefined>;

function checkedUrl(name: string, text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OptionError(
      `${name} must be an http:// or https:// URL (e.g. http://127.0.0.1:4318), got ${JSON.stringify(text)}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OptionError(
      `${name} must be an http:// or https:// URL (e.g. http://127.0.0.1:4318), got ${JSON.stringify(text)}`,
    );
  }
  return url;
}

/**
 * The OTLP settings from the OpenTelemetry SDK's standard variables (and an explicit base endpoint,
 * e.g. a command-line option, which wins over them). Throws OptionError naming the variable for a
 * value this build cannot use.
 */
export function otlpSettingsFromEnv(
  env: Env = process.env,
  o: { endpoint?: string | undefined; serviceName?: string } = {},
): OtlpSettings {
  const serviceName = env['OTEL_SERVICE_NAME']?.trim() || o.serviceName || DEFAULT_SERVICE_NAME;
  const exporters = (env['OTEL_TRACES_EXPORTER'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const e of exporters) {
    if (e !== 'otlp' && e !== 'none') {
      throw new OptionError(
        `OTEL_TRACES_EXPORTER must be otlp or none (spans always reach the debug log), got ${JSON.stringify(e)}`,
      );
    }
  }
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const p = env[name]?.trim();
    if (p && p !== 'http/protobuf') {
      throw new OptionError(
        `${name} must be http/protobuf (this build exports OTLP over HTTP; point the endpoint at the receiver's OTLP/HTTP port, 4318 by default), got ${JSON.stringify(p)}`,
      );
    }
    if (p) break; // the traces-specific variable wins over the general one
  }
  const disabled = env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true' || exporters.includes('none');
  const traces = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim();
  const base = env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim();
  let url: string | undefined;
  if (o.endpoint?.trim()) {
    url = tracesUrl(checkedUrl('--otlp-endpoint', o.endpoint.trim()));
  } else if (traces) {
    url = checkedUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces).href; // used as given (the spec's rule)
  } else if (base) {
    url = tracesUrl(checkedUrl('OTEL_EXPORTER_OTLP_ENDPOINT', base));
  } else if (exporters.includes('otlp')) {
    url = 'http://localhost:4318/v1/traces'; // the spec's default endpoint
  }
  return { url: disabled ? undefined : url, serviceName };
}

/** A base endpoint's traces URL: its path with /v1/traces appended (the spec's rule for the base variable). */
function tracesUrl(base: URL): string {
  const u = new URL(base.href);
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/v1/traces`;
  return u.href;
}
