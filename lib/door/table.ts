/**
 * The door's per-credential counters, kept by HAProxy in stick tables keyed by the credential
 * (the base user name, without any `-session-` suffix), and a pure parser of the runtime API's
 * `show table <name>` output so a service can export them (e.g. as Prometheus counters). Pure.
 *
 *  - {@link DOOR_CREDENTIAL_TABLE}: every authenticated request: `http_req_cnt`,
 *    `http_req_rate(1000)` (the `requestsPerSecond` limit), `bytes_in_cnt` (client to door:
 *    request and upload bytes) and `bytes_out_cnt` (door to client: response and download bytes).
 *  - {@link DOOR_TUNNEL_TABLE}: CONNECT requests only: `conn_cur` (tunnels open now, the
 *    `concurrentTunnels` limit) and `conn_cnt` (tunnels asked for).
 *
 * Entries are forgotten after a day without use (HAProxy's `expire`), and on every restart of
 * HAProxy: a counter that goes down has been reset (Prometheus' `rate()` takes that).
 */

/** Per-credential requests and bytes (`show table door_creds`). */
export const DOOR_CREDENTIAL_TABLE = 'door_creds';
/** Per-credential CONNECT tunnels (`show table door_tunnels`). */
export const DOOR_TUNNEL_TABLE = 'door_tunnels';
/** Sessions with a lifetime: when each one's first request came (`gpt0`, Unix seconds). */
export const DOOR_SESSION_TABLE = 'door_sessions';
/** Sessions without a lifetime: when their current run of requests began (`gpt0`); expire when idle. */
export const DOOR_IDLE_TABLE = 'door_idle';

/** One credential's counters; a field is 0 when its table has no entry for the credential. */
export interface DoorCredentialCounters {
  /** Authenticated requests, refused ones included (CONNECTs count once each). */
  requests: number;
  /** Requests in the last second (HAProxy's sliding `http_req_rate(1s)`). */
  requestRate: number;
  /** Bytes received from the client (request heads, bodies, tunnel upload). */
  bytesIn: number;
  /** Bytes sent to the client (response heads, bodies, tunnel download). */
  bytesOut: number;
  /** CONNECT tunnels open now (those being refused for the limit included, for a moment). */
  tunnelsOpen: number;
  /** CONNECT requests. */
  tunnels: number;
}

const HEADER_RE = /^# table: ([^,\s]+),/;
const ENTRY_RE = /^0x[0-9a-f]+: key=(\S+) (.*)$/;
const FIELD_RE = /([a-z_]+)(?:\(\d+\))?=(\d+)/g;

/**
 * Per-credential counters from the text of one or more `show table` answers (of
 * {@link DOOR_CREDENTIAL_TABLE} and {@link DOOR_TUNNEL_TABLE}, in any order, concatenated).
 * Entries of other tables and lines that are not entries are ignored; a key is a credential.
 */
export function parseDoorCredentialTable(text: string): Map<string, DoorCredentialCounters> {
  const out = new Map<string, DoorCredentialCounters>();
  let table: string | undefined;
  for (const line of text.split('\n')) {
    const head = HEADER_RE.exec(line);
    if (head) {
      table = head[1];
      continue;
    }
    const entry = ENTRY_RE.exec(line.trim());
    if (!entry || (table !== DOOR_CREDENTIAL_TABLE && table !== DOOR_TUNNEL_TABLE)) continue;
    const key = entry[1]!;
    const c = out.get(key) ?? { requests: 0, requestRate: 0, bytesIn: 0, bytesOut: 0, tunnelsOpen: 0, tunnels: 0 };
    for (const [, name, value] of (entry[2] ?? '').matchAll(FIELD_RE)) {
      const n = Number(value);
      if (table === DOOR_CREDENTIAL_TABLE) {
        if (name === 'http_req_cnt') c.requests = n;
        else if (name === 'http_req_rate') c.requestRate = n;
        else if (name === 'bytes_in_cnt') c.bytesIn = n;
        else if (name === 'bytes_out_cnt') c.bytesOut = n;
      } else if (name === 'conn_cur') c.tunnelsOpen = n;
      else if (name === 'conn_cnt') c.tunnels = n;
    }
    out.set(key, c);
  }
  return out;
}
