/**
 * A stand-in for a pool member, for the pool's workflow tests: a workflow started under the
 * member's ID (`proxy/<entry>/<name>`) that keeps a member's summary, applies the pool's `serving`
 * signal and reports every change to the pool (`poolMemberSignal`), as a member proxy does. The
 * test plays the member's life (booted, Healthy, Failed...) by the `play` signal; the pool's
 * deletion (the fake deletePoolMember) plays `Deleted`, after which the stand-in ends.
 */
import { condition, defineQuery, defineSignal, getExternalWorkflowHandle, setHandler } from '@temporalio/workflow';
import { memberServingSignal, poolMemberSignal } from '../../contracts/messages.ts';
import type { MemberReport } from '../../contracts/pool.ts';

export const STAND_IN_WORKFLOW_TYPE = 'poolMemberStandIn';

/** `hostUnreachableSince: null` clears it (its host answers again). */
export type MemberPatch = Partial<Pick<MemberReport, 'state' | 'health' | 'host' | 'ip' | 'serving' | 'lastError'>> & {
  hostUnreachableSince?: string | null;
};

export interface StandInInput {
  /** The pool's workflow ID (reports go there). */
  pool: string;
  name: string;
  /** The first report (after `Provisioning`): e.g. Running and Healthy at once. */
  first?: MemberPatch;
}

export interface StandInView {
  report: MemberReport;
  /** Every serving value the pool sent, in order. */
  served: boolean[];
}

export const standInPlaySignal = defineSignal<[MemberPatch]>('play');
export const standInViewQuery = defineQuery<StandInView>('view');

export async function poolMemberStandIn(input: StandInInput): Promise<StandInView> {
  const now = (): string => new Date().toISOString();
  let report: MemberReport = {
    name: input.name,
    state: 'Provisioning',
    health: 'Unknown',
    healthSince: now(),
    port: 3128,
    serving: false,
    at: now(),
  };
  const served: boolean[] = [];
  const changes: MemberPatch[] = [input.first ?? {}];
  const change = (patch: MemberPatch): void => {
    changes.push(patch);
  };
  setHandler(memberServingSignal, ({ serving }) => {
    served.push(serving);
    change({ serving });
  });
  setHandler(standInPlaySignal, change);
  setHandler(standInViewQuery, () => ({ report, served }));
  const pool = getExternalWorkflowHandle(input.pool);
  for (;;) {
    await condition(() => changes.length > 0);
    const patch = Object.assign({}, ...changes.splice(0)) as MemberPatch;
    const healthSince = patch.health !== undefined && patch.health !== report.health ? now() : report.healthSince;
    const { hostUnreachableSince, ...rest } = patch;
    report = { ...report, ...rest, healthSince, at: now() };
    // null clears it (undefined does not survive the signal's JSON).
    if (hostUnreachableSince === null) delete report.hostUnreachableSince;
    else if (hostUnreachableSince !== undefined) report.hostUnreachableSince = hostUnreachableSince;
    await pool.signal(poolMemberSignal, report).catch(() => undefined); // the pool ended: nothing to tell
    if (report.state === 'Deleted' || report.state === 'Failed') return { report, served };
  }
}
