/**
 * A stand-in for a pool, for the proxy workflow's tests of pool members: a workflow started under
 * the pool's ID that keeps every member report it is sent (`poolMemberSignal`) and answers them
 * by query, so a test sees exactly what a member proxy told its pool, and how often. It never ends
 * on its own (the test terminates it).
 */
import { condition, defineQuery, setHandler } from '@temporalio/workflow';
import { poolMemberSignal } from '../../contracts/messages.ts';
import type { MemberReport } from '../../contracts/pool.ts';

export const REPORT_SINK_WORKFLOW_TYPE = 'memberReportSink';
export const sinkReportsQuery = defineQuery<MemberReport[]>('reports');

export async function memberReportSink(): Promise<void> {
  const reports: MemberReport[] = [];
  setHandler(poolMemberSignal, (r) => {
    reports.push(r);
  });
  setHandler(sinkReportsQuery, () => reports);
  await condition(() => false);
}
