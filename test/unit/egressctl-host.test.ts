/**
 * egressctl host commands against the API over the fake host store (a real listening Fastify, the
 * commands' own HTTP calls): list and get print the hosts (json and table; a never-surveyed host
 * reads "-" in the survey columns), cordon/drain/uncordon send --reason, an unknown host exits 3
 * naming the known ones, a read-only token exits 1, a refusal exits 4 with its reason, a bad
 * ENTRY/HOST exits 2; drain --wait prints the progress until Drained, and exits 1 at --wait-ms or once
 * the drain is past its --deadline-ms.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import type { Context } from '../../cli/command.ts';
import { findCommand } from '../../cli/commands/index.ts';
import { CliError, EXIT } from '../../cli/http.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { OptionError } from '../../runtime/options.ts';
import { FakeHosts, hostsOf } from '../support/fake-hosts.ts';
import { FakeStore } from '../support/fake-store.ts';

const ADMIN = 't'.repeat(32);
const READER = 'r'.repeat(32);

describe('egressctl host commands', () => {
  let app: FastifyInstance;
  let base: URL;
  let hosts: FakeHosts;

  before(async () => {
    app = await buildApi({
      store: new FakeStore(),
      hosts: hostsOf(() => hosts),
      log: createLogger({ name: 'egressctl-host-test', level: 'silent' }),
      auth: new TokenAuth([
        { token: ADMIN, role: 'admin' },
        { token: READER, role: 'read' },
      ]),
      taskQueue: 'tq',
      writesPerMinute: 0,
    });
    base = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
  });
  after(() => app.close());
  beforeEach(() => {
    hosts = new FakeHosts();
    hosts.add('lab', 'h1', { proxies: 2 });
    hosts.add('lab', 'h2', { survey: false, status: { phase: 'Cordoned', cordoned: true, reason: 'fan' } });
  });

  /** Runs `egressctl <argv>` (its words first) in process; resolves with the exit code and stdout lines. */
  async function egressctl(argv: string[], token = ADMIN): Promise<{ code: number; lines: string[] }> {
    const command = findCommand(argv.filter((a) => !a.startsWith('-')));
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
      out: (l) => lines.push(...l.split('\n')),
      api: () => Promise.resolve({ base, token, timeoutMs: 5_000 }),
    };
    return { code: await command.run(ctx), lines };
  }
  const fails = (code: number, message: RegExp, argv: string[], token?: string) =>
    assert.rejects(egressctl(argv, token), (err: unknown) => {
      assert.ok(err instanceof CliError, String(err));
      assert.equal(err.code, code, err.message);
      assert.match(err.message, message);
      return true;
    });

  it('host list prints every known host; --entry filters; --output json is the API body', async () => {
    const table = await egressctl(['host', 'list']);
    assert.equal(table.code, EXIT.ok);
    assert.match(table.lines[0]!, /^ENTRY +HOST +PHASE +REACHABLE +PROXIES +MEMORYFREEMIB/);
    assert.match(table.lines[1]!, /^lab +h1 +Schedulable +true +2 +2048 +4096 +4/);
    // Never surveyed: the survey columns are "-".
    assert.match(table.lines[2]!, /^lab +h2 +Cordoned +- +0 +- +- +- +- +fan$/);
    const json = await egressctl(['host', 'list', '--entry', 'lab', '--output', 'json']);
    const body = JSON.parse(json.lines[0]!) as { hosts: { host: string }[] };
    assert.deepEqual(
      body.hosts.map((h) => h.host),
      ['h1', 'h2'],
    );
    assert.deepEqual(JSON.parse((await egressctl(['host', 'list', '--entry', 'none', '--output', 'json'])).lines[0]!), {
      hosts: [],
    });
  });

  it('host get prints one host; an unknown one exits 3 naming the known hosts; a bad ENTRY/HOST exits 2', async () => {
    const r = await egressctl(['host', 'get', 'lab/h1', '--output', 'json']);
    assert.deepEqual(JSON.parse(r.lines[0]!), {
      entry: 'lab',
      host: 'h1',
      phase: 'Schedulable',
      cordoned: false,
      reachable: true,
      surveyedAt: '2026-12-01T10:00:00.000Z',
      memoryTotalMiB: 4096,
      memoryFreeMiB: 2048,
      cpus: 4,
      proxies: 2,
    });
    await fails(EXIT.notFound, /no host lab\/h3: the known hosts of lab are h1, h2/, ['host', 'get', 'lab/h3']);
    await fails(EXIT.usage, /expected ENTRY\/HOST \(e\.g\. lab\/hv1\)/, ['host', 'get', 'h1']);
  });

  it('cordon and uncordon send --reason and print the status; a read token exits 1; a refusal exits 4', async () => {
    const c = await egressctl(['host', 'cordon', 'lab/h1', '--reason', 'kernel update', '--output', 'json']);
    assert.equal(c.code, EXIT.ok);
    assert.deepEqual(
      (JSON.parse(c.lines[0]!) as { status: { phase: string; reason: string } }).status.reason,
      'kernel update',
    );
    const u = await egressctl(['host', 'uncordon', 'lab/h1']);
    assert.match(u.lines[1]!, /^lab +h1 +Schedulable/);
    assert.deepEqual(
      hosts.actions.map((a) => [a.action, a.req]),
      [
        ['cordon', { reason: 'kernel update' }],
        ['uncordon', {}],
      ],
    );
    await fails(
      EXIT.failure,
      /403 FORBIDDEN: .*cordoning a host needs a token with the admin role/,
      ['host', 'cordon', 'lab/h1'],
      READER,
    );
    hosts.refuseWith = 'the host is being uncordoned';
    await fails(
      EXIT.conflict,
      /409 HOST_UPDATE_REFUSED: host lab\/h1 refused the drain: the host is being uncordoned/,
      ['host', 'drain', 'lab/h1'],
    );
    await fails(EXIT.usage, /400 INVALID_FIELD: body field reason/, [
      'host',
      'cordon',
      'lab/h1',
      '--reason',
      'x'.repeat(501),
    ]);
  });

  it('drain --wait prints each change of the progress until Drained', async () => {
    // The fake drains one proxy per read of the host.
    const h = hosts.hosts.get('lab/h1')!;
    const getHost = hosts.getHost.bind(hosts);
    hosts.getHost = async (entry, host) => {
      if (h.status.drain && h.proxies > 0) {
        h.proxies--;
        h.status = {
          ...h.status,
          phase: h.proxies === 0 ? 'Drained' : 'Draining',
          drain: {
            ...h.status.drain,
            remaining: h.proxies,
            proxies: [{ name: 'p1', state: h.proxies === 0 ? 'gone' : 'asked' }],
          },
        };
      }
      return getHost(entry, host);
    };
    const r = await egressctl(['host', 'drain', 'lab/h1', '--wait', '--interval-ms', '1', '--wait-ms', '10000']);
    assert.equal(r.code, EXIT.ok);
    assert.equal(r.lines.length, 2, r.lines.join('\n'));
    assert.match(r.lines[0]!, /Z Draining remaining=1 proxies=1 asked=1 gone=0$/);
    assert.match(r.lines[1]!, /Z Drained remaining=0 proxies=0 asked=0 gone=1$/);
  });

  it('drain --deadline-ms sends deadlineMs; --wait exits 1 once the drain is overdue; a bad one exits 2', async () => {
    const h = hosts.hosts.get('lab/h1')!;
    const getHost = hosts.getHost.bind(hosts);
    let reads = 0;
    hosts.getHost = async (entry, host) => {
      // The second read finds the drain past its deadline with both proxies still there.
      if (h.status.drain && ++reads === 2) h.status = { ...h.status, drain: { ...h.status.drain, overdue: true } };
      return getHost(entry, host);
    };
    const argv = ['host', 'drain', 'lab/h1', '--deadline-ms', '60000', '--wait', '--interval-ms', '1'];
    const r = await egressctl([...argv, '--wait-ms', '10000']);
    assert.equal(r.code, EXIT.failure, r.lines.join('\n'));
    assert.deepEqual(hosts.actions.at(-1)?.req, { deadlineMs: 60_000 });
    assert.match(r.lines.at(-1)!, /Z Draining overdue remaining=2 proxies=2 /);
    assert.ok(!r.lines[0]!.includes('overdue'), r.lines.join('\n'));
    const n = hosts.actions.length;
    for (const bad of ['999', '1.5', 'soon', String(30 * 86_400_000 + 1)]) {
      await assert.rejects(
        egressctl(['host', 'drain', 'lab/h1', '--deadline-ms', bad]),
        (err: unknown) => err instanceof OptionError && /^--deadline-ms must be /.test(err.message),
        bad,
      );
    }
    assert.equal(hosts.actions.length, n, 'nothing sent for a bad --deadline-ms');
  });

  it('drain --wait exits 1 at --wait-ms when the host does not drain', async () => {
    await fails(EXIT.failure, /host lab\/h1 is Draining with 2 proxies left, not Drained, after --wait-ms 50/, [
      'host',
      'drain',
      'lab/h1',
      '--wait',
      '--interval-ms',
      '10',
      '--wait-ms',
      '50',
    ]);
  });
});
