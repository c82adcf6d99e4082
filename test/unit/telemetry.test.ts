/** runtime/telemetry.ts: the OTLP settings read from the OpenTelemetry SDK's standard variables. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DEFAULT_SERVICE_NAME, otlpSettingsFromEnv } from '../../runtime/telemetry.ts';
import { OptionError } from '../../runtime/options.ts';

it('no endpoint and no exporter named: no OTLP export', () => {
  assert.deepEqual(otlpSettingsFromEnv({}), { url: undefined, serviceName: DEFAULT_SERVICE_NAME });
});

it('the base endpoint gets /v1/traces appended; the traces endpoint is used as given', () => {
  assert.equal(
    otlpSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).url,
    'http://127.0.0.1:4318/v1/traces',
  );
  assert.equal(
    otlpSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example:4318/prefix/' }).url,
    'https://otel.example:4318/prefix/v1/traces',
  );
  assert.equal(
    otlpSettingsFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9999/custom',
    }).url,
    'http://127.0.0.1:9999/custom',
  );
});

it('an explicit endpoint (an --otlp-endpoint option) wins over the variables', () => {
  const s = otlpSettingsFromEnv(
    { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9999/custom' },
    { endpoint: 'http://10.0.0.1:4318' },
  );
  assert.equal(s.url, 'http://10.0.0.1:4318/v1/traces');
});

it('OTEL_TRACES_EXPORTER=otlp alone uses the default endpoint; none and OTEL_SDK_DISABLED switch it off', () => {
  assert.equal(otlpSettingsFromEnv({ OTEL_TRACES_EXPORTER: 'otlp' }).url, 'http://localhost:4318/v1/traces');
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
  assert.equal(otlpSettingsFromEnv({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }).url, undefined);
  assert.equal(otlpSettingsFromEnv({ ...endpoint, OTEL_SDK_DISABLED: 'true' }).url, undefined);
});

it('OTEL_SERVICE_NAME names the service; else the caller default, else the worker', () => {
  assert.equal(otlpSettingsFromEnv({ OTEL_SERVICE_NAME: 'edge-worker' }).serviceName, 'edge-worker');
  assert.equal(otlpSettingsFromEnv({}, { serviceName: 'egress-proxies-api' }).serviceName, 'egress-proxies-api');
  assert.equal(
    otlpSettingsFromEnv({ OTEL_SERVICE_NAME: 'edge' }, { serviceName: 'egress-proxies-api' }).serviceName,
    'edge',
  );
});

it('unusable values are refused naming the variable and the fix', () => {
  const refused = (env: Record<string, string>, re: RegExp): void => {
    assert.throws(
      () => otlpSettingsFromEnv(env),
      (err: unknown) => err instanceof OptionError && re.test(err.message),
    );
  };
  refused(
    { OTEL_EXPORTER_OTLP_ENDPOINT: '127.0.0.1:4318' },
    /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/,
  );
  refused({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://x:4317' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be/);
  refused({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf .*4318/);
  refused({ OTEL_TRACES_EXPORTER: 'jaeger' }, /^OTEL_TRACES_EXPORTER must be otlp or none/);
  assert.throws(() => otlpSettingsFromEnv({}, { endpoint: 'nope' }), /^OptionError: --otlp-endpoint must be/);
  // The traces-specific protocol wins over the general one.
  assert.equal(
    otlpSettingsFromEnv({
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
    }).url,
    'http://127.0.0.1:4318/v1/traces',
  );
});
