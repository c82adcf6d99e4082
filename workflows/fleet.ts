// The fleet-wide workflows, each run by a Temporal Schedule the worker keeps in place: orphan GC
// (our marked domains whose proxy has no open workflow and that are older than the minimum age,
// then per-proxy volumes without a domain that carry our owner record, by the same rules)
// and provider health (every host's survey, which operators and placement read).
import { setHandler } from '@temporalio/workflow';
import { CODES } from '../contracts/errors.ts';
import type { GcHostResult, GcResult, ProviderHealthResult } from '../contracts/fleet.ts';
import { gcResultQuery, healthResultQuery } from '../contracts/messages.ts';
import { failureInfo } from './failures.ts';
import { quick, rpc } from './stubs.ts';

/**
 * Deletes orphans on every host of every entry: domains with this installation's mark whose
 * proxy workflow is not open and whose mark is older than `minAgeMs`. Never touches unmarked
 * domains, other owners' or other entries' (listing filters by mark; the delete re-checks it).
 */
export async function orphanGcWorkflow(input: { minAgeMs: number }): Promise<GcResult> {
  const result: GcResult = { at: new Date().toISOString(), minAgeMs: input.minAgeMs, hosts: [] };
  setHandler(gcResultQuery, () => result);
  for (const { entry, host } of await quick.listHosts()) {
    const r: GcHostResult = { entry, host, kept: [], deleted: [], refused: [] };
    result.hosts.push(r);
    try {
      for (const d of await rpc.listMarkedDomains({ entry, host })) {
        const age = Date.now() - Date.parse(d.createdAt);
        if (!(age >= input.minAgeMs) || (await quick.proxyWorkflowOpen({ entry, name: d.proxyName }))) {
          r.kept.push(d.domain);
          continue;
        }
        try {
          await rpc.deleteOrphan({ entry, host, name: d.proxyName });
          r.deleted.push(d.domain);
        } catch (err) {
          const f = failureInfo(err);
          if (f.code === CODES.adoptionRefused) r.refused.push(d.domain);
          else throw err;
        }
      }
      r.volumes = await collectVolumes(entry, host, input.minAgeMs);
    } catch (err) {
      const f = failureInfo(err);
      r.error = `${f.code}: ${f.message}`;
    }
  }
  return result;
}

/**
 * Deletes per-proxy volumes left without a domain that carry our owner record, once the record's
 * run is older than `minAgeMs` and the proxy's workflow is not open (the activity checks again).
 */
async function collectVolumes(
  entry: string,
  host: string,
  minAgeMs: number,
): Promise<{ kept: string[]; deleted: string[] }> {
  const out = { kept: [] as string[], deleted: [] as string[] };
  for (const v of await rpc.listOrphanVolumes({ entry, host })) {
    const age = Date.now() - Date.parse(v.createdAt);
    if (!(age >= minAgeMs) || (await quick.proxyWorkflowOpen({ entry, name: v.name }))) {
      out.kept.push(v.name);
      continue;
    }
    const deleted = await rpc.deleteOrphanVolumes({ entry, host, name: v.name, createdAt: v.createdAt });
    (deleted.length > 0 ? out.deleted : out.kept).push(v.name);
  }
  return out;
}

/** Surveys every host of every entry: Ready n/m, reachability, latency, versions, pool space. */
export async function providerHealthWorkflow(): Promise<ProviderHealthResult> {
  const result: ProviderHealthResult = { at: new Date().toISOString(), entries: [] };
  setHandler(healthResultQuery, () => result);
  const hosts = await quick.listHosts();
  const entries = [...new Set(hosts.map((h) => h.entry))];
  for (const entry of entries) {
    const survey = await rpc.surveyHosts({ entry });
    result.entries.push({
      entry,
      ready: survey.filter((s) => s.reachable).length,
      total: survey.length,
      hosts: survey,
    });
  }
  return result;
}
