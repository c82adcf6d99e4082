// Activities of one proxy's life: thin calls from workflow input (plain JSON) into lib/kvm2, with
// the entry's budgets, the activity's cancellation signal, and errors mapped by errors.ts.
import { Context } from '@temporalio/activity';
import { VmSchema } from '../lib/config/schema.ts';
import { CODES } from '../contracts/errors.ts';
import {
  basicProxyAuthorization,
  formatPath,
  imageOf,
  readProbeCredentials,
  resolveSquid,
} from '../lib/config/index.ts';
import {
  checkIdentifier,
  createProxy,
  deleteProxy,
  getProxy,
  hostCapacity,
  hostHealth,
  listProxies,
  readConsoleTail,
  resizeProxy,
} from '../lib/kvm2/index.ts';
import type { CreatedProxy, DeletedProxy, ResizedProxy } from '../lib/kvm2/index.ts';
import { connectProbe } from '../lib/probe/connect.ts';
import { readExitIp } from '../lib/probe/exit-ip.ts';
import { openDirectTcp } from '../lib/probe/direct.ts';
import { RouteTable } from '../lib/probe/route.ts';
import type { ProbePath } from '../lib/probe/route.ts';
import type { Duplex } from 'node:stream';
import { errorKind, ProjectError } from '../lib/errors.ts';
import type { HostSurvey } from '../contracts/fleet.ts';
import { HOST_MONITOR_MAX_WATCHES } from '../contracts/host-monitor.ts';
import type { HostConfig, ProviderEntry } from '../lib/config/index.ts';
import type { ProbeOutcome, ProxySpec, ResolvedProxy, VmReading } from '../contracts/proxy.ts';
import type { EnsuredBase } from '../contracts/image.ts';
import { mapped, ProxySpecError } from './errors.ts';
import type { HostRegistry } from './hosts.ts';
import type { WorkerMetrics } from './metrics.ts';

/** A proxy on a host: what every per-VM activity needs. */
export interface PlacedProxy {
  proxy: ResolvedProxy;
  host: string;
}

/**
 * How long a host survey is reused, in ms. A burst of proxies then costs one survey per entry
 * instead of one per proxy (a survey lists every marked domain: its cost grows with the fleet);
 * placement spreads such a burst by rendezvous hashing (workflows/proxy/placement.ts).
 */
export const SURVEY_TTL_MS = 5_000;

/**
 * The host's `maxProxies` as placement sees it: the providers file's; unset, none, or
 * {@link HOST_MONITOR_MAX_WATCHES} when the entry's proxies are watched by the host's monitor.
 */
export function maxProxiesOf(entry: ProviderEntry, host: HostConfig): { maxProxies?: number } {
  if (host.maxProxies !== undefined) return { maxProxies: host.maxProxies };
  return entry.health.monitor === 'host' ? { maxProxies: HOST_MONITOR_MAX_WATCHES } : {};
}

/** The least bound of a health read, whatever `health.probeTimeoutMs` says: a dial must fit in it. */
export const HEALTH_READ_MIN_MS = 5_000;

export function createProxyActivities(registry: HostRegistry, metrics?: WorkerMetrics) {
  const surveys = new Map<string, { at: number; result: Promise<HostSurvey[]> }>();
  /** One survey shared by every caller within {@link SURVEY_TTL_MS} (no caller's signal ends it). */
  const survey = (input: { entry: string }): Promise<HostSurvey[]> =>
    mapped(async () => {
      const ownerUid = registry.ownerUid;
      return Promise.all(
        registry.hosts(input.entry).map(async ({ entry, host, links }): Promise<HostSurvey> => {
          const base = {
            entry: entry.name,
            host: host.name,
            weight: host.weight,
            memoryOvercommit: host.memoryOvercommit,
            cpuOvercommit: host.cpuOvercommit,
            ...maxProxiesOf(entry, host),
          };
          try {
            const call = { timeoutMs: entry.timeouts.rpcMs };
            const health = await links.call((c, budget) => hostHealth(c, entry.storagePool, budget), call);
            const proxies = await listProxies(links, { entry: entry.name, ownerUid }, call);
            const capacity = await links.call((c, budget) => hostCapacity(c, budget), call);
            return {
              ...base,
              reachable: true,
              rttMs: health.rttMs,
              libvirtVersion: health.libvirtVersion,
              hypervisorVersion: health.hypervisorVersion,
              poolAvailableBytes: health.pool.availableBytes,
              poolCapacityBytes: health.pool.capacityBytes,
              proxies: proxies.length,
              memoryTotalMiB: capacity.memoryTotalMiB,
              memoryFreeMiB: capacity.memoryFreeMiB,
              memoryCommittedMiB: capacity.memoryCommittedMiB,
              cpus: capacity.cpus,
              vcpusCommitted: capacity.vcpusCommitted,
            };
          } catch (err) {
            return { ...base, reachable: false, error: describe(err) };
          }
        }),
      );
    });
  const identity = (p: ResolvedProxy) => ({ ownerUid: p.ownerUid, entry: p.entry, name: p.name });
  const signal = (): AbortSignal => Context.current().cancellationSignal;
  // The probe's path (health.via, lib/probe/route.ts), logged when it changes for a proxy.
  const routes = new RouteTable();
  const paths = new Map<string, string>();
  const notePath = (p: ResolvedProxy, ip: string, path: ProbePath): void => {
    const key = `${p.entry}/${p.name}`;
    const seen = `${ip}|${path.via}|${path.dev ?? ''}`;
    if (paths.get(key) === seen) return;
    if (paths.size > 10_000) paths.clear();
    paths.set(key, seen);
    Context.current().log.info('probe path', { entry: p.entry, proxy: p.name, ip, ...path });
  };

  return {
    /**
     * Validates a proxy spec against the providers file and resolves every default. Fails at once
     * (non-retryable `PROXY_SPEC_INVALID`, naming the field) on an unknown entry or image key, an
     * invalid name, size or Squid override, or an owner UID of another installation.
     */
    async resolveProxy(spec: ProxySpec & { ownerUid?: string }): Promise<ResolvedProxy> {
      return mapped(() => {
        try {
          checkIdentifier('name', spec.name);
        } catch (err) {
          throw new ProxySpecError('name', err instanceof Error ? err.message : String(err));
        }
        const entry = registry.entry(spec.entry);
        imageOf(entry, spec.imageKey);
        if (spec.ownerUid !== undefined && spec.ownerUid !== registry.ownerUid) {
          throw new ProxySpecError(
            'ownerUid',
            `this installation's owner UID is ${registry.ownerUid}, not ${spec.ownerUid}; start the proxy on the installation that owns it`,
          );
        }
        const vm = VmSchema.safeParse({ ...entry.vm, ...spec.vm });
        if (!vm.success) {
          const issue = vm.error.issues[0]!;
          throw new ProxySpecError(`vm.${formatPath(issue.path)}`, issue.message);
        }
        const squid = resolveSquid(entry.squid, spec.squid, registry.config.allowOpenProxy);
        const t = entry.timeouts;
        return {
          ownerUid: registry.ownerUid,
          name: spec.name,
          entry: entry.name,
          imageKey: spec.imageKey,
          hosts: entry.hosts.map((h) => ({ name: h.name, weight: h.weight })),
          vm: vm.data,
          squid,
          timeouts: {
            rpcMs: t.rpcMs,
            bootMs: t.bootMs,
            shutdownGraceMs: t.shutdownGraceMs,
            downloadTotalMs: t.downloadTotalMs,
          },
          health: { ...entry.health },
        };
      });
    },

    /**
     * Health of every host of `entry`, on each host's pooled link: reachable, round trip, versions,
     * pool space, how many of our proxies it holds, its memory and CPUs with what the running
     * domains take of them, and its limits from the providers file (placement's input). An
     * unreachable host is reported, not thrown.
     */
    async surveyHosts(input: { entry: string }): Promise<HostSurvey[]> {
      const cached = surveys.get(input.entry);
      if (cached && Date.now() - cached.at < SURVEY_TTL_MS) return cached.result;
      const result = survey(input);
      surveys.set(input.entry, { at: Date.now(), result });
      result.catch(() => surveys.delete(input.entry));
      return result;
    },
    /** Creates (or converges) the proxy's overlay, seed and domain on its host and starts it. */
    async createProxyVm(input: PlacedProxy & { base: EnsuredBase; createdAt: string }): Promise<CreatedProxy> {
      return mapped(async () => {
        const { proxy } = input;
        const { entry, links } = registry.host(proxy.entry, input.host);
        return createProxy({
          ...identity(proxy),
          links,
          pool: entry.storagePool,
          network: entry.network,
          domainType: entry.domainType,
          vcpus: proxy.vm.vcpus,
          memoryMiB: proxy.vm.memoryMiB,
          diskGiB: proxy.vm.diskGiB,
          base: { path: input.base.path, format: input.base.format },
          squid: proxy.squid,
          createdAt: input.createdAt,
          rpcTimeoutMs: proxy.timeouts.rpcMs,
          signal: signal(),
        });
      });
    },

    /** The VM's state and, while it runs, its address (no address yet is not an error: H3). */
    async readProxyVm(input: PlacedProxy): Promise<VmReading> {
      return mapped(async () => {
        const { proxy } = input;
        const { entry, links } = registry.host(proxy.entry, input.host);
        // A health read gets the probe's bound (at least HEALTH_READ_MIN_MS, room for a dial): a
        // host that does not answer it that long is silent (the call kills its link: a host-link
        // code), known then rather than at the link's keepalive, 15-20 s later (docs/health.md,
        // "Detecting a silent host").
        const status = await getProxy({
          ...identity(proxy),
          links,
          network: entry.network,
          rpcTimeoutMs: Math.min(proxy.timeouts.rpcMs, Math.max(proxy.health.probeTimeoutMs, HEALTH_READ_MIN_MS)),
          signal: signal(),
        });
        return { state: status.state, ip: status.address?.ip, source: status.address?.source };
      });
    },

    /**
     * One health probe: a real CONNECT through the proxy's Squid to the entry's target, straight
     * over TCP where the worker routes to the guest, else through the host's SSH connection
     * (`direct-tcpip` to the guest), as `health.via` decides (lib/probe/route.ts): the same bytes
     * either way; the path is logged ('probe path') when it changes.
     * A failing probe is a result (`ok: false` with the code), not an error. With `readExitIp` (the
     * monitor asks at most once per probe) and `health.egressIpUrl`, a passing probe then reads the
     * exit IP through a second channel to the same Squid (lib/probe/exit-ip.ts); a failed read is
     * the outcome's `exitIpError`, never a failed probe.
     */
    async probeProxy(input: PlacedProxy & { ip: string; readExitIp?: boolean }): Promise<ProbeOutcome> {
      const { proxy } = input;
      const target = proxy.health.target;
      if (target === undefined) return { ok: false, code: CODES.probeNoTarget, message: 'health.target is not set' };
      const timeoutMs = proxy.health.probeTimeoutMs;
      const ac = AbortSignal.any([signal(), AbortSignal.timeout(timeoutMs)]);
      const started = performance.now();
      try {
        // A proxy that requires credentials is probed as the operator's probe user, read from its
        // file at each probe (never recorded in the history or logged).
        const credentials = proxy.squid.auth?.probeCredentialsFile;
        const proxyAuthorization =
          credentials === undefined
            ? undefined
            : basicProxyAuthorization(readProbeCredentials(credentials, 'squid.auth.probeCredentialsFile'));
        const path = await routes.pathFor(proxy.health.via ?? 'auto', input.ip);
        notePath(proxy, input.ip, path);
        const open = async (s: AbortSignal): Promise<Duplex> =>
          path.via === 'direct'
            ? openDirectTcp(input.ip, proxy.squid.port, { timeoutMs, signal: s })
            : (await registry.probeSession(proxy.entry, input.host, s)).openTcp(input.ip, proxy.squid.port, {
                timeoutMs,
                signal: s,
              });
        const channel = await open(ac);
        const { latencyMs } = await connectProbe(channel, { target, timeoutMs, signal: ac, proxyAuthorization });
        metrics?.probe.observe({ outcome: 'ok' }, latencyMs / 1000);
        const passed = { ok: true as const, latencyMs: Math.round(latencyMs * 1000) / 1000 };
        const url = proxy.health.egressIpUrl;
        if (input.readExitIp !== true || url === undefined) return passed;
        // A budget of its own (the probe's may be nearly spent), under the activity's cancellation.
        const exitAc = AbortSignal.any([signal(), AbortSignal.timeout(timeoutMs)]);
        try {
          const tunnel = await open(exitAc);
          const { ip } = await readExitIp(tunnel, { url, timeoutMs, signal: exitAc, proxyAuthorization });
          return { ...passed, exitIp: ip };
        } catch (err) {
          if (signal().aborted) throw signal().reason;
          return { ...passed, exitIpError: describe(err) };
        }
      } catch (err) {
        if (signal().aborted) throw signal().reason;
        const code = err instanceof ProjectError ? err.code : CODES.probeFailed;
        metrics?.probe.observe({ outcome: code }, (performance.now() - started) / 1000);
        return { ok: false, code, message: err instanceof Error ? err.message : String(err) };
      }
    },

    /** Applies `vm.memoryMiB` and `vm.vcpus` of `proxy` to its domain, restarting it when they change. */
    async resizeProxyVm(input: PlacedProxy): Promise<ResizedProxy> {
      return mapped(async () => {
        const { proxy } = input;
        const { links } = registry.host(proxy.entry, input.host);
        return resizeProxy({
          ...identity(proxy),
          links,
          vcpus: proxy.vm.vcpus,
          memoryMiB: proxy.vm.memoryMiB,
          shutdownGraceMs: proxy.timeouts.shutdownGraceMs,
          rpcTimeoutMs: proxy.timeouts.rpcMs,
          signal: signal(),
        });
      });
    },

    /**
     * The last lines of the VM's serial console log on its host (over the host's SSH session), for
     * the reason of a failed boot. A failure to read is reported as one line, not thrown.
     */
    async readConsoleTail(input: PlacedProxy): Promise<string[]> {
      const { proxy } = input;
      try {
        const session = await registry.probeSession(proxy.entry, input.host, signal());
        return await readConsoleTail(session, identity(proxy), { lines: 20, timeoutMs: 10_000, signal: signal() });
      } catch (err) {
        if (signal().aborted) throw signal().reason;
        return [`(the console log could not be read: ${describe(err)})`];
      }
    },

    /** Deletes the proxy's domain, overlay and seed (NotFound counts as done; the base stays). */
    async deleteProxyVm(input: PlacedProxy): Promise<DeletedProxy> {
      return mapped(async () => {
        const { proxy } = input;
        const { entry, links } = registry.host(proxy.entry, input.host);
        return deleteProxy({
          ...identity(proxy),
          links,
          pool: entry.storagePool,
          shutdownGraceMs: proxy.timeouts.shutdownGraceMs,
          rpcTimeoutMs: proxy.timeouts.rpcMs,
          signal: signal(),
        });
      });
    },
  };
}

/** `CODE: message` of any error, for reports. */
export function describe(err: unknown): string {
  const code = err instanceof ProjectError ? err.code : errorKind(err);
  return `${code}: ${err instanceof Error ? err.message : String(err)}`;
}
