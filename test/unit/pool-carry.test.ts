/**
 * The pool's carried state packed (workflows/pool/carry.ts): what a run carries reads back as the
 * state it was made from, field for field (fields the layout does not know included); a state
 * carried in the record shape by the builds before it reads as it is; and a pool of 1,000 members
 * and 100 spares carries well under the SDK's payload warning.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { resolvePoolSpec } from '../../contracts/pool.ts';
import type { MemberReport } from '../../contracts/pool.ts';
import type { CarriedPoolState, MemberRecord, PoolState, PoolWorkflowInput } from '../../contracts/pool-state.ts';
import { carriedState, packMember, uncarried, unpackMember } from '../../workflows/pool/carry.ts';
import { applySpec, newPoolState } from '../../workflows/pool/plan.ts';
import { specOfState } from '../../workflows/pool/status.ts';
import { PoolSim, T0, iso } from '../support/pool-sim.ts';

const AT = T0 + 6 * 3_600_000;
/** The SDK's payload warning (@temporalio/worker DEFAULT_PAYLOADS_WARN_SIZE, the server's limit.blobSize.warn). */
const PAYLOAD_WARN_BYTES = 512 * 1024;

function pool(members: MemberRecord[]): PoolState {
  const spec = resolvePoolSpec({
    entry: 'e1',
    name: 'webpool',
    size: 1000,
    spares: 100,
    template: { imageKey: 'img' },
  });
  return { ...newPoolState(spec, iso(T0), 7), members };
}

/** A member as a pool of that size holds it at rest: serving (or a spare), Healthy, with an exit IP. */
function restingMember(i: number): MemberRecord {
  const suffix = i.toString(36).padStart(5, '0');
  const serving = i < 1000;
  const report: MemberReport = {
    name: `webpool-${suffix}`,
    state: 'Running',
    health: 'True',
    healthSince: iso(T0 + 1000 * i + 123),
    port: 3128,
    serving,
    at: iso(T0 + 1000 * i + 4567),
    host: `host-${(i % 10) + 1}`,
    ip: `10.${(i >> 8) & 255}.${i & 255}.${(i * 7) & 255}`,
    exitIp: `198.51.${(i >> 8) & 255}.${i & 255}`,
  };
  return {
    name: report.name,
    revision: 3,
    createdAtMs: T0 + 1000 * i,
    role: serving ? 'serving' : 'spare',
    sentServing: serving,
    sentServingAtMs: T0 + 1000 * i + 2000,
    startedAtMs: T0 + 1000 * i + 800,
    everReady: true,
    ...(serving ? { hadServed: true } : {}),
    report,
  };
}

describe('the carried state, packed', () => {
  it('reads back as the state it was packed from, every field of every kind of member', () => {
    const members: MemberRecord[] = [
      restingMember(1),
      restingMember(1001),
      // Starting: no report yet, its start in flight, a rotation deadline.
      {
        name: 'webpool-new01',
        revision: 4,
        createdAtMs: AT - 10,
        expiresAtMs: AT + 86_400_000,
        role: 'spare',
        sentServing: false,
        starting: true,
        everReady: false,
      },
      // Leaving after it failed: condemned, drained, its delete sent; a report with every optional field.
      {
        ...restingMember(2),
        role: 'leaving',
        condemned: 'Unhealthy since 2026-01-01T00:00:02.123Z (PROBE_FAILED: refused)',
        leavingSinceMs: AT - 30_000,
        leftDiscoveryAtMs: AT - 20_000,
        hadServed: true,
        deleteSent: true,
        report: {
          ...restingMember(2).report!,
          health: 'False',
          serving: false,
          lastError: 'PROBE_FAILED: connect refused by 10.0.2.14:3128',
          hostUnreachableSince: iso(AT - 45_000),
          probesFailing: true,
        },
      },
      // Times not in toISOString's form, optional flags set false, a role and fields this layout
      // does not know (a later build's), a report naming another member.
      {
        ...restingMember(3),
        role: 'draining' as MemberRecord['role'],
        hadServed: false,
        deleteSent: false,
        starting: false,
        futureField: { a: 1 },
        report: {
          ...restingMember(3).report!,
          name: 'webpool-other',
          healthSince: '2026-01-01T00:00:03Z',
          at: '2026-01-01T01:00:00.000+01:00',
          probesFailing: undefined,
          hostUnreachableSince: 1234 as unknown as string,
          newThing: 'x',
        } as MemberReport,
      } as MemberRecord,
    ];
    const state = pool(members);
    const carried = carriedState(state, AT);
    assert.equal(carried.members, undefined, 'the members go packed only');
    const back = uncarried(JSON.parse(JSON.stringify(carried)) as CarriedPoolState);
    // JSON drops what is undefined: compare with the state as JSON would carry it.
    assert.deepEqual(back, JSON.parse(JSON.stringify(state)));
  });

  it('a pool simulated through a rollout, carried at every step, reads back unchanged', () => {
    const sim = new PoolSim({ entry: 'e1', name: 'p', size: 4, spares: 1, template: { imageKey: 'a' } }, 3);
    sim.pass();
    sim.runUntil((s) => s.ready(), 'Ready');
    applySpec(sim.state, resolvePoolSpec({ ...specOfState(sim.state), template: { imageKey: 'b' } }), iso(sim.now));
    sim.pass();
    let checked = 0;
    sim.checks.push((s) => {
      const json = JSON.parse(JSON.stringify(s.state)) as PoolState;
      assert.deepEqual(uncarried(JSON.parse(JSON.stringify(carriedState(s.state, s.now))) as CarriedPoolState), json);
      checked++;
    });
    sim.runUntil((s) => s.ready() && s.state.members.every((m) => m.revision === 2), 'rolled to revision 2');
    assert.ok(checked > 10, `checked at ${checked} steps`);
  });

  it('a state carried as records (builds before the packed form) reads as it is', () => {
    const state = pool([restingMember(1), restingMember(2)]);
    const old = JSON.parse(JSON.stringify(state)) as CarriedPoolState;
    assert.deepEqual(uncarried(old), old);
    // And one such state as a run of an earlier build recorded it (test/replay/).
    const history = JSON.parse(
      readFileSync(new URL('../replay/pool-continue-settled.sdk-1.24.0.json', import.meta.url), 'utf8'),
    ) as { events: { workflowExecutionContinuedAsNewEventAttributes?: { input: { payloads: { data: string }[] } } }[] };
    const can = history.events.find((e) => e.workflowExecutionContinuedAsNewEventAttributes);
    const input = JSON.parse(
      Buffer.from(can!.workflowExecutionContinuedAsNewEventAttributes!.input.payloads[0]!.data, 'base64').toString(),
    ) as PoolWorkflowInput;
    const recorded = input.carried!;
    assert.equal(recorded.members?.length, 3);
    const read = uncarried(recorded);
    assert.deepEqual(read.members, recorded.members);
    assert.deepEqual(uncarried(JSON.parse(JSON.stringify(carriedState(read, AT))) as CarriedPoolState), read);
  });

  it('a layout this build does not know is refused, not read as a pool without members', () => {
    const carried = carriedState(pool([restingMember(1)]), AT);
    assert.throws(() => uncarried({ ...carried, packedMembers: { ...carried.packedMembers!, v: 2 } }), /layout 2/);
  });

  it('1,000 members and 100 spares at rest carry under a third of the payload warning, about 120 bytes a member', () => {
    const members = Array.from({ length: 1100 }, (_, i) => restingMember(i));
    const state = pool(members);
    const records = JSON.stringify(state).length;
    const packed = JSON.stringify(carriedState(state, AT)).length;
    const perMember = (packed - JSON.stringify({ ...state, members: [] }).length) / members.length;
    // A row: name, revision, role, flags, 3 times, condemned's place, and the report's state,
    // health, 2 times, port, flags, host, ip and exit IP: about 120 bytes with this pool's names
    // and addresses. A record with its report was about 420.
    assert.ok(
      perMember <= 130,
      `${perMember.toFixed(0)} bytes a member packed (records: ${(records / 1100).toFixed(0)})`,
    );
    assert.ok(packed < PAYLOAD_WARN_BYTES / 3, `${packed} bytes carried`);
    assert.ok(records > 2.5 * packed, `records ${records} bytes, packed ${packed}`);
  });

  it('a row reads back alone, its times relative to the carry', () => {
    const m = restingMember(5);
    const row = packMember(m, AT);
    assert.equal(row[0], m.name);
    assert.equal(row[4], m.createdAtMs - AT);
    assert.deepEqual(unpackMember(row, AT), m);
  });
});
