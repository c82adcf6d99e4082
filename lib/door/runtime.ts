/**
 * HAProxy's runtime API on a door's unix socket (`stats socket ... level admin`): one command per
 * connection, the answer read until HAProxy closes it. The door's exits change through it with no
 * reload, so open tunnels stay open:
 *
 *  - add: `add server exits/<name> <host>:<port> <options>`, then `enable health` and `enable
 *    server` (a dynamic server starts in maintenance);
 *  - remove: `set server ... state maint` (no new requests; open tunnels go on), then `del server`
 *    once HAProxy reports no connection on it (it refuses before that);
 *  - move: `set server ... addr <host> port <port>`.
 */
import net from 'node:net';
import { ProjectError } from '../errors.ts';
import type { ErrorKind } from '../errors.ts';
import { DOOR_BACKEND } from './haproxy.ts';

/** A runtime API command failed: the socket refused, the answer timed out, or HAProxy said no. */
export class DoorRuntimeError extends ProjectError {
  readonly code = 'DOOR_RUNTIME_FAILED';
  readonly kind: ErrorKind = 'Transient';
}

/** One server of the door's backend as `show servers state` reports it. */
export interface DoorServerState {
  name: string;
  host: string;
  port: number;
  /** HAProxy's operational state: 0 stopped, 1 starting, 2 running, 3 stopping. */
  opState: number;
  /** Admin flags: bit 0x01 or 0x20 set means maintenance (forced or inherited). */
  adminState: number;
}

/** One command on the runtime socket; resolves HAProxy's answer (text, possibly empty). */
export function runtimeCommand(socketPath: string, command: string, timeoutMs = 5_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(socketPath);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new DoorRuntimeError(`runtime API ${socketPath}: no answer to "${command}" within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on('connect', () => sock.end(`${command}\n`));
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(
        new DoorRuntimeError(`runtime API ${socketPath}: ${err.message} (is the door's HAProxy running?)`, {
          cause: err,
        }),
      );
    });
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

/** Parses `show servers state <backend>` (version 1: a header line of column names). */
export function parseServersState(text: string): DoorServerState[] {
  const lines = text.split('\n');
  const header = lines.find((l) => l.startsWith('# be_id'));
  if (header === undefined) return [];
  const cols = header.slice(2).trim().split(/\s+/);
  const at = (name: string): number => cols.indexOf(name);
  const [iName, iAddr, iPort, iOp, iAdmin] = [
    'srv_name',
    'srv_addr',
    'srv_port',
    'srv_op_state',
    'srv_admin_state',
  ].map(at) as [number, number, number, number, number];
  const out: DoorServerState[] = [];
  for (const line of lines) {
    if (line === '' || line.startsWith('#') || /^\d+$/.test(line.trim())) continue;
    const f = line.trim().split(/\s+/);
    if (f.length < cols.length) continue;
    out.push({
      name: f[iName]!,
      host: f[iAddr]!,
      port: Number(f[iPort]),
      opState: Number(f[iOp]),
      adminState: Number(f[iAdmin]),
    });
  }
  return out;
}

/** Connections HAProxy made to one exit: `connect` and `reuse` of `show stat`. */
export interface DoorServerConnections {
  /** New connections opened to the exit. */
  connects: number;
  /** Requests sent over a connection kept open from an earlier one. */
  reuses: number;
}

/** Per exit of the door's backend, from `show stat` (CSV with a `# pxname,svname,...` header). */
export function parseStatConnections(text: string): Map<string, DoorServerConnections> {
  const lines = text.split('\n');
  const cols = (lines.find((l) => l.startsWith('# pxname')) ?? '').slice(2).split(',');
  const [iPx, iSv, iConnect, iReuse] = ['pxname', 'svname', 'connect', 'reuse'].map((c) => cols.indexOf(c)) as [
    number,
    number,
    number,
    number,
  ];
  const out = new Map<string, DoorServerConnections>();
  if (iConnect < 0 || iReuse < 0) return out;
  for (const line of lines) {
    const f = line.split(',');
    if (f[iPx] !== DOOR_BACKEND || f[iSv] === 'BACKEND' || f.length < cols.length) continue;
    out.set(f[iSv]!, { connects: Number(f[iConnect]) || 0, reuses: Number(f[iReuse]) || 0 });
  }
  return out;
}

/** Whether a server's admin state is maintenance (forced or inherited). */
export function inMaintenance(s: DoorServerState): boolean {
  return (s.adminState & 0x21) !== 0;
}

/** The door's exits through its runtime socket. */
export class DoorRuntime {
  readonly socketPath: string;
  readonly timeoutMs: number;
  constructor(socketPath: string, timeoutMs = 5_000) {
    this.socketPath = socketPath;
    this.timeoutMs = timeoutMs;
  }

  /** Runs one command; HAProxy's refusals (e.g. "No such server") become a {@link DoorRuntimeError}. */
  async run(command: string): Promise<string> {
    const out = await runtimeCommand(this.socketPath, command, this.timeoutMs);
    const first = out.split('\n').find((l) => l.trim() !== '') ?? '';
    if (/^(No such|Unknown|Require|Server still|'.*' (is|cannot)|Invalid|Not |.*\berror\b)/i.test(first)) {
      throw new DoorRuntimeError(`runtime API "${command}": ${out.trim().slice(0, 300)}`);
    }
    return out;
  }

  /** Connections opened and reused per exit since HAProxy started. */
  async connections(): Promise<Map<string, DoorServerConnections>> {
    return parseStatConnections(await this.run('show stat'));
  }

  async servers(): Promise<DoorServerState[]> {
    return parseServersState(await this.run(`show servers state ${DOOR_BACKEND}`));
  }

  /** Adds an exit (servers start in maintenance: health checks and traffic are then enabled). */
  async add(name: string, host: string, port: number, options: string): Promise<void> {
    await this.run(`add server ${DOOR_BACKEND}/${name} ${host}:${port} ${options}`);
    if (/\bcheck\b/.test(options)) await this.run(`enable health ${DOOR_BACKEND}/${name}`);
    await this.run(`enable server ${DOOR_BACKEND}/${name}`);
  }

  /** No new requests to the exit; its open connections go on. */
  async drain(name: string): Promise<void> {
    await this.run(`set server ${DOOR_BACKEND}/${name} state maint`);
  }

  /** Takes a drained exit out; false while it still has connections (HAProxy refuses then). */
  async remove(name: string): Promise<boolean> {
    const out = await runtimeCommand(this.socketPath, `del server ${DOOR_BACKEND}/${name}`, this.timeoutMs);
    if (/Server deleted/.test(out)) return true;
    if (/still has connections|has connections attached|only servers in maintenance/i.test(out)) return false;
    throw new DoorRuntimeError(`runtime API "del server ${DOOR_BACKEND}/${name}": ${out.trim().slice(0, 300)}`);
  }

  async move(name: string, host: string, port: number): Promise<void> {
    await this.run(`set server ${DOOR_BACKEND}/${name} addr ${host} port ${port}`);
  }

  /** A drained exit serves again. */
  async ready(name: string): Promise<void> {
    await this.run(`set server ${DOOR_BACKEND}/${name} state ready`);
  }
}
