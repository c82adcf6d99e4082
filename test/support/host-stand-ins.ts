/**
 * Stand-ins for the host workflow's tests: a pool that records the host-drain signals it gets
 * (started under a pool's ID, `pool/<entry>/<pool>`) and a standalone proxy with the `move`
 * update (under a proxy's ID), which refuses the move until the test says it is Running, as the
 * proxy workflow refuses a move outside Running. Both run until terminated.
 */
import { condition, defineQuery, defineSignal, setHandler } from '@temporalio/workflow';
import type { HostDrainNotice, ProxyMoveRequest } from '../../contracts/host.ts';
import { poolHostDrainSignal, proxyMoveUpdate } from '../../contracts/messages.ts';
import type { ProxyStatus } from '../../contracts/proxy.ts';

export const POOL_STAND_IN_TYPE = 'hostTestPoolStandIn';
export const PROXY_STAND_IN_TYPE = 'hostTestProxyStandIn';

export const drainNoticesQuery = defineQuery<HostDrainNotice[]>('notices');
export const movesQuery = defineQuery<ProxyMoveRequest[]>('moves');
/** To the proxy stand-in: it is Running now (it accepts a move from here on). */
export const runningSignal = defineSignal('running');

export async function hostTestPoolStandIn(): Promise<void> {
  const notices: HostDrainNotice[] = [];
  setHandler(poolHostDrainSignal, (n) => {
    notices.push(n);
  });
  setHandler(drainNoticesQuery, () => notices);
  await condition(() => false);
}

export async function hostTestProxyStandIn(input: { running: boolean }): Promise<void> {
  let running = input.running;
  const moves: ProxyMoveRequest[] = [];
  setHandler(runningSignal, () => {
    running = true;
  });
  setHandler(movesQuery, () => moves);
  setHandler(
    proxyMoveUpdate,
    (req: ProxyMoveRequest): ProxyStatus => {
      moves.push(req);
      return { state: 'Running' } as unknown as ProxyStatus;
    },
    {
      validator: (_req: ProxyMoveRequest) => {
        if (!running) throw new Error('the proxy is not Running (Provisioning): a move waits for Running');
      },
    },
  );
  await condition(() => false);
}
