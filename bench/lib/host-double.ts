// The host double of the steady-state benchmark (and nothing else): every activity a proxy's
// life calls, answered in-process as a healthy host and guest would (a VM that runs, an address,
// a probe that passes), so the benchmark measures the control plane alone: Temporal's history,
// its server and the worker. The monitor activity is the real one (activities/monitor.ts) over
// the double's read and probe, and so are the host monitor's (activities/host-monitor.ts) when the
// double is given a client. Proxies spread over `hosts` simulated hosts, the fewest-held first.
import type { Client } from '@temporalio/client';
import { createHostMonitorActivities } from '../../activities/host-monitor.ts';
import { createMonitorActivities } from '../../activities/monitor.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import type { EnsuredBase } from '../../contracts/image.ts';
import type { HealthMonitor, ProbeOutcome, ProxySpec, ResolvedProxy, VmReading } from '../../contracts/proxy.ts';

export const DOUBLE_HOST = 'sim-1';

export interface HostDoubleOptions {
  /** Simulated hosts (sim-1 ... sim-K); default 1. */
  hosts?: number;
  /** The client and task queue of the host monitor's activities (without them the double has none). */
  client?: Client;
  taskQueue?: string;
  /** `providers[].health.monitor` of the resolved specs, read at each resolve (a bench switches it between phases). */
  monitor?: () => HealthMonitor;
}

export function hostDouble(entry: string, intervalMs: number, opts: HostDoubleOptions = {}) {
  const hostNames = Array.from({ length: opts.hosts ?? 1 }, (_, i) => `sim-${i + 1}`);
  const held = new Map<string, number>(hostNames.map((h) => [h, 0]));
  const resolve = (spec: ProxySpec): ResolvedProxy => ({
    ownerUid: 'bench',
    name: spec.name,
    entry,
    imageKey: spec.imageKey,
    hosts: hostNames.map((name) => ({ name, weight: 1 })),
    vm: { vcpus: 1, memoryMiB: 256, diskGiB: 2 },
    squid: { port: 3128, allowedClientCidrs: ['10.0.0.0/8'] },
    timeouts: { rpcMs: 30_000, bootMs: 300_000, shutdownGraceMs: 1_000, downloadTotalMs: 600_000 },
    health: {
      target: 'health-target.invalid:443',
      intervalMs,
      probeTimeoutMs: 5_000,
      healthyAfter: 2,
      unhealthyAfter: 3,
      addressGracePolls: 2,
      maxRecreations: 2,
      ...(opts.monitor !== undefined ? { monitor: opts.monitor() } : {}),
    },
  });
  let ip = 0;
  const readProxyVm = (input: { proxy: ResolvedProxy }): Promise<VmReading> => {
    const n = [...input.proxy.name].reduce((a, c) => (a * 31 + c.charCodeAt(0)) >>> 0, 7);
    return Promise.resolve({
      state: 'Running',
      ip: `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
      source: 'lease',
    });
  };
  const probeProxy = (): Promise<ProbeOutcome> => Promise.resolve({ ok: true, latencyMs: 1.5 });
  const base: EnsuredBase = {
    volumeName: 'base.qcow2',
    path: '/pool/base.qcow2',
    format: 'qcow2',
    sizeBytes: 1,
    sha256: '0'.repeat(64),
    cached: true,
  };
  return {
    resolveProxy: (spec: ProxySpec) => Promise.resolve(resolve(spec)),
    surveyHosts: (): Promise<HostSurvey[]> =>
      Promise.resolve(
        hostNames.map((host) => ({
          entry,
          host,
          weight: 1,
          reachable: true,
          poolAvailableBytes: 2 ** 50,
          proxies: held.get(host) ?? 0,
        })),
      ),
    findBaseImage: () => Promise.resolve(base),
    createProxyVm: (input: { proxy: ResolvedProxy; host: string }) => {
      held.set(input.host, (held.get(input.host) ?? 0) + 1);
      return Promise.resolve({
        domain: `ep-${input.proxy.name}`,
        uuid: `00000000-0000-4000-8000-${String(++ip).padStart(12, '0')}`,
        mac: '52:54:00:00:00:01',
        overlayPath: '/pool/o.qcow2',
        seedPath: '/pool/s.iso',
        defined: true,
        started: true,
      });
    },
    readProxyVm,
    probeProxy,
    deleteProxyVm: () => Promise.resolve({ domain: 'deleted', overlay: 'deleted', seed: 'deleted' }),
    ...createMonitorActivities({ readProxyVm, probeProxy }),
    ...(opts.client !== undefined
      ? createHostMonitorActivities({ readProxyVm, probeProxy }, opts.client, opts.taskQueue ?? '')
      : {}),
  };
}
