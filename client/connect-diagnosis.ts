// Why a connection to Temporal failed, in words an operator acts on. The SDK's client reports a
// failed TLS handshake only as "Failed to connect before the deadline", so after a failure this
// makes one TLS handshake of its own (node:tls, the same files and server name, bounded) and names
// what it learns: no client certificate, a client certificate the server does not trust, a server
// certificate this client does not trust or not valid for the name, TLS spoken to a plain server,
// or a plain client at a TLS server.
import { readFileSync } from 'node:fs';
import { connect as tlsConnect } from 'node:tls';
import type { TemporalSettings } from './connection.ts';

type Settings = Pick<TemporalSettings, 'address' | 'tls' | 'apiKey'>;

/** What the probe says of a server that completed a TLS handshake with a client that verified nothing. */
const SPEAKS_TLS = 'the server speaks TLS';
/** Bound of the probe's handshake, and how long it waits after it for the server's alert (TLS 1.3 sends it late). */
const PROBE_TIMEOUT_MS = 3_000;
const ALERT_WAIT_MS = 700;

/** `err` explained (explainConnectError), with what a TLS handshake of its own learnt about the server. */
export async function explainConnectFailure(err: unknown, settings: Settings): Promise<string> {
  let probe: string | undefined;
  try {
    probe = await probeTls(settings);
  } catch {
    probe = undefined;
  }
  return explainConnectError(err, settings, probe);
}

/**
 * One TLS handshake to `settings.address` as the client would make it (or, for a plain client,
 * one that verifies nothing, to learn whether the server wants TLS): the error's code and message,
 * SPEAKS_TLS, 'ok', or undefined when the address cannot be parsed or reached.
 */
export function probeTls(settings: Settings): Promise<string | undefined> {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(settings.address);
  if (!m) return Promise.resolve(undefined);
  const [host, port] = [m[1]!, Number(m[2])];
  const t = settings.tls;
  const plain = t === undefined && settings.apiKey === undefined;
  const read = (path: string | undefined): Buffer | undefined => (path === undefined ? undefined : readFileSync(path));
  const servername = t?.serverName ?? (/^[\d.:]+$/.test(host) ? undefined : host);
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host,
      port,
      ...(servername === undefined ? {} : { servername }),
      ALPNProtocols: ['h2'],
      rejectUnauthorized: !plain,
      ca: read(t?.caFile),
      cert: read(t?.certFile),
      key: read(t?.keyFile),
    });
    let settled = false;
    const done = (v: string | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(undefined), PROBE_TIMEOUT_MS);
    socket.on('error', (e: NodeJS.ErrnoException) => done(`${e.code ?? ''} ${e.message}`));
    socket.on('secureConnect', () => {
      if (plain) return done(SPEAKS_TLS);
      // TLS 1.3: the server checks the client's certificate after the client's Finished and
      // answers a bad one with an alert that arrives as an error shortly after.
      setTimeout(() => done('ok'), ALERT_WAIT_MS);
    });
    socket.on('data', () => undefined);
  });
}

/**
 * What a failed connection attempt means, in words an operator acts on: the TLS cause (no client
 * certificate, a certificate the server does not trust, a server certificate this client does not
 * trust, TLS spoken to a plain server or the reverse, a wrong API key) before the SDK's message.
 */
export function explainConnectError(err: unknown, settings: Settings, probe?: string): string {
  const text = causeText(err) + (probe === undefined ? '' : ` | ${probe}`);
  const at = `Temporal at ${settings.address}`;
  const tls = settings.tls !== undefined || settings.apiKey !== undefined;
  const rules: [RegExp, string][] = [
    [
      /certificate required|alert number 116/i,
      `${at} requires a client certificate (mTLS): set --temporal-tls-cert and --temporal-tls-key (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY)`,
    ],
    [
      /bad certificate|unknown ca|alert number 4[28]|certificate unknown|alert number 46/i,
      `${at} refused this client's certificate (not signed by a CA the server trusts, or expired): check --temporal-tls-cert / TEMPORAL_TLS_CERT`,
    ],
    [
      /self[- ]signed|unable to (get local issuer|verify)|certificate verify failed|UnknownIssuer/i,
      `the certificate of ${at} is not signed by a trusted CA: set --temporal-tls-ca / TEMPORAL_TLS_CA to the CA that signed it`,
    ],
    [
      /altnames|hostname|NotValidForName|does not match|ERR_TLS_CERT_ALTNAME/i,
      `the certificate of ${at} is not valid for that name: set --temporal-tls-server-name / TEMPORAL_TLS_SERVER_NAME to a name it carries`,
    ],
    [
      /wrong version number|packet length too long|InvalidContentType|CorruptMessage|http\/1\.x server/i,
      tls
        ? `${at} does not speak TLS: unset the --temporal-tls-* options (or connect to its TLS port)`
        : `${at} answered with something other than plain gRPC`,
    ],
    [
      /unauthenticated|invalid api key|\b16 UNAUTH/i,
      `${at} did not accept the credentials: check --temporal-api-key / TEMPORAL_API_KEY`,
    ],
  ];
  if (!tls && probe === SPEAKS_TLS) {
    return `${at} requires TLS: set --temporal-tls-ca (TEMPORAL_TLS_CA; for mTLS also --temporal-tls-cert and --temporal-tls-key) (${firstLine(err)})`;
  }
  for (const [pattern, meaning] of rules) if (pattern.test(text)) return `${meaning} (${firstLine(err)})`;
  if (!tls && /Connection dropped|ECONNRESET|socket hang up|Premature close|Stream removed/i.test(text)) {
    return `${at} closed the connection: does it require TLS? set --temporal-tls-ca (and for mTLS --temporal-tls-cert, --temporal-tls-key) (${firstLine(err)})`;
  }
  return firstLine(err);
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
}

/** The messages of `err` and its causes, joined (the TLS reason is often only in a cause). */
function causeText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    const o = e as { message?: unknown; details?: unknown; cause?: unknown };
    if (typeof o.message === 'string') parts.push(o.message);
    else if (typeof e === 'string') parts.push(e);
    if (typeof o.details === 'string') parts.push(o.details);
    e = o.cause;
  }
  return parts.join(' | ');
}
