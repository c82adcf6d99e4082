// Host placement and the capacity-wait backoff of the proxy lifecycle: pure, unit-tested on their own.
import { DEFAULT_CPU_OVERCOMMIT, DEFAULT_MEMORY_OVERCOMMIT } from '../../contracts/fleet.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';

/** Free pool space a host needs to be picked: the overlay headers and seed plus createProxy's 1 GiB reserve. */
export const PLACEMENT_NEED_BYTES = 1024 ** 3 + 16 * 1024 ** 2;

/** FNV-1a of `text` as a number in (0, 1): a deterministic, well-spread hash for placement. */
export function unitHash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return (h + 1) / 4294967297;
}

/** What a proxy's VM takes of a host (its `vm` size). */
export interface VmNeed {
  memoryMiB: number;
  vcpus: number;
}

/**
 * What `s` lacks for one more proxy needing `vm` and `needBytes` of pool space: empty when it fits.
 * A figure the survey lacks (surveys recorded before capacity was read) never keeps a proxy off.
 */
export function hostLacks(s: HostSurvey, needBytes: number, vm?: VmNeed): string[] {
  const lacks: string[] = [];
  const pool = s.poolAvailableBytes ?? 0;
  if (pool < needBytes) lacks.push(`pool: ${pool} bytes free, ${needBytes} needed`);
  const proxies = s.proxies ?? 0;
  if (s.maxProxies !== undefined && proxies >= s.maxProxies) lacks.push(`${proxies} of ${s.maxProxies} proxies`);
  if (vm === undefined) return lacks;
  if (s.memoryTotalMiB !== undefined && s.memoryCommittedMiB !== undefined) {
    const ratio = s.memoryOvercommit ?? DEFAULT_MEMORY_OVERCOMMIT;
    const limit = Math.floor(s.memoryTotalMiB * ratio);
    if (s.memoryCommittedMiB + vm.memoryMiB > limit) {
      lacks.push(
        `memory: ${s.memoryCommittedMiB} of ${limit} MiB committed (${s.memoryTotalMiB} MiB × ${ratio}), ${vm.memoryMiB} more do not fit`,
      );
    }
  }
  if (s.memoryFreeMiB !== undefined && s.memoryFreeMiB < vm.memoryMiB) {
    lacks.push(`${s.memoryFreeMiB} MiB of memory free, ${vm.memoryMiB} needed`);
  }
  if (s.cpus !== undefined && s.vcpusCommitted !== undefined) {
    const ratio = s.cpuOvercommit ?? DEFAULT_CPU_OVERCOMMIT;
    const limit = Math.floor(s.cpus * ratio);
    if (s.vcpusCommitted + vm.vcpus > limit) {
      lacks.push(
        `vCPUs: ${s.vcpusCommitted} of ${limit} committed (${s.cpus} CPUs × ${ratio}), ${vm.vcpus} more do not fit`,
      );
    }
  }
  return lacks;
}

/**
 * Picks a host for `proxy`: among reachable hosts that are not cordoned and where it fits
 * ({@link hostLacks}: pool space, `maxProxies`, memory and vCPUs within the host's overcommit,
 * free memory for `vm`), the one
 * with the fewest of our proxies per unit of weight; ties go by weighted rendezvous hashing of
 * (proxy, host), so a burst of proxies that all saw the same counts spreads over the hosts in
 * proportion to their weights, and the same proxy always ties to the same host. Returns the
 * reason when none fits (no reachable host, every one cordoned, or none with room: each host and
 * what it lacks).
 */
export function pickHost(
  survey: readonly HostSurvey[],
  proxy: string,
  vm?: VmNeed,
  needBytes = PLACEMENT_NEED_BYTES,
): { host: string } | { host?: undefined; reason: string; capacity: boolean } {
  const reachable = survey.filter((s) => s.reachable);
  if (reachable.length === 0) {
    const why = survey.map((s) => `${s.host}: ${s.error ?? 'unreachable'}`).join('; ');
    return { reason: `no reachable host (${why})`, capacity: false };
  }
  // A cordoned host (its maintenance workflow, docs/hosts.md) takes no new proxy, room or not.
  const cordoned = reachable.filter((s) => s.cordoned === true).map((s) => `${s.host}: cordoned`);
  const open = reachable.filter((s) => s.cordoned !== true);
  if (open.length === 0) {
    const why = [...cordoned, ...survey.filter((s) => !s.reachable).map((s) => `${s.host}: unreachable`)].join('; ');
    return { reason: `every reachable host is cordoned; uncordon one or add a host (${why})`, capacity: true };
  }
  const lacks = open.map((s) => ({ s, lacks: hostLacks(s, needBytes, vm) }));
  const fits = lacks.filter((l) => l.lacks.length === 0).map((l) => l.s);
  if (fits.length === 0) {
    if (
      cordoned.length === 0 &&
      lacks.every((l) => l.lacks.length === 1 && (l.s.poolAvailableBytes ?? 0) < needBytes)
    ) {
      // Only pool space is short: the reason placement has always given.
      const why = reachable.map((s) => `${s.host}: ${s.poolAvailableBytes ?? 0} bytes free`).join('; ');
      return { reason: `no host has ${needBytes} bytes free in its pool (${why})`, capacity: true };
    }
    const what = vm === undefined ? 'a proxy' : `a VM of ${vm.memoryMiB} MiB and ${vm.vcpus} vCPUs`;
    const why = [
      ...lacks.map((l) => `${l.s.host}: ${l.lacks.join(', ')}`),
      ...cordoned,
      ...survey.filter((s) => !s.reachable).map((s) => `${s.host}: unreachable`),
    ].join('; ');
    return { reason: `no host has room for ${what} (${why})`, capacity: true };
  }
  const weight = (s: HostSurvey): number => Math.max(1, s.weight);
  const load = (s: HostSurvey): number => (s.proxies ?? 0) / weight(s);
  const minLoad = Math.min(...fits.map(load));
  // Within one proxy of the least loaded (per weight) counts as a tie: rendezvous decides.
  const tied = fits.filter((s) => load(s) - minLoad < 1 / weight(s));
  const rendezvous = (s: HostSurvey): number => -weight(s) / Math.log(unitHash(`${proxy}\0${s.host}`));
  const best = [...tied].sort((a, b) => rendezvous(b) - rendezvous(a) || a.host.localeCompare(b.host))[0]!;
  return { host: best.host };
}

/** Capacity-wait backoff: 30 s, doubling, at most 10 minutes. */
export function capacityBackoffMs(attempt: number): number {
  return Math.min(30_000 * 2 ** Math.max(0, attempt), 600_000);
}
