/**
 * The door as bin/door runs it, for the benchmarks, in a process of its own: lib/door/service.ts
 * renders the configuration (lib/door/haproxy.ts), runs HAProxy, adds the exits through the
 * runtime API at its first sync (as bin/door does when it starts before its pool is Ready) and
 * writes HAProxy's decision lines on its stdout. No Temporal: the exits are fixed.
 *
 *   node bench/lib/door-service.ts '<json>'
 *
 * `<json>`: `{ spec: Omit<DoorSpec, 'exits'>, exits: DoorExit[], configPath }`. Prints
 * `door-service ready haproxy=<pid>` on stderr once every exit is up in HAProxy (bounded: 20 s),
 * and stops HAProxy on SIGTERM.
 */
import pino from 'pino';
import type { DoorExit, DoorSpec } from '../../lib/door/haproxy.ts';
import { DoorService } from '../../lib/door/service.ts';

const { spec, exits, configPath } = JSON.parse(process.argv[2] ?? '{}') as {
  spec: Omit<DoorSpec, 'exits'>;
  exits: DoorExit[];
  configPath: string;
};
let first = true;
const service = new DoorService({
  spec,
  configPath,
  // The first read finds no exit, so every exit comes in through the runtime API.
  members: () => Promise.resolve(first ? ((first = false), []) : exits),
  log: pino({ level: 'warn' }, pino.destination(2)),
  syncIntervalMs: 200,
});
process.once('SIGTERM', () => void service.stop(2_000).finally(() => process.exit(0)));
await service.start();
for (let i = 0; ; i++) {
  const st = service.status();
  if (st.exits.filter((e) => e.up).length === exits.length) {
    process.stderr.write(`door-service ready haproxy=${st.pid}\n`);
    break;
  }
  if (i > 400) {
    process.stderr.write(`door-service: the exits are not up after 20 s: ${JSON.stringify(st)}\n`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 50));
}
