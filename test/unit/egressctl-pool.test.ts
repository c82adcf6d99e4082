/**
 * egressctl pool commands against the API over the fake stores (a real listening Fastify, the
 * commands' own HTTP calls): create sends the spec its options say and refuses a bad one (exit 2
 * naming the field) before the API; update changes only the options given (a group in part keeps
 * the pool's other fields, template options keep its image); get --output json has the counts, the
 * rollout and members[]; a refusal by the pool exits 4 with its reason; delete --wait and watch end.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import type { Context } from '../../cli/command.ts';
import { findCommand } from '../../cli/commands/index.ts';
import { CliError, EXIT } from '../../cli/http.ts';
import type { PoolSpecPatch } from '../../contracts/pool.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { OptionError } from '../../runtime/options.ts';
import { FakePools, FakeStore, fakeMember } from '../support/fake-store.ts';

const TOKEN = 't'.repeat(32);

describe('egressctl pool commands', () => {
  let app: FastifyInstance;
  let base: URL;
  const store = new FakeStore();
  const pools = new FakePools();

  before(async () => {
    app = await buildApi({
      store,
      pools,
      log: createLogger({ name: 'egressctl-pool-test', level: 'silent' }),
      auth: new TokenAuth([{ token: TOKEN, role: 'admin' }]),
      taskQueue: 'tq',
      writesPerMinute: 0,
    });
    base = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
  });
  after(() => app.close());

  /** Runs `egressctl <argv>` (its words first) in process; resolves with the exit code and stdout lines. */
  async function egressctl(...argv: string[]): Promise<{ code: number; lines: string[] }> {
    const words = argv.filter((a) => !a.startsWith('-'));
    const command = findCommand(words);
    assert.ok(command, argv.join(' '));
    const parsed = parseArgs({
      args: argv,
      options: { ...command.options, output: { type: 'string' } },
      allowPositionals: true,
      strict: true,
    });
    const lines: string[] = [];
    const ctx: Context = {
      args: parsed.positionals.slice(command.name.split(' ').length),
      values: parsed.values,
      json: parsed.values['output'] === 'json',
      timeoutMs: 5_000,
      out: (l) => lines.push(l),
      api: () => Promise.resolve({ base, token: TOKEN, timeoutMs: 5_000 }),
    };
    return { code: await command.run(ctx), lines };
  }
  const fails = async (code: number, message: RegExp, ...argv: string[]) =>
    assert.rejects(egressctl(...argv), (err: unknown) => {
      assert.ok(err instanceof CliError || err instanceof OptionError, String(err));
      assert.equal(err instanceof CliError ? err.code : EXIT.usage, code, err.message);
      assert.match(err.message, message);
      return true;
    });

  it('pool create sends the spec of its options; the same again is exit 0 with created false', async () => {
    const argv = ['pool', 'create', 'lab/crawl', '--size', '2', '--image', 'deb', '--spares', '1'];
    const extra = ['--max-surge', '2', '--max-unavailable', '0', '--memory-mib', '1024', '--avoid-host', 'hv9'];
    const extra2 = ['--scale-down-policy', 'oldest', '--jitter', '0.2', '--unhealthy-grace-ms', '30000'];
    extra2.push('--host-failure-grace-ms', '90000');
    const r = await egressctl(...argv, ...extra, ...extra2, '--output', 'json');
    assert.equal(r.code, EXIT.ok);
    assert.equal((JSON.parse(r.lines[0]!) as { created: boolean }).created, true);
    assert.deepEqual(pools.pools.get('pool/lab/crawl')?.spec, {
      entry: 'lab',
      name: 'crawl',
      size: 2,
      spares: 1,
      template: { imageKey: 'deb', vm: { memoryMiB: 1024 } },
      placement: { avoidHosts: ['hv9'] },
      rollout: { maxSurge: 2, maxUnavailable: 0 },
      replacement: { unhealthyGraceMs: 30_000, hostFailureGraceMs: 90_000 },
      rotation: { jitter: 0.2 },
      scaleDownPolicy: 'oldest',
    });
    const again = await egressctl(...argv, ...extra, ...extra2, '--output', 'json');
    assert.equal((JSON.parse(again.lines[0]!) as { created: boolean }).created, false);
    await fails(EXIT.conflict, /differs in size/, 'pool', 'create', 'lab/crawl', '--size', '3', '--image', 'deb');
  });

  it('pool create refuses a bad spec naming the field before the API (exit 2)', async () => {
    const before = pools.pools.size;
    await fails(
      EXIT.usage,
      /rollout\.maxSurge and rollout\.maxUnavailable are both 0/,
      'pool',
      'create',
      'lab/x',
      '--size',
      '1',
      '--image',
      'deb',
      '--max-surge',
      '0',
    );
    await fails(
      EXIT.usage,
      /^the pool spec is not valid: size must be a whole number from 0 to 1000/,
      'pool',
      'create',
      'lab/x',
      '--size',
      '1001',
      '--image',
      'deb',
    );
    await fails(EXIT.usage, /needs --image/, 'pool', 'create', 'lab/x', '--size', '1');
    await fails(EXIT.usage, /expected ENTRY\/POOL/, 'pool', 'create', 'x', '--size', '1', '--image', 'deb');
    await fails(
      EXIT.usage,
      /422 UNKNOWN_IMAGE: template\.imageKey nope/,
      'pool',
      'create',
      'lab/x',
      '--size',
      '1',
      '--image',
      'nope',
    );
    assert.equal(pools.pools.size, before);
  });

  it('pool get --output json: desired, healthy, available, updated, the rollout and members[]', async () => {
    const p = pools.pools.get('pool/lab/crawl')!;
    p.status.healthy = 1;
    p.status.available = 1;
    p.status.updated = 1;
    p.status.rollout = { revision: 1, startedAt: 'a', lastProgressAt: 'b', step: 'surging 1' };
    p.status.members = [fakeMember({ name: 'crawl-aaaaa', ageMs: 1234 })];
    const r = await egressctl('pool', 'get', 'lab/crawl', '--output', 'json');
    const v = JSON.parse(r.lines[0]!) as Record<string, unknown> & { members: Record<string, unknown>[] };
    assert.deepEqual(
      [v['desired'], v['healthy'], v['available'], v['updated'], (v['rollout'] as { step: string }).step],
      [2, 1, 1, 1, 'surging 1'],
    );
    const m = v.members[0]!;
    assert.deepEqual(
      [m['name'], m['host'], m['state'], m['healthy'], m['imageKey'], m['ageMs']],
      ['crawl-aaaaa', 'hv1', 'Running', 'True', 'deb', 1234],
    );
    p.status.door = {
      listen: '127.0.0.1:3130',
      exits: [{ name: 'crawl-aaaaa', role: 'serving', up: false }],
      at: '2026-12-06T12:00:00.000Z',
    };
    const table = await egressctl('pool', 'get', 'lab/crawl');
    assert.match(table.lines.join('\n'), /crawl-aaaaa\s+serving\s+Running\s+True\s+hv1/);
    assert.match(
      table.lines.join('\n'),
      /door 127\.0\.0\.1:3130: crawl-aaaaa DOWN \(reported 2026-12-06T12:00:00\.000Z\)/,
    );
    const withDoor = JSON.parse((await egressctl('pool', 'get', 'lab/crawl', '--output', 'json')).lines[0]!) as {
      door: { listen: string };
    };
    assert.equal(withDoor.door.listen, '127.0.0.1:3130');
    const list = (await egressctl('pool', 'list', '--entry', 'lab')).lines.join('\n').split('\n');
    assert.match(list[0]!, /^ENTRY\s+NAME\s+PHASE\s+DESIRED/);
    assert.match(list[1]!, /^lab\s+crawl\s+Ready\s+2/);
    await fails(EXIT.notFound, /404 NOT_FOUND/, 'pool', 'get', 'lab/none');
  });

  it('pool update changes only the options given', async () => {
    await egressctl('pool', 'update', 'lab/crawl', '--max-unavailable', '1');
    const patch = (pools.updates.at(-1) as { patch: PoolSpecPatch }).patch;
    assert.deepEqual(Object.keys(patch), ['rollout']);
    // The pool's other rollout fields are sent as they are (PATCH replaces the whole field).
    assert.deepEqual(patch.rollout, {
      maxSurge: 2,
      maxUnavailable: 1,
      minHealthyMs: 10_000,
      progressDeadlineMs: 600_000,
    });
    const r = await egressctl('pool', 'update', 'lab/crawl', '--vcpus', '2', '--output', 'json');
    const sent = (pools.updates.at(-1) as { patch: PoolSpecPatch }).patch;
    assert.deepEqual(sent.template, { imageKey: 'deb', vm: { memoryMiB: 1024, vcpus: 2 } });
    assert.equal((JSON.parse(r.lines[0]!) as { revision: number }).revision, 2);
    await fails(EXIT.usage, /at least one option/, 'pool', 'update', 'lab/crawl');
  });

  it('scale, pause, resume, rollback: a range is exit 2, a refusal exit 4 with its reason', async () => {
    await fails(EXIT.usage, /400 INVALID_FIELD: body field size/, 'pool', 'scale', 'lab/crawl', '--size', '1001');
    assert.equal((await egressctl('pool', 'scale', 'lab/crawl', '--size', '3')).code, EXIT.ok);
    const paused = await egressctl('pool', 'pause', 'lab/crawl', '--output', 'json');
    assert.equal((JSON.parse(paused.lines[0]!) as { paused: boolean }).paused, true);
    assert.equal((await egressctl('pool', 'resume', 'lab/crawl')).code, EXIT.ok);
    pools.add({ entry: 'lab', name: 'one', size: 0, template: { imageKey: 'deb' } });
    await fails(EXIT.conflict, /409 POOL_UPDATE_REFUSED: .*only one revision/, 'pool', 'rollback', 'lab/one');
    const back = await egressctl('pool', 'rollback', 'lab/crawl', '--revision', '1', '--output', 'json');
    assert.equal((JSON.parse(back.lines[0]!) as { revision: number }).revision, 1);
  });

  it('pool replace-member: MEMBER and --reason required (exit 2), sent as the pool update, an unknown member exit 4', async () => {
    pools.add(
      { entry: 'lab', name: 'ban', size: 1, template: { imageKey: 'deb' } },
      { members: [fakeMember({ name: 'ban-a1b2c' })] },
    );
    await fails(EXIT.usage, /needs MEMBER/, 'pool', 'replace-member', 'lab/ban');
    await fails(EXIT.usage, /needs --reason/, 'pool', 'replace-member', 'lab/ban', 'ban-a1b2c');
    const r = await egressctl(
      'pool',
      'replace-member',
      'lab/ban',
      'ban-a1b2c',
      '--reason',
      'banned',
      '--output',
      'json',
    );
    assert.equal(r.code, EXIT.ok, r.lines.join('\n'));
    assert.deepEqual(pools.updates.at(-1), { kind: 'replaceMember', request: { name: 'ban-a1b2c', reason: 'banned' } });
    assert.equal((JSON.parse(r.lines[0]!) as { replacedOnRequest: number }).replacedOnRequest, 1);
    await fails(
      EXIT.conflict,
      /409 POOL_UPDATE_REFUSED: .*no member ban-zzzzz/,
      'pool',
      'replace-member',
      'lab/ban',
      'ban-zzzzz',
      '--reason',
      'x',
    );
  });

  it('pool delete --wait ends 0 once deleted, 1 while still deleting; pool watch ends on its phase', async () => {
    const watched = await egressctl('pool', 'watch', 'lab/one', '--output', 'json', '--watch-ms', '3000');
    assert.equal(watched.code, EXIT.ok);
    assert.equal((JSON.parse(watched.lines[0]!) as { phase: string }).phase, 'Ready');
    pools.deleteEnds = false;
    assert.equal((await egressctl('pool', 'delete', 'lab/one', '--wait', '--wait-ms', '10')).code, EXIT.failure);
    pools.deleteEnds = true;
    assert.equal((await egressctl('pool', 'delete', 'lab/one', '--wait')).code, EXIT.ok);
    const after = await egressctl('pool', 'watch', 'lab/one', '--until', 'Ready', '--watch-ms', '3000');
    assert.equal(after.code, EXIT.ok, 'Deleted ends a watch');
    assert.match(after.lines[0]!, / Deleted desired=0/);
    await fails(
      EXIT.failure,
      /is Ready, not Paused, after --watch-ms 1/,
      'pool',
      'watch',
      'lab/crawl',
      '--until',
      'Paused',
      '--watch-ms',
      '1',
    );
  });
});
