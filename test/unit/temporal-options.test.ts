/**
 * TLS and API-key settings to Temporal: the environment (client/connection.ts temporalSettings),
 * the --temporal-* flags laid over it (runtime/temporal-options.ts), the SDK options they become
 * (PEM files read, errors naming the option), and the words a failed connection attempt is
 * explained in. The real handshakes are test/integration/temporal-cluster-tls.test.ts's.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { describe, it } from 'node:test';
import { explainConnectError } from '../../client/connect-diagnosis.ts';
import { sdkConnectionOptions, TemporalSettingsError, temporalSettings } from '../../client/connection.ts';
import { CliError, EXIT } from '../../cli/http.ts';
import { withTemporal } from '../../cli/temporal.ts';
import { OptionError } from '../../runtime/options.ts';
import { TEMPORAL_CONNECTION_OPTIONS, temporalSettingsFromOptions } from '../../runtime/temporal-options.ts';

const parse = (args: string[]) => parseArgs({ args, options: TEMPORAL_CONNECTION_OPTIONS, strict: true }).values;

describe('temporalSettings: TLS and API key from the environment', () => {
  it('no TLS variables: no tls and no apiKey keys at all', () => {
    const s = temporalSettings({ TEMPORAL_ADDRESS: 'a:1' });
    assert.equal('tls' in s, false);
    assert.equal('apiKey' in s, false);
  });
  it('reads the four TLS variables and the API key', () => {
    const s = temporalSettings({
      TEMPORAL_TLS_CERT: '/c.pem',
      TEMPORAL_TLS_KEY: '/c.key',
      TEMPORAL_TLS_CA: '/ca.pem',
      TEMPORAL_TLS_SERVER_NAME: 'frontend',
      TEMPORAL_API_KEY: 'k',
    });
    assert.deepEqual(s.tls, { certFile: '/c.pem', keyFile: '/c.key', caFile: '/ca.pem', serverName: 'frontend' });
    assert.equal(s.apiKey, 'k');
  });
  it('TEMPORAL_TLS=true alone turns TLS on with no files; a bad value names the variable', () => {
    assert.deepEqual(temporalSettings({ TEMPORAL_TLS: 'true' }).tls, {});
    assert.equal(temporalSettings({ TEMPORAL_TLS: 'false' }).tls, undefined);
    assert.throws(() => temporalSettings({ TEMPORAL_TLS: 'yes' }), /TEMPORAL_TLS must be true or false/);
  });
  it('a certificate without its key (or the reverse) names both options', () => {
    assert.throws(
      () => temporalSettings({ TEMPORAL_TLS_CERT: '/c.pem' }),
      (err: Error) =>
        err instanceof TemporalSettingsError &&
        /--temporal-tls-cert \/ TEMPORAL_TLS_CERT is set but --temporal-tls-key \/ TEMPORAL_TLS_KEY is not/.test(
          err.message,
        ),
    );
    assert.throws(
      () => temporalSettings({ TEMPORAL_TLS_KEY: '/c.key' }),
      /TEMPORAL_TLS_KEY is set but .*TEMPORAL_TLS_CERT/,
    );
  });
});

describe('temporalSettingsFromOptions: the --temporal-* flags', () => {
  it('no flags: exactly the environment settings', () => {
    const env = { TEMPORAL_ADDRESS: 'x:7', TEMPORAL_TLS_CA: '/ca.pem' };
    assert.deepEqual(temporalSettingsFromOptions(parse([]), env), temporalSettings(env));
  });
  it('flags win over variables, one by one', () => {
    const env = { TEMPORAL_TLS_CERT: '/env.pem', TEMPORAL_TLS_KEY: '/env.key', TEMPORAL_API_KEY: 'env-key' };
    const s = temporalSettingsFromOptions(
      parse(['--temporal-tls-cert', '/f.pem', '--temporal-api-key', 'flag-key']),
      env,
    );
    assert.deepEqual(s.tls, { certFile: '/f.pem', keyFile: '/env.key' });
    assert.equal(s.apiKey, 'flag-key');
  });
  it('every TLS flag lands in its field; --temporal-tls alone turns TLS on', () => {
    const s = temporalSettingsFromOptions(
      parse([
        '--temporal-tls-cert=/c',
        '--temporal-tls-key=/k',
        '--temporal-tls-ca=/ca',
        '--temporal-tls-server-name=n',
      ]),
      {},
    );
    assert.deepEqual(s.tls, { certFile: '/c', keyFile: '/k', caFile: '/ca', serverName: 'n' });
    assert.deepEqual(temporalSettingsFromOptions(parse(['--temporal-tls']), {}).tls, {});
  });
  it('a certificate flag without a key is an OptionError naming both flags', () => {
    assert.throws(
      () => temporalSettingsFromOptions(parse(['--temporal-tls-cert', '/c.pem']), {}),
      (err: Error) => err instanceof OptionError && /--temporal-tls-cert .* but --temporal-tls-key/.test(err.message),
    );
  });
  it('an empty value is an OptionError naming the flag', () => {
    assert.throws(
      () => temporalSettingsFromOptions(parse(['--temporal-tls-ca=']), {}),
      /--temporal-tls-ca must not be empty/,
    );
    assert.throws(
      () => temporalSettingsFromOptions(parse(['--temporal-api-key=']), {}),
      /--temporal-api-key must not be empty/,
    );
  });
  it('a bad environment is an OptionError too (exit 2, not a stack trace)', () => {
    assert.throws(() => temporalSettingsFromOptions(parse([]), { TEMPORAL_TLS: 'maybe' }), OptionError);
  });
});

describe('sdkConnectionOptions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ep-tls-'));
  for (const f of ['c.pem', 'c.key', 'ca.pem']) writeFileSync(join(dir, f), `PEM ${f}`);
  it('plain: the address only', () => {
    assert.deepEqual(sdkConnectionOptions({ address: 'a:1' }), { address: 'a:1' });
  });
  it('reads the files into the SDK fields', () => {
    const o = sdkConnectionOptions({
      address: 'a:1',
      tls: { certFile: join(dir, 'c.pem'), keyFile: join(dir, 'c.key'), caFile: join(dir, 'ca.pem'), serverName: 'n' },
      apiKey: 'k',
    });
    assert.equal(o.tls?.serverNameOverride, 'n');
    assert.equal(o.tls?.serverRootCACertificate?.toString(), 'PEM ca.pem');
    assert.equal(o.tls?.clientCertPair?.crt.toString(), 'PEM c.pem');
    assert.equal(o.tls?.clientCertPair?.key.toString(), 'PEM c.key');
    assert.equal(o.apiKey, 'k');
  });
  it('TLS with no files is an empty TLS config (the system CAs)', () => {
    assert.deepEqual(sdkConnectionOptions({ address: 'a:1', tls: {} }), { address: 'a:1', tls: {} });
  });
  it('a file that cannot be read names its option and path', () => {
    const missing = join(dir, 'nope.pem');
    assert.throws(
      () => sdkConnectionOptions({ address: 'a:1', tls: { caFile: missing } }),
      (err: Error) =>
        err instanceof TemporalSettingsError && err.message.includes(`--temporal-tls-ca / TEMPORAL_TLS_CA ${missing}`),
    );
  });
});

describe('explainConnectError', () => {
  const tls = { address: '127.0.0.1:7333', tls: { caFile: '/ca.pem' } };
  const plain = { address: '127.0.0.1:7333' };
  const cases: [string, typeof tls | typeof plain, RegExp][] = [
    [
      'tls handshake: alert certificate required (alert number 116)',
      tls,
      /requires a client certificate .*--temporal-tls-cert/,
    ],
    ['ssl/tls alert bad certificate', tls, /refused this client's certificate/],
    ['tlsv1 alert unknown ca', tls, /refused this client's certificate/],
    ['invalid peer certificate: UnknownIssuer', tls, /not signed by a trusted CA: set --temporal-tls-ca/],
    ['self-signed certificate in certificate chain', tls, /not signed by a trusted CA/],
    ['invalid peer certificate: NotValidForName', tls, /not valid for that name: set --temporal-tls-server-name/],
    ['received corrupt message of type InvalidContentType', tls, /does not speak TLS/],
    ['16 UNAUTHENTICATED: invalid API key', tls, /did not accept the credentials: check --temporal-api-key/],
    ['Connection dropped', plain, /closed the connection: does it require TLS/],
  ];
  for (const [message, settings, want] of cases) {
    it(`${message} → ${want.source}`, () => {
      const got = explainConnectError(new Error('Failed to connect', { cause: new Error(message) }), settings);
      assert.match(got, want);
      assert.ok(got.includes('Failed to connect'), 'the SDK message is kept');
    });
  }
  it('an error it does not recognise is passed through unchanged', () => {
    assert.equal(explainConnectError(new Error('something else\nline 2'), plain), 'something else');
  });
});

describe('egressctl withTemporal (cli/temporal.ts): bad TLS options', () => {
  it('a certificate flag without its key is a usage error (exit 2) before any connection', async () => {
    let called = false;
    await assert.rejects(
      withTemporal(
        1_000,
        () => {
          called = true;
          return Promise.resolve();
        },
        { 'temporal-tls-cert': '/c.pem' },
      ),
      (err: Error) => err instanceof CliError && err.code === EXIT.usage && /--temporal-tls-key/.test(err.message),
    );
    assert.equal(called, false);
  });
});
