// What a pool's front door sends requests to: the pool's discovery list (members available and
// serving, with an address), read by the pool's status query. The door service (workers/door.ts)
// calls it every sync; a pool that does not exist is an error naming it, so the door keeps the
// exits it has until the pool is back.
import type { Client } from '@temporalio/client';
import { poolDoorSignal } from '../contracts/messages.ts';
import { poolAddresses, poolWorkflowId } from '../contracts/pool.ts';
import type { DoorReport } from '../contracts/pool.ts';
import { withDeadline } from './connection.ts';
import { poolStatus } from './pools.ts';

/** One exit of a door: the member's name and its Squid's address. */
export interface PoolExit {
  name: string;
  host: string;
  port: number;
}

/** The members of `entry/pool` in discovery now, as exits (query bounded by `timeoutMs`). */
export async function poolExits(client: Client, entry: string, pool: string, timeoutMs = 5_000): Promise<PoolExit[]> {
  const st = await poolStatus(client, entry, pool, timeoutMs);
  if (st === undefined)
    throw new Error(`no pool ${entry}/${pool} (no workflow pool/${entry}/${pool}): create it, or fix the doors file`);
  return poolAddresses(st).map((a) => {
    const cut = a.address.lastIndexOf(':');
    return { name: a.name, host: a.address.slice(0, cut), port: Number(a.address.slice(cut + 1)) };
  });
}

/** Tells the pool its door's address and exits (shown in its status), bounded by `timeoutMs`. */
export async function reportDoor(
  client: Client,
  entry: string,
  pool: string,
  report: Omit<DoorReport, 'at'>,
  timeoutMs = 5_000,
): Promise<void> {
  const at = new Date().toISOString();
  await withDeadline(client, 'the door report', timeoutMs, () =>
    client.workflow.getHandle(poolWorkflowId(entry, pool)).signal(poolDoorSignal, { ...report, at }),
  );
}
