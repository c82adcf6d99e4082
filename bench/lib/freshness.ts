/**
 * How fresh the values operators read are: the fresh status (client/health.ts freshProxyStatus: the
 * status query with the health monitor's last heartbeat as the server holds it, what the API and
 * the Web UI show), sampled every second; each sample's age is now less its last probe time. The
 * steady-state benches sample after their CPU window, so the queries do not count in its CPU.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { freshProxyStatus } from '../../client/health.ts';
import { sleep } from './run.ts';

const EVERY_MS = 1_000;

/** Ages in seconds of the last probe in the fresh statuses of `hs`, sampled every second for `forMs`. */
export async function probeAges(hs: readonly WorkflowHandle[], forMs: number): Promise<number[]> {
  const until = Date.now() + forMs;
  const ages: number[] = [];
  for (let i = 0; i < Math.ceil(forMs / EVERY_MS) + 1 && Date.now() < until; i++) {
    const next = Date.now() + EVERY_MS;
    const ss = await Promise.all(hs.map((h) => freshProxyStatus(h).catch(() => undefined)));
    const now = Date.now();
    for (const s of ss) if (s?.health.lastProbeAt) ages.push((now - Date.parse(s.health.lastProbeAt)) / 1000);
    await sleep(Math.max(0, Math.min(next, until) - Date.now()));
  }
  return ages;
}
