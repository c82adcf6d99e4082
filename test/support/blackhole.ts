/**
 * A test host made silent from the machine: a blackhole route to its address and one over its
 * routed network (in place of the route into its veth that `testhost up` adds). Packets to either
 * are dropped without an answer (no RST, no ICMP), as a host that lost power or its link. Used by
 * test/e2e/pool.test.ts ("host lost") and bench/failover.ts.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestHost } from './testhosts.ts';

const pexec = promisify(execFile);

/** A black hole in place; `lift()` restores the routes (idempotent, so every path may call it). */
export interface BlackHole {
  host: TestHost;
  lift(): Promise<void>;
}

/** The machine's route into `h`'s routed network through its veth, as testhost up adds it. */
export function restoreRoutedRoute(h: TestHost): Promise<unknown> {
  return pexec('ip', ['route', 'replace', String(h.routedNetworkCidr), 'via', h.address, 'dev', String(h.vethRoot)], {
    timeout: 10_000,
  });
}

/** Black-holes `h`'s address and its routed network; the routes are restored by `lift()`. */
export async function blackHoleHost(h: TestHost): Promise<BlackHole> {
  let addr = false;
  let net = false;
  const lift = async (): Promise<void> => {
    if (addr) {
      await pexec('ip', ['route', 'del', 'blackhole', `${h.address}/32`], { timeout: 10_000 });
      addr = false;
    }
    if (net) {
      await restoreRoutedRoute(h);
      net = false;
    }
  };
  try {
    await pexec('ip', ['route', 'add', 'blackhole', `${h.address}/32`], { timeout: 10_000 });
    addr = true;
    // Its routed network too: the machine's route into its veth becomes a black hole.
    await pexec('ip', ['route', 'replace', 'blackhole', String(h.routedNetworkCidr)], { timeout: 10_000 });
    net = true;
  } catch (err) {
    await lift().catch(() => undefined);
    throw err;
  }
  return { host: h, lift };
}
