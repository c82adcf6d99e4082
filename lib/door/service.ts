/**
 * One pool's door, kept current: runs HAProxy on the rendered configuration (lib/door/haproxy.ts)
 * and, every `syncIntervalMs`, reads the pool's serving exits from `members()` and applies the
 * difference through the runtime API (lib/door/runtime.ts): a new exit is added, a moved one gets
 * its new address, a gone one is drained (no new requests, open tunnels go on) and deleted once its
 * last connection has closed. Nothing is reloaded, so a member entering or leaving discovery is in
 * the door within one interval plus the commands' time, and no open tunnel is cut.
 *
 * Node decides here; HAProxy carries every byte. If HAProxy exits, it is started again (after
 * `restartDelayMs`, doubling to 30 s) from the last exits read, and the sync goes on.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { doorServerOptions, renderDoor, validateDoor } from './haproxy.ts';
import type { DoorExit, DoorSpec } from './haproxy.ts';
import { DoorRuntime, inMaintenance } from './runtime.ts';
import { DOOR_CREDENTIAL_TABLE, DOOR_TUNNEL_TABLE, parseDoorCredentialTable } from './table.ts';
import type { DoorCredentialCounters } from './table.ts';

export interface DoorServiceOptions {
  /** The door's spec without its exits (they come from `members()`). */
  spec: Omit<DoorSpec, 'exits'>;
  /** Where the rendered configuration is written (its folder is created). */
  configPath: string;
  /** The pool's serving exits now (its discovery list); a rejection skips that sync. */
  members: () => Promise<DoorExit[]>;
  log: Logger;
  /** Between two syncs (default 500 ms). */
  syncIntervalMs?: number;
  /** First wait before HAProxy is started again after it exits (default 1 s, doubling to 30 s). */
  restartDelayMs?: number;
  /** Bound on HAProxy's runtime socket answering after a start (default 10 s). */
  startTimeoutMs?: number;
  /** HAProxy's binary (default `haproxy` on PATH). */
  haproxyBin?: string;
  /**
   * Each line HAProxy writes on stdout (its decision log). Default: none, and HAProxy writes its
   * lines on this process's stdout itself (one write per line, as this process writes its own),
   * so no line passes through Node.
   */
  onLogLine?: (line: string) => void;
  /**
   * Called after a sync when the door's exits (names, roles, HAProxy's up or down) differ from
   * what it last accepted; a rejection is logged and the report is tried again at the next sync.
   */
  onChange?: (report: {
    listen: string;
    exits: { name: string; role: 'serving' | 'draining'; up: boolean }[];
  }) => Promise<void>;
}

/** An exit as the door holds it. */
export interface DoorExitState {
  name: string;
  address: string;
  /** `serving`: in the rotation (HAProxy's checks may still mark it down: `up`). `draining`: left discovery, tunnels still open. */
  role: 'serving' | 'draining';
  /** HAProxy's view: the exit answers its checks and takes requests. */
  up: boolean;
}

export interface DoorStatus {
  listen: string;
  running: boolean;
  pid?: number;
  exits: DoorExitState[];
  /** RFC 3339 time of the last sync that read the members and applied every change. */
  syncedAt?: string;
  lastError?: string;
  restarts: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class DoorService {
  private readonly runtime: DoorRuntime;
  private child: ChildProcess | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private exits = new Map<string, DoorExitState>();
  private last: DoorExit[] = [];
  private state: Pick<DoorStatus, 'syncedAt' | 'lastError' | 'restarts'> = { restarts: 0 };
  private wake: (() => void) | undefined;
  /** What onChange last accepted (the exits as JSON). */
  private reported: string | undefined;

  private readonly o: DoorServiceOptions;

  constructor(o: DoorServiceOptions) {
    this.o = o;
    validateDoor({ ...o.spec, exits: [] });
    this.runtime = new DoorRuntime(o.spec.runtimeSocket);
  }

  /** Reads the members once (bounded by `startTimeoutMs`), starts HAProxy with them, then keeps it current. */
  async start(): Promise<void> {
    this.last = await this.o.members().catch((err: unknown) => {
      this.o.log.warn({ err }, 'door: the first read of the members failed; starting with none');
      return [];
    });
    await this.launch();
    this.loop = this.run();
  }

  /** The door's exits and HAProxy's view of them. */
  status(): DoorStatus {
    return {
      listen: `${this.o.spec.listen.host}:${this.o.spec.listen.port}`,
      running: this.alive(),
      ...(this.child?.pid === undefined ? {} : { pid: this.child.pid }),
      exits: [...this.exits.values()].sort((a, b) => a.name.localeCompare(b.name)),
      ...this.state,
    };
  }

  /** Requests, bytes and tunnels per credential, from HAProxy's stick tables (reset when HAProxy restarts). */
  async credentialCounters(): Promise<Map<string, DoorCredentialCounters>> {
    const creds = await this.runtime.run(`show table ${DOOR_CREDENTIAL_TABLE}`);
    const tunnels = await this.runtime.run(`show table ${DOOR_TUNNEL_TABLE}`);
    return parseDoorCredentialTable(`${creds}\n${tunnels}`);
  }

  /** One sync now: read the members, apply the difference. Throws what failed (the loop logs it). */
  async sync(): Promise<void> {
    const want = await this.o.members();
    this.last = want;
    const have = new Map((await this.runtime.servers()).map((s) => [s.name, s]));
    const options = doorServerOptions(this.o.spec.health);
    let changed = false;
    for (const e of want) {
      const s = have.get(e.name);
      if (s === undefined) {
        await this.runtime.add(e.name, e.host, e.port, options);
        changed = true;
        this.o.log.info({ exit: e.name, address: `${e.host}:${e.port}` }, 'door: exit added');
      } else {
        if (s.host !== e.host || s.port !== e.port) {
          await this.runtime.move(e.name, e.host, e.port);
          changed = true;
          this.o.log.info({ exit: e.name, address: `${e.host}:${e.port}` }, 'door: exit moved');
        }
        if (inMaintenance(s)) {
          await this.runtime.ready(e.name);
          changed = true;
          this.o.log.info({ exit: e.name }, 'door: exit serving again');
        }
      }
    }
    const wanted = new Set(want.map((e) => e.name));
    for (const s of have.values()) {
      if (wanted.has(s.name)) continue;
      changed = true;
      if (!inMaintenance(s)) {
        await this.runtime.drain(s.name);
        this.o.log.info({ exit: s.name }, 'door: exit left discovery; draining');
      }
      if (await this.runtime.remove(s.name)) this.o.log.info({ exit: s.name }, 'door: exit removed');
    }
    // HAProxy's view after the changes; read again only when a command changed it.
    const now = changed ? new Map((await this.runtime.servers()).map((s) => [s.name, s])) : have;
    this.exits = new Map(
      [...now.values()].map((s) => [
        s.name,
        {
          name: s.name,
          address: `${s.host}:${s.port}`,
          role: wanted.has(s.name) ? 'serving' : 'draining',
          up: s.opState === 2 && !inMaintenance(s),
        },
      ]),
    );
    this.state.syncedAt = new Date().toISOString();
    delete this.state.lastError;
    await this.report();
  }

  /** Tells `onChange` the door's exits if they changed since it last accepted them. */
  private async report(): Promise<void> {
    if (this.o.onChange === undefined) return;
    const st = this.status();
    const exits = st.exits.map(({ name, role, up }) => ({ name, role, up }));
    const key = JSON.stringify(exits);
    if (key === this.reported) return;
    await this.o.onChange({ listen: st.listen, exits });
    this.reported = key;
  }

  /** Stops the loop, then HAProxy (SIGUSR1: it finishes its connections; SIGKILL after `graceMs`). */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
    const child = this.child;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGUSR1');
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
    }
    await rm(this.o.spec.runtimeSocket, { force: true });
  }

  private async run(): Promise<void> {
    const every = this.o.syncIntervalMs ?? 500;
    let delay = this.o.restartDelayMs ?? 1_000;
    while (!this.stopping) {
      const t0 = performance.now();
      if (!this.alive()) {
        this.state.restarts++;
        this.o.log.warn({ delayMs: delay }, 'door: HAProxy is not running; starting it again');
        await this.pause(delay);
        delay = Math.min(delay * 2, 30_000);
        if (this.stopping) break;
        await this.launch().catch((err: unknown) => {
          this.state.lastError = (err as Error).message;
          this.o.log.error({ err }, 'door: HAProxy did not start');
        });
        continue;
      }
      delay = this.o.restartDelayMs ?? 1_000;
      try {
        await this.sync();
      } catch (err) {
        const message = (err as Error).message;
        if (message !== this.state.lastError) this.o.log.warn({ err }, 'door: sync failed');
        this.state.lastError = message;
      }
      await this.pause(Math.max(0, every - (performance.now() - t0)));
    }
  }

  private alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done(): void {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    });
  }

  /** Renders the configuration with the last exits read, starts HAProxy, waits for its runtime socket. */
  private async launch(): Promise<void> {
    this.exits = new Map(); // the last process's view: the first sync reads the new one
    delete this.state.syncedAt;
    await mkdir(dirname(this.o.configPath), { recursive: true });
    await mkdir(dirname(this.o.spec.runtimeSocket), { recursive: true });
    await rm(this.o.spec.runtimeSocket, { force: true });
    await writeFile(this.o.configPath, renderDoor({ ...this.o.spec, exits: this.last }), { mode: 0o600 });
    // Reading the decision lines here cost the service 40-140 µs of CPU per request
    // (bench/door.ts), as much as HAProxy's own work on a request: they go to stdout directly.
    const onLine = this.o.onLogLine;
    const child = spawn(this.o.haproxyBin ?? 'haproxy', ['-db', '-f', this.o.configPath], {
      stdio: ['ignore', onLine === undefined ? 'inherit' : 'pipe', 'pipe'],
    });
    this.child = child;
    if (onLine !== undefined && child.stdout !== null) createInterface({ input: child.stdout }).on('line', onLine);
    if (child.stderr !== null) {
      createInterface({ input: child.stderr }).on('line', (line) =>
        this.o.log.info({ haproxy: line }, 'door: haproxy'),
      );
    }
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.once('error', (err) => this.o.log.error({ err }, 'door: HAProxy could not run'));
    const deadline = performance.now() + (this.o.startTimeoutMs ?? 10_000);
    for (;;) {
      const up = await this.runtime
        .run('show info')
        .then(() => true)
        .catch(() => false);
      if (up) break;
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`door: HAProxy exited (${String(await exited)}) before its runtime socket answered`);
      }
      if (performance.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(
          `door: HAProxy's runtime socket ${this.o.spec.runtimeSocket} did not answer within the start bound`,
        );
      }
      await sleep(50);
    }
    this.o.log.info(
      { pid: child.pid, listen: `${this.o.spec.listen.host}:${this.o.spec.listen.port}`, exits: this.last.length },
      'door: HAProxy running',
    );
  }
}
