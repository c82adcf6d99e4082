// Host placement and the capacity-wait backoff of the proxy lifecycle: pure, unit-tested on their own.
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

/**
 * Picks a host for `proxy`: among reachable hosts with at least `needBytes` free in the pool, the
 * one with the fewest of our proxies per unit of weight; ties go by weighted rendezvous hashing
 * of (proxy, host), so a burst of proxies that all saw the same counts spreads over the hosts in
 * proportion to their weights, and the same proxy always ties to the same host. Returns the
 * reason when none fits (no reachable host, or none with room).
 */
export function pickHost(
  survey: readonly HostSurvey[],
  proxy: string,
  needBytes = PLACEMENT_NEED_BYTES,
): { host: string } | { host?: undefined; reason: string; capacity: boolean } {
  const reachable = survey.filter((s) => s.reachable);
  if (reachable.length === 0) {
    const why = survey.map((s) => `${s.host}: ${s.error ?? 'unreachable'}`).join('; ');
    return { reason: `no reachable host (${why})`, capacity: false };
  }
  const fits = reachable.filter((s) => (s.poolAvailableBytes ?? 0) >= needBytes);
  if (fits.length === 0) {
    const why = reachable.map((s) => `${s.host}: ${s.poolAvailableBytes ?? 0} bytes free`).join('; ');
    return { reason: `no host has ${needBytes} bytes free in its pool (${why})`, capacity: true };
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
