/**
 * The doors file (`bin/door --config FILE`, docs/door.md): which pools get a front door, where
 * each listens and who may use it. JSON:
 *
 *   { "doors": [ { "entry": "local", "pool": "web",
 *                  "listen": { "host": "127.0.0.1", "port": 3130 },
 *                  "users": [ { "name": "alice", "passwordHash": "$6$..." } ],
 *                  "health": { "interMs": 1000, "fall": 2, "rise": 1 } } ] }
 *
 * Each door's fields are checked as lib/door/haproxy.ts checks a door spec, with the door's place
 * in the file in front of the field (`doors[1].users[0].passwordHash: ...`). The exits are not in
 * the file: they are the pool's discovery list, kept current by the service.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DoorSpecError, validateDoor } from './haproxy.ts';
import type { DoorSpec } from './haproxy.ts';

/** One door as the file gives it. */
export interface DoorConfig extends Omit<DoorSpec, 'exits' | 'runtimeSocket' | 'health'> {
  entry: string;
  pool: string;
  /** Default {@link DEFAULT_DOOR_HEALTH}. */
  health?: DoorSpec['health'];
}

/** The exits' active check when a door names none: every second, down after 2 failures, up after 1 pass. */
export const DEFAULT_DOOR_HEALTH: DoorSpec['health'] = { interMs: 1_000, fall: 2, rise: 1 };

const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** A doors file that cannot be used: the message names the file, the field and the fix. */
export class DoorConfigError extends DoorSpecError {}

/** The door spec of `door` (exits empty: the service adds them), its runtime socket under `stateDir`. */
export function doorSpecOf(door: DoorConfig, stateDir: string): Omit<DoorSpec, 'exits'> {
  const { entry: _e, pool: _p, ...rest } = door;
  return { ...rest, health: door.health ?? DEFAULT_DOOR_HEALTH, runtimeSocket: doorSocketPath(door, stateDir) };
}

/** Where a door's runtime socket is: `<stateDir>/<entry>.<pool>.sock`. */
export function doorSocketPath(door: Pick<DoorConfig, 'entry' | 'pool'>, stateDir: string): string {
  return join(stateDir, `${door.entry}.${door.pool}.sock`);
}

/** Checks a parsed doors file; throws a {@link DoorConfigError} naming the first bad field. */
export function parseDoorsConfig(raw: unknown, file = 'the doors file'): DoorConfig[] {
  const fail = (field: string, problem: string, fix: string): never => {
    throw new DoorConfigError(`${file}: ${field}`, problem, fix);
  };
  const doors = (raw as { doors?: unknown } | null)?.doors;
  if (!Array.isArray(doors) || doors.length === 0) {
    return fail('doors', 'must be a non-empty list', 'list one door per pool: {entry, pool, listen, users}');
  }
  const seen = new Map<string, string>();
  return doors.map((d: unknown, i) => {
    const at = `doors[${i}]`;
    if (typeof d !== 'object' || d === null) return fail(at, 'must be an object', 'give {entry, pool, listen, users}');
    const door = d as DoorConfig;
    for (const k of ['entry', 'pool'] as const) {
      if (typeof door[k] !== 'string' || !NAME_RE.test(door[k])) {
        fail(`${at}.${k}`, `must be the ${k}'s name, got ${JSON.stringify(door[k])}`, `name the pool's ${k}`);
      }
    }
    try {
      validateDoor({ ...doorSpecOf(door, '/run/egress-doors'), exits: [] });
    } catch (err) {
      if (!(err instanceof DoorSpecError)) throw err;
      const rest = err.message.slice(err.field.length + 2);
      const cut = rest.lastIndexOf('; ');
      return fail(`${at}.${err.field}`, rest.slice(0, cut), rest.slice(cut + 2));
    }
    for (const [key, where] of [
      [`${door.entry}/${door.pool}`, 'pool'],
      [`${door.listen.host}:${door.listen.port}`, 'listen'],
    ] as const) {
      const other = seen.get(`${where} ${key}`);
      if (other !== undefined)
        fail(`${at}.${where}`, `${key} is also ${other}'s`, 'give each pool one door and each door its own port');
      seen.set(`${where} ${key}`, at);
    }
    return door;
  });
}

/** Reads and checks a doors file. */
export async function loadDoorsConfig(path: string): Promise<DoorConfig[]> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    throw new DoorConfigError(
      path,
      `cannot be read as JSON (${(err as Error).message})`,
      'write the doors file as JSON (docs/door.md)',
    );
  }
  return parseDoorsConfig(raw, path);
}
